(* edge_answers: what irmin 3.7.2 (Irmin_tezos.Store) answers at the edge
   cases the binding's tests assert (ocaml/test/common/common.ml, module
   Edges, and ocaml/test_context/test_context.ml, test_edges), printed
   one per line, for the paths of ocaml/edges (Edges.paths). Built
   beside duo.exe by scripts/duo.sh. *)

open Lwt.Syntax
module S = Irmin_tezos.Store
module T = S.Tree

(* the paths and values the binding's tests assert (ocaml/edges) *)
let paths = List.map (fun (k, v) -> (k, Bytes.to_string v)) Edges.paths
let deep = Edges.deep

let hex s = String.concat "" (List.init (String.length s) (fun i -> Printf.sprintf "%02x" (Char.code s.[i])))
let hash t = hex (S.Hash.to_raw_string (T.hash t))
let kind t = match T.destruct t with `Node _ -> "tree" | `Contents _ -> "value"

let show k =
  "/"
  ^ String.concat "/"
      (List.map
         (fun x -> if String.length x > 12 then Printf.sprintf "<%d bytes>" (String.length x) else String.escaped x)
         k)

let say name v = Printf.printf "%-32s %s\n" name v

(* find, mem, mem_tree, find_tree (kind, hash), list (names, kinds),
   length and fold ~depth:(`Le 1) (paths, kinds) of [k] in [t] *)
let reads name t k =
  let* v = T.find t k in
  say (name ^ " find") (match v with None -> "None" | Some v -> Printf.sprintf "Some (%d bytes)" (Bytes.length v));
  let* m = T.mem t k in
  say (name ^ " mem") (string_of_bool m);
  let* m = T.mem_tree t k in
  say (name ^ " mem_tree") (string_of_bool m);
  let* ft = T.find_tree t k in
  say (name ^ " find_tree") (match ft with None -> "None" | Some t -> kind t ^ " " ^ hash t);
  let* l = T.list t k in
  say (name ^ " list") (String.concat " " (List.map (fun (n, t) -> Printf.sprintf "%S:%s" n (kind t)) l));
  let* n = T.length t k in
  say (name ^ " length") (string_of_int n);
  match ft with
  | None -> say (name ^ " fold") "(no tree: nothing visited)"; Lwt.return_unit
  | Some sub ->
      let+ l =
        T.fold ~depth:(`Le 1) ~force:`True ~cache:false ~uniq:`False ~order:`Sorted
          ~tree:(fun p t acc -> Lwt.return ((show p ^ ":" ^ kind t) :: acc))
          sub []
      in
      say (name ^ " fold") (String.concat " " (List.rev l))

let main () =
  let dir = Filename.concat (Filename.get_temp_dir_name ()) (Printf.sprintf "edge_answers.%d" (Unix.getpid ())) in
  let* repo = S.Repo.v (Irmin_pack.config ~fresh:true dir) in
  let add_all prefix = Lwt_list.fold_left_s (fun t (k, v) -> T.add t (prefix @ k) (Bytes.of_string v)) (T.empty ()) paths in
  let* () = reads "empty tree, root" (T.empty ()) [] in
  let* () = reads "empty tree, data/" (T.empty ()) [ "data" ] in
  let* t = add_all [] in
  let* () = reads "edge tree, root" t [] in
  let* () =
    Lwt_list.iter_s
      (fun (k, v) ->
        let* r = T.find t k in
        say ("find " ^ show k) (if r = Some (Bytes.of_string v) then "the value added" else "OTHER");
        let* m = T.mem t k in
        let* mt = T.mem_tree t k in
        say ("mem, mem_tree " ^ show k) (Printf.sprintf "%b %b" m mt);
        let parent = List.rev (List.tl (List.rev k)) in
        let* m = T.mem t parent in
        let* mt = T.mem_tree t parent in
        let* n = T.length t parent in
        say ("mem, mem_tree, length " ^ show parent) (Printf.sprintf "%b %b %d" m mt n);
        Lwt.return_unit)
      paths
  in
  let* x = T.find_tree t [ "missing" ] in
  say "find_tree /missing" (if x = None then "None" else "Some");
  let* x = T.find_tree t [ "v"; "empty"; "x" ] in
  say "find_tree /v/empty/x" (if x = None then "None" else "Some");
  let* sub = T.find_tree t (deep 32) in
  let sub = Option.get sub in
  say "find_tree /d0/../d31" (hash sub);
  let* copied = T.add_tree t [ "copy" ] sub in
  say "copy /d0/../d31 to /copy" (hash copied);
  let commit t ~parents date message =
    let info = S.Info.v ~author:"Tezos" ~message date in
    S.Commit.v repo ~info ~parents t
  in
  let* c = commit t ~parents:[] 1L "edges" in
  say "commit (1, Tezos, edges)" (hex (S.Hash.to_raw_string (S.Commit.hash c)));
  let* c' = commit (S.Commit.tree c) ~parents:[ S.Commit.key c ] 2L "same tree" in
  say "commit its tree again (2)" (hex (S.Hash.to_raw_string (S.Commit.hash c')));
  let* d = add_all [ "data" ] in
  let* c = commit d ~parents:[] 1L "edges" in
  say "under data/: commit" (hex (S.Hash.to_raw_string (S.Commit.hash c)));
  let* c' = commit (S.Commit.tree c) ~parents:[ S.Commit.key c ] 2L "same tree" in
  say "under data/: commit again" (hex (S.Hash.to_raw_string (S.Commit.hash c')));
  let* () = S.Repo.close repo in
  ignore (Sys.command ("rm -rf " ^ Filename.quote dir));
  Lwt.return_unit

let () = Lwt_main.run (main ())
