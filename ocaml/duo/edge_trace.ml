(* edge_trace [--raw] OUT.repr: a replay trace of edge cases, made by
   irmin 3.7.2 itself. Every row is an operation on Irmin_tezos.Store
   (through Irmin_store, the duo's irmin side: Octez's configuration),
   written with irmin's own replayable trace writer
   (Trace_definitions.Replayable_trace of bench/irmin-pack/, IrmRepBT
   version 0), so that every find/mem/mem_tree result and every commit
   hash in the trace is irmin's answer. A JSON sidecar OUT.repr.json
   counts its rows.

   By default every path goes under data/, as Octez's lib_context puts
   it: the trace is one Octez would record, for the duo's default
   (--api context). With --raw the paths are used as they are, the empty
   path being the root of the tree, for duo --api raw. The two differ at
   the empty path: irmin's mem_tree of the root is always true (the root
   exists, even empty), of data/ only when data/ holds something; and a
   find_tree of the root is never missing.

   What the trace holds (tests/vectors/README.md says the same):
   - path steps that are empty, of 255, 256, 1,000 and 65,536 bytes,
     holding NUL or '/', not UTF-8 (a lone 0xff, a cut sequence, a
     surrogate), valid UTF-8 beside them;
   - values of 0 bytes, 1 MiB, 1 MiB + 1 and 3 MiB;
   - paths 64 and 65 steps deep;
   - find, mem and mem_tree of the empty path, of an empty tree (the
     genesis block's context 0) and of a non-empty one; reads of a child
     of the empty path, so that the duo's extras give the empty path's
     length, list, find_tree and fold, in both; copies from the empty path
     (find_tree of it) of both;
   - copies from missing paths: the trace records them as Copy rows whose
     output context is the input one unchanged (Octez's Context.copy
     answers None and its caller goes on with the context it had; irmin's
     trace_replay.ml would stop there, the duo does not);
   - commits of a tree equal to its parent's (nothing changed, and a value
     added then removed);
   - a remove of the empty path (all of data/, or with --raw the whole
     tree), the empty path read before and after a value is added back;
   - blocks whose first reads are of a 256-byte step, a 1 MiB value, the
     64-step path, steps with NUL, '/' and non-UTF-8 bytes, so that the
     duo's proofs carry them (a step of 256 bytes or more cannot be
     encoded in Octez's V1 Tree32 proof encoding: both sides refuse).

   The IrmRepBT format records Checkout, Add, Remove, Copy, Find, Mem,
   Mem_tree and Commit only: find_tree, list, length and fold are not rows,
   the duo computes them (the find_tree of every Copy's source, and its
   extras on the parent directory of every path read). *)

open Lwt.Syntax
module Def = Trace_definitions.Replayable_trace
module Store = Irmin_tezos.Store

type st = {
  w : Def.writer;
  repo : Store.repo;
  ctxs : (int64, Store.tree) Hashtbl.t;
  mutable next : int64;
  counts : (string, int) Hashtbl.t;
  mutable rows : int;
  mutable blocks : int;
}

let count st what =
  st.rows <- st.rows + 1;
  Hashtbl.replace st.counts what
    (1 + Option.value ~default:0 (Hashtbl.find_opt st.counts what))

let row st what r =
  count st what;
  Def.append_row st.w r

let tree st c = Hashtbl.find st.ctxs c

let fresh st t =
  let id = st.next in
  st.next <- Int64.succ id;
  Hashtbl.replace st.ctxs id t;
  id

(* a context id or commit hash the trace uses again: Keep *)
let keep x = Def.Keep x

let add st c key value =
  let+ t = Irmin_store.add (tree st c) key value in
  let out = fresh st t in
  row st "add" (Def.Add { key; value; in_ctx_id = keep c; out_ctx_id = keep out });
  out

let remove st c key =
  let+ t = Irmin_store.remove (tree st c) key in
  let out = fresh st t in
  row st "remove" (Def.Remove (key, keep c, keep out));
  out

let copy st c ~src ~dst =
  let+ t = Irmin_store.copy (tree st c) ~src ~dst in
  let missing = t = None in
  let out = fresh st (Option.value t ~default:(tree st c)) in
  row st
    (if missing then "copy from a missing path" else "copy")
    (Def.Copy { key_src = src; key_dst = dst; in_ctx_id = keep c; out_ctx_id = keep out });
  out

let find st c key =
  let+ v = Irmin_store.find (tree st c) key in
  row st "find" (Def.Find (key, Option.is_some v, keep c))

let mem st c key =
  let+ b = Irmin_store.mem (tree st c) key in
  row st "mem" (Def.Mem (key, b, keep c))

let mem_tree st c key =
  let+ b = Irmin_store.mem_tree (tree st c) key in
  row st "mem_tree" (Def.Mem_tree (key, b, keep c))

