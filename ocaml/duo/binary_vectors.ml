(* binary_vectors OUT.json: hash vectors of the binary Tezos context
   layout, made by irmin 3.7.2 itself.

   The layout is Octez's Context_binary.Conf
   (src/lib_context/encoding/context_binary.ml), which the smart rollup
   node and the Etherlink node open their context with
   (src/lib_layer2_irmin_context/irmin_context.ml): inodes of 2 entries,
   a directory of more than 2 entries hashed as an inode tree
   (stable_hash = 2), a child chosen by the seeded OCaml hash of its step
   (`Seeded_hash`), contents with a varint length header; the schema is
   L1's (Irmin_tezos.Schema). Every directory below is built in a tree,
   hashed, committed to an irmin-pack store of that configuration,
   checked out again and hashed once more: the two hashes must agree or
   the program stops. The removal vectors are made from a committed
   directory checked out again, so that irmin shrinks an inode tree it
   loaded from its pack.

   The output is a JSON list in the format of tests/vectors/
   tezos-inodes.json: per vector its name, entry count, hash (base58 and
   hex) and entries, each a contents value (hex) or a subtree; a vector
   of kind "contents" is a value alone. The same bytes on each run. *)

open Lwt.Syntax

module Conf = struct
  let entries = 2
  let stable_hash = 2
  let contents_length_header = Some `Varint
  let inode_child_order = `Seeded_hash
  let forbid_empty_dir_persistence = true
end

module Maker = Irmin_pack_unix.Maker (Conf)
module Store = Maker.Make (Irmin_tezos.Schema)

type entry = Value of string | Dir of (string * entry) list

let hex s =
  String.concat ""
    (List.init (String.length s) (fun i -> Printf.sprintf "%02x" (Char.code s.[i])))

let b58 h = Fmt.to_to_string (Irmin.Type.pp Store.Hash.t) h

let hash_hex h =
  hex (Irmin.Type.(unstage (to_bin_string Store.Hash.t)) h)

(* JSON of an entry list, sorted by name as the vectors are. *)
let rec json_entries buf entries =
  let entries = List.sort (fun (a, _) (b, _) -> String.compare a b) entries in
  Buffer.add_char buf '[';
  List.iteri
    (fun i (name, e) ->
      if i > 0 then Buffer.add_string buf ",\n";
      Printf.bprintf buf "{\"name\":%S," name;
      match e with
      | Value v -> Printf.bprintf buf "\"kind\":\"contents\",\"value\":\"%s\"}" (hex v)
      | Dir sub ->
          Buffer.add_string buf "\"kind\":\"node\",\"subtree\":";
          json_entries buf sub;
          Buffer.add_char buf '}')
    entries;
  Buffer.add_char buf ']'

let rec add_entries tree prefix entries =
  Lwt_list.fold_left_s
    (fun tree (name, e) ->
      match e with
      | Value v -> Store.Tree.add tree (prefix @ [ name ]) (Bytes.of_string v)
      | Dir [] -> Lwt.return tree
      | Dir sub -> add_entries tree (prefix @ [ name ]) sub)
    tree entries

let info () = Store.Info.v ~author:"pando" ~message:"binary vectors" 0L

(* Commits [tree], checks it out again and returns its hash, after
   checking that the tree's hash and the checked-out tree's agree. The
   empty tree is hashed only: this configuration refuses to persist it. *)
let committed repo tree =
  let before = Store.Tree.hash tree in
  if Store.Tree.is_empty tree then Lwt.return (before, tree) else
  let* commit = Store.Commit.v repo ~info:(info ()) ~parents:[] tree in
  let* again = Store.Commit.of_hash repo (Store.Commit.hash commit) in
  let again = Option.get again in
  let after = Store.Tree.hash (Store.Commit.tree again) in
  if not (Irmin.Type.(unstage (equal Store.Hash.t)) before after) then
    failwith "irmin's hash of a tree changed through its pack";
  Lwt.return (after, Store.Commit.tree again)

let value i = Printf.sprintf "v%d" i
let flat n name = List.init n (fun i -> (Printf.sprintf "%s%d" name i, Value (value i)))

(* A directory [depth] levels deep, each level a step and a value. *)
let rec deep depth =
  if depth = 0 then [ ("leaf", Value "bottom") ]
  else [ (Printf.sprintf "d%d" depth, Dir (deep (depth - 1))); ("x", Value (value depth)) ]

