(* The duo's machinery against itself: irmin 3.7.2 replayed twice, side
   by side. 0 divergences is the expected result; DUO_INJECT=N changes the
   second store's value at the Nth Add, which the duo must report. *)
let () =
  Duo_core.parse_args ();
  let module D =
    Duo_core.Duo (Irmin_store) (Duo_core.No_proofs (Irmin_store)) (Irmin_store)
      (Duo_core.No_proofs (Irmin_store))
  in
  exit (D.run ())
