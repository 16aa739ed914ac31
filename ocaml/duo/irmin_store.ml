(* irmin-pack 3.7.2 (Irmin_tezos.Store) with Octez's configuration, as
   bench/irmin/driver/bench.ml opens it: minimal indexing,
   index log size 2,500,000, an LRU of 100,000 entries, no fsync. Trees are
   used as Octez's lib_context uses them. *)

open Lwt.Syntax
module Store = Irmin_tezos.Store
module Tree = Store.Tree

let name = "irmin"

(* every path of the trace under Duo_core.prefix (data/ in the duo) *)
let k = Duo_core.k

type repo = Store.repo
type ctx = Store.tree
type commit = Store.commit_key

let open_repo dir =
  Duo_core.rm_rf dir;
  Store.Repo.v
    (Irmin_pack.config ~fresh:true
       ~indexing_strategy:Irmin_pack.Indexing_strategy.minimal
       ~index_log_size:2_500_000 ~lru_size:100_000 ~use_fsync:false dir)

let empty _ = Tree.empty ()

let checkout repo key =
  let+ c = Store.Commit.of_key repo key in
  match c with
  | Some c -> Store.Commit.tree c
  | None -> failwith "irmin: checkout of an unknown commit"

let add t p v = Tree.add t (k p) (Bytes.of_string v)
let remove t p = Tree.remove t (k p)

let copy t ~src ~dst =
  let* sub = Tree.find_tree t (k src) in
  match sub with
  | None -> Lwt.return_none
  | Some sub ->
      let+ t = Tree.add_tree t (k dst) sub in
      Some t

let find t p =
  let+ v = Tree.find t (k p) in
  Option.map Bytes.to_string v

let mem t p = Tree.mem t (k p)
let mem_tree t p = Tree.mem_tree t (k p)
let raw_hash t = Store.Hash.to_raw_string (Tree.hash t)

let find_tree_hash t p =
  let+ sub = Tree.find_tree t (k p) in
  Option.map raw_hash sub

let length t p = Tree.length t (k p)

let kind_of t =
  match Tree.destruct t with `Node _ -> `Tree | `Contents _ -> `Value

let list t ?offset ?length p =
  let+ l = Tree.list t ?offset ?length (k p) in
  List.map (fun (n, t) -> (n, kind_of t)) l

(* Octez's fold (lib_context's helpers): the tree at [k], its root
   included when it is a directory, ~uniq:`False, forced, uncached *)
let fold t p ~depth =
  let* sub = Tree.find_tree t (k p) in
  match sub with
  | None -> Lwt.return []
  | Some sub ->
      let+ l =
        Tree.fold ~depth ~force:`True ~cache:false ~uniq:`False ~order:`Sorted
          ~tree:(fun path t acc ->
            match Tree.destruct t with
            | `Contents (c, _) ->
                if path = [] then Lwt.return acc
                else
                  let+ v = Tree.Contents.force_exn c in
                  (path, `Value, Bytes.to_string v) :: acc
            | `Node _ -> Lwt.return ((path, `Tree, "") :: acc))
          sub []
      in
      List.rev l

let commit repo tree ~parents ~date ~message =
  (* as Octez: Tree.list [] first (unshallow), Tree.clear after *)
  let* _ = Tree.list tree [] in
  let info = Store.Info.v ~author:"Tezos" ~message date in
  let+ c = Store.Commit.v repo ~info ~parents tree in
  Tree.clear tree;
  (Store.Commit.key c, Store.Hash.to_raw_string (Store.Commit.hash c))

(* as bench.ml: split, then Gc.run; finalisation inside a later commit *)
let gc repo key =
  Store.split repo;
  let+ r = Store.Gc.run repo key in
  match r with
  | Ok started -> started
  | Error (`Msg s) -> failwith ("irmin: Gc.run: " ^ s)

let wait_gc repo =
  let+ r = Store.Gc.wait repo in
  match r with Ok _ -> () | Error (`Msg s) -> failwith ("irmin: Gc.wait: " ^ s)

let close = Store.Repo.close