let vectors =
  [
    ("dir-0", []);
    ("dir-1", flat 1 "a");
    ("dir-2", flat 2 "a");
    ("dir-3", flat 3 "a");
    ("dir-3-mixed", [ ("a", Value "1"); ("b", Dir (flat 1 "c")); ("c", Value "") ]);
    ("dir-10", flat 10 "k");
    ("dir-10-subdirs", List.init 10 (fun i -> (Printf.sprintf "s%d" i, Dir (flat (i + 1) "e"))));
    ("dir-1000", flat 1000 "key");
    ("dir-100000", flat 100_000 "k");
    ("deep-40", deep 40);
    ( "unbalanced",
      [ ("big", Dir (flat 1000 "b")); ("small", Dir (flat 1 "s")); ("v", Value "top") ] );
    ( "contracts-like",
      List.init 300 (fun i ->
          ( Printf.sprintf "tz1%08x" (i * 2654435761 land 0xffffffff),
            Dir [ ("balance", Value (value i)); ("counter", Value (string_of_int i)) ] )) );
    ("long-steps", List.init 5 (fun i -> (String.make (50 * (i + 1)) (Char.chr (97 + i)), Value (value i))));
  ]

(* Removals: a directory of [n] committed, checked out, then cut to the
   entries named by [keep], beside a value that keeps the root from
   being empty. *)
let removals =
  [ ("shrink-1000-to-3", 1000, 3); ("shrink-1000-to-2", 1000, 2);
    ("shrink-1000-to-1", 1000, 1); ("shrink-1000-to-0", 1000, 0);
    ("shrink-10-to-2", 10, 2); ("shrink-3-to-2", 3, 2) ]

let contents = [ ""; "0000000000"; String.make 300 'z'; String.init 256 Char.chr ]

let () =
  let out = Sys.argv.(1) in
  let dir = Filename.concat (Filename.get_temp_dir_name ()) (Printf.sprintf "binary-vectors-%d" (Unix.getpid ())) in
  Lwt_main.run
  @@ let* repo =
       Store.Repo.v
         (Irmin_pack.config ~fresh:true
            ~indexing_strategy:Irmin_pack.Indexing_strategy.minimal ~use_fsync:false dir)
     in
     let buf = Buffer.create (1 lsl 20) in
     Buffer.add_string buf "[\n";
     let first = ref true in
     let emit name kind count hash body =
       if not !first then Buffer.add_string buf ",\n";
       first := false;
       Printf.bprintf buf "{\"name\":%S,\n \"kind\":%S,\n \"entry_count\":%d,\n \"hash\":%S,\n \"hash_hex\":%S,\n " name
         kind count (b58 hash) (hash_hex hash);
       body ();
       Buffer.add_string buf "}"
     in
     List.iteri
       (fun i v ->
         let h = Store.Contents.hash (Bytes.of_string v) in
         emit (Printf.sprintf "contents-%d" i) "contents" (String.length v) h (fun () ->
             Printf.bprintf buf "\"value\":\"%s\"" (hex v)))
       contents;
     let* () =
       Lwt_list.iter_s
         (fun (name, entries) ->
           let* tree = add_entries (Store.Tree.empty ()) [] entries in
           let* hash, _ = committed repo tree in
           emit name "node" (List.length entries) hash (fun () ->
               Buffer.add_string buf "\"entries\":";
               json_entries buf entries);
           Lwt.return_unit)
         vectors
     in
     let* () =
       Lwt_list.iter_s
         (fun (name, n, keep) ->
           let entries = flat n "r" in
           let* tree = add_entries (Store.Tree.empty ()) [] [ ("d", Dir entries); ("x", Value "x") ] in
           let* _, loaded = committed repo tree in
           let kept = List.filteri (fun i _ -> i < keep) entries in
           let removed = List.filteri (fun i _ -> i >= keep) entries in
           let* cut =
             Lwt_list.fold_left_s (fun t (step, _) -> Store.Tree.remove t [ "d"; step ]) loaded removed
           in
           let* hash, _ = committed repo cut in
           let kept = (if kept = [] then [] else [ ("d", Dir kept) ]) @ [ ("x", Value "x") ] in
           emit name "node" (List.length kept) hash (fun () ->
               Buffer.add_string buf "\"entries\":";
               json_entries buf kept);
           Lwt.return_unit)
         removals
     in
     Buffer.add_string buf "\n]\n";
     let* () = Store.Repo.close repo in
     let oc = open_out_bin out in
     Buffer.output_buffer oc buf;
     close_out oc;
     ignore (Sys.command (Printf.sprintf "rm -rf %s" (Filename.quote dir)));
     Lwt.return_unit
