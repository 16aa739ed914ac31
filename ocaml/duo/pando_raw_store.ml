(* pando through the binding's TezEdge-shaped functions, Pando, on raw
   paths (duo --api raw): the trace's paths as they are, so that both
   stores' commit hashes are the ones the trace recorded. Pando's calls
   are synchronous; they are wrapped in resolved promises. *)

let name = "pando"
let k = Duo_core.k

type repo = Pando.index
type ctx = { c : Pando.context; origin : bytes option }
type commit = bytes

let open_repo dir =
  Duo_core.rm_rf dir;
  Lwt.return (Pando.index_init_with (Duo_core.sync_policy ()) dir)

let empty idx = { c = Pando.context_init idx; origin = None }

let checkout idx h =
  match Pando.checkout idx h with
  | Some c -> Lwt.return { c; origin = Some h }
  | None -> failwith "pando: checkout of an unknown commit"

let add t p v = Lwt.return { t with c = Pando.add t.c (k p) (Bytes.unsafe_of_string v) }
let remove t p = Lwt.return { t with c = Pando.remove t.c (k p) }

let copy t ~src ~dst =
  Lwt.return
    (match Pando.find_tree t.c (k src) with
    | None -> None
    | Some sub -> Some { t with c = Pando.add_tree t.c (k dst) sub })

let find t p = Lwt.return (Option.map Bytes.unsafe_to_string (Pando.find t.c (k p)))
let mem t p = Lwt.return (Pando.mem t.c (k p))
let mem_tree t p = Lwt.return (Pando.mem_tree t.c (k p))

let find_tree_hash t p =
  Lwt.return
    (Option.map
       (fun s -> Bytes.to_string (Pando.tree_hash s))
       (Pando.find_tree t.c (k p)))

let length t p = Lwt.return (Pando.length t.c (k p))
let kind_of tr = match Pando.tree_kind tr with Pando.Value -> `Value | Pando.Tree -> `Tree

let list t ?offset ?length p =
  Lwt.return
    (Array.to_list
       (Array.map (fun (n, tr) -> (n, kind_of tr)) (Pando.list t.c offset length (k p))))

(* Octez's fold: the walker visits the tree at [p], the root included
   when it is a directory; a value at the root is left out, as Octez's
   fold does *)
let fold t p ~(depth : Duo_core.depth) =
  match Pando.find_tree t.c (k p) with
  | None -> Lwt.return []
  | Some sub ->
      let depth =
        match depth with
        | `Eq d -> Pando.Eq d
        | `Le d -> Pando.Le d
        | `Lt d -> Pando.Lt d
        | `Ge d -> Pando.Ge d
        | `Gt d -> Pando.Gt d
      in
      let w = Pando.make_tree_walker sub (Some depth) [] Pando.Sorted in
      let rec go acc =
        match Pando.tree_walker_next w with
        | None -> List.rev acc
        | Some (path, tr) -> (
            let path = Array.to_list path in
            match Pando.tree_kind tr with
            | Pando.Tree -> go ((path, `Tree, "") :: acc)
            | Pando.Value ->
                if path = [] then go acc
                else
                  let v = Option.fold ~none:"" ~some:Bytes.to_string (Pando.tree_to_value tr) in
                  go ((path, `Value, v) :: acc))
      in
      Lwt.return (go [])

let commit _idx t ~parents ~date ~message =
  (match (parents, t.origin) with
  | [], None -> ()
  | [ p ], Some o when Bytes.equal p o -> ()
  | _ -> failwith "pando: the trace's commit parents are not the commit checked out");
  let h = Pando.commit t.c date "Tezos" message in
  Lwt.return (h, Bytes.to_string h)

let gc idx h =
  match Pando.gc idx h with
  | () -> Lwt.return_true
  | exception Pando.Error e ->
      Printf.printf "pando: gc refused: %s\n%!" e;
      Lwt.return_false

let wait_gc idx = Lwt.return (Pando.wait_gc_completion idx)
let close idx = Lwt.return (Pando.close idx)