(* find, mem and mem_tree of each path *)
let reads st c keys =
  Lwt_list.iter_s
    (fun key ->
      let* () = find st c key in
      let* () = mem st c key in
      mem_tree st c key)
    keys

let b58 raw = Irmin.Type.to_string Store.Hash.t (Store.Hash.unsafe_of_raw_string raw)

(* commits context [c] on [parent] (a commit key and its trace hash) *)
let commit st c ~parent =
  st.blocks <- st.blocks + 1;
  let date = Int64.of_int (1_600_000_000 + st.blocks) in
  let message = Printf.sprintf "edge block %d" st.blocks in
  let parents = Option.to_list (Option.map fst parent) in
  let+ key, raw = Irmin_store.commit st.repo (tree st c) ~parents ~date ~message in
  let hash = b58 raw in
  row st "commit"
    (Def.Commit
       {
         hash = keep hash;
         date;
         message;
         parents = Option.to_list (Option.map (fun (_, h) -> keep h) parent);
         in_ctx_id = keep c;
       });
  (key, hash)

let checkout st (key, hash) =
  let+ t = Irmin_store.checkout st.repo key in
  let c = fresh st t in
  row st "checkout" (Def.Checkout (keep hash, keep c));
  c

(* the steps and values of the edge cases *)
let s n c = String.make n c
let long = [ s 256 'b'; s 1000 'c'; s 65536 'd' ]
let nul = [ "a\000b"; "\000"; "\000\000" ]
let slash = [ "a/b"; "/"; "//" ]
let utf = [ "\xff"; "\xc3\x28"; "\xed\xa0\x80"; "\xf0\x9f\x90"; "\xc3\xa9t\xc3\xa9" ]

(* a value of [n] bytes that is not one byte repeated *)
let value n = String.init n (fun i -> Char.chr (((i * 7) + (i / 251)) land 255))

let values =
  [ ("empty", ""); ("mib", value (1 lsl 20)); ("mib+1", value ((1 lsl 20) + 1)); ("3mib", value (3 lsl 20)) ]

let deep n = List.init n (fun i -> Printf.sprintf "d%d" i)

let add_all st c kvs =
  Lwt_list.fold_left_s (fun c (k, v) -> add st c k v) c kvs

let under dir steps = List.map (fun x -> [ dir; x ]) steps

(* every path the genesis block writes, with its value *)
let written =
  [ ([ "top" ], "1"); ([ "e"; "" ], "an empty step"); ([ ""; "x" ], "under an empty step");
    ([ "e2"; ""; "" ], "two empty steps") ]
  @ List.mapi (fun i k -> (k, Printf.sprintf "long %d" i)) (under "long" long)
  @ [ ([ "long-dir"; s 256 'L'; "inner" ], "under a 256-byte step"); ([ "max"; s 255 'a' ], "255") ]
  @ List.mapi (fun i k -> (k, Printf.sprintf "nul %d" i)) (under "nul" nul)
  @ List.mapi (fun i k -> (k, Printf.sprintf "slash %d" i)) (under "slash" slash)
  @ List.mapi (fun i k -> (k, Printf.sprintf "utf %d" i)) (under "utf" utf)
  @ List.map (fun (n, v) -> ([ "v"; n ], v)) values
  @ [ (deep 64, "64 steps deep"); (deep 63 @ [ "x"; "y" ], "65 steps deep") ]

let paths = List.map fst written

