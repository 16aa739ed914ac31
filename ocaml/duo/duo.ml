(* duo TRACE [options]: the trace replayed on irmin-pack 3.7.2 and on pando
   through Pando_context, every result compared (see duo_core.ml);
   --only irmin|pando replays one alone, timed. Both stores are used as
   Octez uses its contexts: every path of the trace under [data/]. *)
let () =
  Duo_core.parse_args ();
  Irmin_store.prefix := [ "data" ];
  let code =
    match !Duo_core.only with
    | "" ->
        let module D =
          Duo_core.Duo (Irmin_store) (Irmin_proof) (Pando_store) (Pando_proof)
        in
        D.run ()
    | "irmin" ->
        let module S = Duo_core.Solo (Irmin_store) in
        S.run ()
    | "pando" ->
        let module S = Duo_core.Solo (Pando_store) in
        S.run ()
    | s ->
        Printf.eprintf "duo: --only %s: irmin or pando\n" s;
        2
  in
  exit code
