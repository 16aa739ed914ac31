(* pando's side of the proofs checked by the other side, in Octez's V1
   Tree32 encoding: pando's proofs of a commit's paths come from
   Pando.produce_tree_proof (paths under Duo_core.prefix, data/ as
   Pando_store writes them); irmin's are checked by Pando.verify_tree_proof
   against pando's tree hash of that commit, and the paths are read in the
   tree proved. *)

module Make (I : sig
  type repo

  val pando_index : repo -> Pando.index
end) =
struct
  type repo = I.repo
  type commit = bytes

  let data = Duo_core.k
  (* DUO_NO_PANDO_VERIFIER=1 skips irmin's proofs *)
  let can_verify = Sys.getenv_opt "DUO_NO_PANDO_VERIFIER" <> Some "1"

  let produce idx h paths =
    let pidx = I.pando_index idx in
    Lwt.return
      (Bytes.to_string
         (Pando.produce_tree_proof pidx h (List.map data paths) Pando.V1))

  let verify idx h proof paths =
    let pidx = I.pando_index idx in
    let root =
      match Pando.checkout pidx h with
      | Some c -> Pando.tree_hash (Pando.get_tree c)
      | None -> failwith "pando: proof of an unknown commit"
    in
    Lwt.return
      (match Pando.verify_tree_proof Pando.V1 (Bytes.of_string proof) root with
      | exception Pando.Error e -> Error e
      | t -> (
          try
            Ok
              (List.map
                 (fun p ->
                   (p, Option.map Bytes.to_string (Pando.tree_find t (data p))))
                 paths)
          with Pando.Error e -> Error ("reading the tree proved: " ^ e)))

  let can_stream = Sys.getenv_opt "DUO_NO_PANDO_VERIFIER" <> Some "1"

  let produce_stream idx h paths =
    let pidx = I.pando_index idx in
    Lwt.return
      (Bytes.to_string
         (Pando.produce_stream_proof pidx h (List.map data paths) Pando.V1))

  let verify_stream idx h proof paths =
    let pidx = I.pando_index idx in
    let root =
      match Pando.checkout pidx h with
      | Some c -> Pando.tree_hash (Pando.get_tree c)
      | None -> failwith "pando: proof of an unknown commit"
    in
    Lwt.return
      (match
         Pando.verify_stream_proof Pando.V1 (Bytes.of_string proof) root
           (List.map data paths)
       with
      | exception Pando.Error e -> Error e
      | t -> (
          try
            Ok
              (List.map
                 (fun p ->
                   (p, Option.map Bytes.to_string (Pando.tree_find t (data p))))
                 paths)
          with Pando.Error e -> Error ("reading the tree proved: " ^ e)))
end

module Context = Make (struct
  type repo = Pando_context.index

  let pando_index = Pando_context.pando_index
end)

module Raw = Make (struct
  type repo = Pando.index

  let pando_index i = i
end)
