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
  let can_verify = true
  let can_stream = true

  (* pando's tree hash of commit [h]. *)
  let root idx h =
    match Pando.checkout (I.pando_index idx) h with
    | Some c -> Pando.tree_hash (Pando.get_tree c)
    | None -> failwith "pando: proof of an unknown commit"

  (* pando's encoder refuses a proof it cannot encode (a step of 256
     bytes or more) with Pando.Error *)
  let produce_with produce idx h paths =
    Lwt.return
      (match produce (I.pando_index idx) h (List.map data paths) Pando.V1 with
      | p -> Ok (Bytes.to_string p)
      | exception Pando.Error e -> Error e)

  (* The values of [paths] in the tree [verify] proved. *)
  let verify_with verify idx h proof paths =
    let root = root idx h in
    Lwt.return
      (match verify (Bytes.of_string proof) root with
      | exception Pando.Error e -> Error e
      | t -> (
          try
            Ok
              (List.map
                 (fun p ->
                   (p, Option.map Bytes.to_string (Pando.tree_find t (data p))))
                 paths)
          with Pando.Error e -> Error ("reading the tree proved: " ^ e)))

  let produce = produce_with Pando.produce_tree_proof
  let produce_stream = produce_with Pando.produce_stream_proof

  let verify idx h proof paths =
    verify_with (fun proof root -> Pando.verify_tree_proof Pando.V1 proof root) idx h proof paths

  let verify_stream idx h proof paths =
    verify_with
      (fun proof root -> Pando.verify_stream_proof Pando.V1 proof root (List.map data paths))
      idx h proof paths
end

module Context = Make (struct
  type repo = Pando_context.index

  let pando_index = Pando_context.pando_index
end)

module Raw = Make (struct
  type repo = Pando.index

  let pando_index i = i
end)
