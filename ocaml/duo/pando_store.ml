(* pando through the binding's Octez-shaped layer, Pando_context: a trace
   context is a Pando_context.t, read and written with the context
   functions Octez's protocol calls (so every path goes under [data/], as
   in Octez), committed with Pando_context.commit. The trace's commit
   parents must be the commit the context was checked out from (Octez's
   contexts have no other way to name them); they are in every trace
   Octez or pando gen writes. *)

open Lwt.Syntax
module C = Pando_context

let name = "pando"

type repo = C.index
type ctx = { c : C.t; origin : bytes option }
type commit = bytes

let open_repo dir =
  Duo_core.rm_rf dir;
  C.init ~sync_policy:(Duo_core.sync_policy ()) dir

let empty idx = { c = C.empty idx; origin = None }

let checkout idx h =
  let+ c = C.checkout idx h in
  match c with
  | Some c -> { c; origin = Some h }
  | None -> failwith "pando: checkout of an unknown commit"

let add t p v =
  (* Pando copies the value in: the trace's string is not copied first. *)
  let+ c = C.add t.c p (Bytes.unsafe_of_string v) in
  { t with c }

let remove t p =
  let+ c = C.remove t.c p in
  { t with c }

let copy t ~src ~dst =
  let* sub = C.find_tree t.c src in
  match sub with
  | None -> Lwt.return_none
  | Some sub ->
      let+ c = C.add_tree t.c dst sub in
      Some { t with c }

let find t p =
  let+ v = C.find t.c p in
  (* a fresh value of the binding's, never changed: no copy *)
  Option.map Bytes.unsafe_to_string v

let mem t p = C.mem t.c p
let mem_tree t p = C.mem_tree t.c p

let find_tree_hash t p =
  let+ sub = C.find_tree t.c p in
  Option.map (fun s -> Bytes.to_string (C.Tree.hash s)) sub

let length t p = C.length t.c p

let list t ?offset ?length p =
  let+ l = C.list t.c ?offset ?length p in
  List.map (fun (n, tr) -> (n, C.Tree.kind tr)) l

let fold t p ~depth =
  let+ l =
    C.fold ~depth t.c p ~order:`Sorted ~init:[] ~f:(fun path tr acc ->
        match C.Tree.kind tr with
        | `Tree -> Lwt.return ((path, `Tree, "") :: acc)
        | `Value ->
            let+ v = C.Tree.to_value tr in
            (path, `Value, Option.fold ~none:"" ~some:Bytes.to_string v) :: acc)
  in
  List.rev l

let commit _idx t ~parents ~date ~message =
  (match (parents, t.origin) with
  | [], None -> ()
  | [ p ], Some o when Bytes.equal p o -> ()
  | _ ->
      failwith
        "pando: the trace's commit parents are not the commit checked out");
  let+ h = C.commit ~time:date ~message t.c in
  (h, Bytes.to_string h)

let gc_refused = ref 0

let gc idx h =
  Lwt.catch
    (fun () ->
      let+ () = C.gc idx h in
      true)
    (function
      | Pando.Error e ->
          incr gc_refused;
          if !gc_refused <= 3 then Printf.printf "pando: gc refused: %s\n%!" e;
          Lwt.return_false
      | e -> Lwt.fail e)

let wait_gc = C.wait_gc_completion
let close = C.close