let run ~raw out =
  if not raw then Duo_core.prefix := [ "data" ];
  let dir = Filename.concat (Filename.get_temp_dir_name ()) (Printf.sprintf "edge_trace.%d" (Unix.getpid ())) in
  let main () =
    let* repo = Irmin_store.open_repo dir in
    let st =
      { w = Def.create_file out (); repo; ctxs = Hashtbl.create 64; next = 1L;
        counts = Hashtbl.create 16; rows = 0; blocks = 0 }
    in
    Hashtbl.replace st.ctxs 0L (Irmin_store.empty repo);
    (* block 1, from the empty tree (context 0): the empty path and a
       child of it read in the empty tree, copies from missing paths, then
       every edge path written and read *)
    let* () = reads st 0L [ []; [ "a" ]; [ "a"; "b" ] ] in
    let* c = copy st 0L ~src:[] ~dst:[ "from-root" ] in
    let* c = copy st c ~src:[ "missing" ] ~dst:[ "x" ] in
    let* () = reads st c [ []; [ "x" ] ] in
    let* c = add_all st c written in
    let* () = reads st c paths in
    let* () = reads st c [ [ "long" ]; [ "nul" ]; [ "deep" ]; deep 63; deep 65; [ "v"; "empty"; "x" ];
                           [ "long"; s 256 'z' ]; [ "utf"; "\xfe" ]; [ "slash"; "a" ] ] in
    let* c = copy st c ~src:[ "missing"; "deeper" ] ~dst:[ "y" ] in
    let* c = copy st c ~src:[ "long" ] ~dst:[ "long-copy" ] in
    let* c = copy st c ~src:(deep 32) ~dst:[ "deep-copy" ] in
    let* c = remove st c [ "nul"; "\000" ] in
    let* c = remove st c [ "not"; "there" ] in
    let* h1 = commit st c ~parent:None in
    (* block 2: the empty path of a non-empty tree, and each directory of
       edge steps read (their length, list, find_tree and fold in the
       duo's extras) *)
    let* c = checkout st h1 in
    let* () = reads st c [ []; [ "top" ] ] in
    let* c = copy st c ~src:[] ~dst:[ "snapshot" ] in
    let* () = reads st c [ []; [ "snapshot"; "top" ]; [ "snapshot"; "snapshot" ] ] in
    let* () =
      reads st c
        [ [ "max"; s 255 'a' ]; [ "nul"; "a\000b" ]; [ "slash"; "/" ]; [ "utf"; "\xff" ];
          [ "v"; "mib" ]; deep 64; [ "e"; "" ]; [ "e2"; "" ] ]
    in
    let* c = copy st c ~src:[ "snapshot"; "missing" ] ~dst:[ "z" ] in
    let* c = remove st c [ "snapshot"; "long" ] in
    let* h2 = commit st c ~parent:(Some h1) in
    (* block 3: a commit of the tree checked out, unchanged *)
    let* c = checkout st h2 in
    let* h3 = commit st c ~parent:(Some h2) in
    (* block 4: a value added then removed: the tree equals its parent's *)
    let* c = checkout st h3 in
    let* c = add st c [ "tmp" ] "gone again" in
    let* () = reads st c [ [ "tmp" ] ] in
    let* c = remove st c [ "tmp" ] in
    let* () = reads st c [ [ "tmp" ]; [] ] in
    let* h4 = commit st c ~parent:(Some h3) in
    (* blocks 5 to 9: the first two paths each block reads are proved by
       each side and checked by the other *)
    let proved h keys =
      let* c = checkout st h in
      let* () = reads st c keys in
      let* c = add st c [ "top" ] (Printf.sprintf "%d" st.blocks) in
      commit st c ~parent:(Some h)
    in
    let* h5 = proved h4 [ [ "long"; s 256 'b' ]; [ "top" ] ] in
    let* h6 = proved h5 [ [ "v"; "mib" ]; deep 64 ] in
    let* h7 = proved h6 [ [ "nul"; "a\000b" ]; [ "slash"; "a/b" ] ] in
    let* h8 = proved h7 [ [ "utf"; "\xff" ]; [ "e"; "" ] ] in
    let* h9 = proved h8 [ [ "max"; s 255 'a' ]; [ "v"; "empty" ] ] in
    let* h10 = proved h9 [ [ "long-dir"; s 256 'L'; "inner" ]; [] ] in
    (* block 11: everything removed again: the empty path of data/ when
       data/ is gone *)
    let* c = checkout st h10 in
    let* c = remove st c [] in
    let* () = reads st c [ []; [ "top" ] ] in
    let* c = add st c [ "top" ] "back" in
    let* () = reads st c [ []; [ "top" ] ] in
    let* _ = commit st c ~parent:(Some h10) in
    Def.close st.w;
    let+ () = Irmin_store.close repo in
    Duo_core.rm_rf dir;
    st
  in
  let st = Lwt_main.run (main ()) in
  let oc = open_out (out ^ ".json") in
  let counts =
    List.sort compare (Hashtbl.fold (fun k v l -> (k, v) :: l) st.counts [])
  in
  Printf.fprintf oc "{\n  \"maker\": \"ocaml/duo/edge_trace.ml%s on irmin 3.7.2 Irmin_tezos.Store\",\n"
    (if raw then " --raw" else "");
  Printf.fprintf oc "  \"paths\": %S,\n" (if raw then "as they are (duo --api raw)" else "under data/ (duo --api context)");
  Printf.fprintf oc "  \"rows\": %d,\n  \"blocks\": %d,\n  \"rows_by_kind\": {\n" st.rows st.blocks;
  List.iteri
    (fun i (k, v) ->
      Printf.fprintf oc "    %S: %d%s\n" k v (if i = List.length counts - 1 then "" else ","))
    counts;
  Printf.fprintf oc "  }\n}\n";
  close_out oc;
  Printf.printf "edge_trace: %s, %d rows, %d blocks\n" out st.rows st.blocks

let () =
  match Sys.argv with
  | [| _; out |] -> run ~raw:false out
  | [| _; "--raw"; out |] -> run ~raw:true out
  | _ ->
      prerr_endline "usage: edge_trace [--raw] OUT.repr";
      exit 2
