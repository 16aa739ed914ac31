(* The duo's machinery against itself: irmin 3.7.2 replayed twice, side
   by side, each one's proofs (through Irmin_proof's V1 Tree32 codec)
   checked by the other. 0 divergences is the expected result;
   DUO_INJECT=N changes the second store's value at the Nth Add, which
   the duo must report. *)
let () =
  Duo_core.parse_args ();
  let module D =
    Duo_core.Duo (Irmin_store) (Irmin_proof) (Irmin_store) (Irmin_proof)
  in
  exit (D.run ())
