(* duo TRACE [options]: the trace replayed on irmin-pack 3.7.2 and on pando
   through the OCaml binding, every result compared (see duo_core.ml);
   --only irmin|pando replays one alone, timed (--only null: no store,
   the driver's own cost).

   --api context (the default): pando through Pando_context, Octez's
   CONTEXT, and both stores used as Octez uses its contexts, every path of
   the trace under data/. --api raw: pando through Pando's TezEdge-shaped
   functions, on the trace's own paths (commit hashes are then those the
   trace recorded). *)
let api = ref "context"
let check_reader = ref false

let () =
  Duo_core.parse_args
    ~extra:
      [
        ("--api", Arg.Set_string api, "context|raw how pando is called (default context)");
        ( "--check-reader",
          Arg.Set check_reader,
          " read the trace with irmin's reader and with Fast_trace, compare every row" );
      ]
    ();
  if !check_reader then exit (Duo_core.check_reader ());
  let irmin_solo () = let module S = Duo_core.Solo (Irmin_store) in S.run () in
  let code =
    match (!api, !Duo_core.only) with
    | "context", "" ->
        Duo_core.prefix := [ "data" ];
        let module D =
          Duo_core.Duo (Irmin_store) (Irmin_proof) (Pando_store) (Pando_proof.Context)
        in
        D.run ()
    | "raw", "" ->
        let module D =
          Duo_core.Duo (Irmin_store) (Irmin_proof) (Pando_raw_store) (Pando_proof.Raw)
        in
        D.run ()
    | "context", "irmin" ->
        Duo_core.prefix := [ "data" ];
        irmin_solo ()
    | "raw", "irmin" -> irmin_solo ()
    | "context", "pando" ->
        (* Alone, pando's process turns huge pages off, as the pando
           command does (irmin alone runs as irmin's bench does). *)
        ignore (Pando.disable_transparent_huge_pages ());
        let module S = Duo_core.Solo (Pando_store) in
        S.run ()
    | "raw", "pando" ->
        ignore (Pando.disable_transparent_huge_pages ());
        let module S = Duo_core.Solo (Pando_raw_store) in
        S.run ()
    | _, "null" ->
        let module S = Duo_core.Solo (Null_store) in
        S.run ()
    | a, o ->
        Printf.eprintf "duo: --api %s --only %s: --api context|raw, --only irmin|pando\n" a o;
        2
  in
  exit code
