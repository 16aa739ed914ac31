(* The README's example (README.md shows it from `let () =` on, and
   scripts/ocaml-install-test.sh checks that it does). In ocaml/:
   `dune exec example/main.exe -- DIR` opens the store in DIR (creating it
   if missing), commits one value, prints the commit's hash (Co...) and
   reads the value back from that commit. *)
let () =
  match Sys.argv with
  | [| _; dir |] -> (
      try
        let index = Pando.index_init dir in
        let ctx = Pando.context_init index in
        let ctx = Pando.add ctx [ "contracts"; "global_counter" ] (Bytes.of_string "42") in
        let commit = Pando.commit ctx 1_600_000_000L "Tezos" "block 0" in
        print_endline (Pando.Hash.to_b58check commit);
        let ctx = Option.get (Pando.checkout index commit) in
        assert (Pando.find ctx [ "contracts"; "global_counter" ] = Some (Bytes.of_string "42"));
        Pando.close index
      with Pando.Error e -> prerr_endline ("main.exe: " ^ e); exit 1)
  | _ -> prerr_endline "usage: main.exe DIR (the store, created if missing)"; exit 2
