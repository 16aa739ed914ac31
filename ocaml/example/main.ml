let () =
  let index = Pando.index_init Sys.argv.(1) in
  let ctx = Pando.context_init index in
  let ctx = Pando.add ctx [ "contracts"; "global_counter" ] (Bytes.of_string "42") in
  let commit = Pando.commit ctx 1_600_000_000L "Tezos" "block 0" in
  print_endline (Pando.Hash.to_b58check commit);
  let ctx = Option.get (Pando.checkout index commit) in
  assert (Pando.find ctx [ "contracts"; "global_counter" ] = Some (Bytes.of_string "42"));
  Pando.close index
