(* pando's side of the proofs checked by the other side, in Octez's V1
   Tree32 encoding: pando's proofs of a commit's paths come from
   Pando.produce_tree_proof (paths under Duo_core.prefix, data/ as
   Pando_store writes them); irmin's are checked by
   Pando_context.verify_tree_proof (the binding's Pando has no verifier of
   its own), after checking that the proof's [before] hash is pando's
   tree hash of that commit, and the paths are read in the tree proved. *)

open Lwt.Syntax

module Make (I : sig
  type repo

  val pando_index : repo -> Pando.index
end) =
struct
  type repo = I.repo
  type commit = bytes

  let data = Duo_core.k
  (* DUO_NO_PANDO_VERIFIER=1 skips irmin's proofs (for a binding whose
     Pando_context cannot verify proofs yet) *)
  let can_verify = Sys.getenv_opt "DUO_NO_PANDO_VERIFIER" <> Some "1"

  let produce idx h paths =
    let pidx = I.pando_index idx in
    Lwt.return
      (Bytes.to_string
         (Pando.produce_tree_proof pidx h (List.map data paths) Pando.V1))

  (* version (2 bytes), then before: 01 and a node's hash *)
  let before_node proof =
    if String.length proof >= 35 && proof.[2] = '\001' then
      Some (String.sub proof 3 32)
    else None

  let verify idx h proof paths =
    let pidx = I.pando_index idx in
    let root =
      match Pando.checkout pidx h with
      | Some c -> Bytes.to_string (Pando.tree_hash (Pando.get_tree c))
      | None -> failwith "pando: proof of an unknown commit"
    in
    if before_node proof <> Some root then
      Lwt.return (Error "its before hash is not the commit's tree hash")
    else
      let+ r =
        Pando_context.verify_tree_proof ~encoding:Pando.V1
          (Bytes.of_string proof) (fun t ->
            let+ reads =
              Lwt_list.map_s
                (fun p ->
                  let+ v = Pando_context.Tree.find t (data p) in
                  (p, Option.map Bytes.to_string v))
                paths
            in
            (t, reads))
      in
      match r with
      | Ok (_, reads) -> Ok reads
      | Error (`Proof_mismatch e | `Stream_too_long e | `Stream_too_short e) ->
          Error e
end

module Context = Make (struct
  type repo = Pando_context.index

  let pando_index = Pando_context.pando_index
end)

module Raw = Make (struct
  type repo = Pando.index

  let pando_index i = i
end)
