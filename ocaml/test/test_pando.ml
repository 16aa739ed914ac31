(* The binding on a real store in a temporary directory: irmin's own
   hash vectors, every reading and writing function, the fold, errors,
   collections, snapshots, read-only indexes, base58check hashes, and
   irmin's answers at the edges (steps, values, depths, empty paths). *)

open Common

let b = Bytes.of_string

(* irmin's test_hashes: a singleton tree committed with empty metadata,
   then a tree of two entries on top of it (pando-core's vectors.rs). *)
let irmin_vectors index =
  let ctx = Pando.context_init index in
  let ctx = Pando.add ctx [ "singleton-step" ] (b "singleton-val") in
  let parent = Pando.commit ctx 0L "" "" in
  check_eq "parent commit" Fun.id
    "634d894802f9032ef48bbe1253563dbeb2aad7dc684da83bdea5692fde2185ae"
    (hex parent);
  let ctx = Option.get (Pando.checkout index parent) in
  let ctx = Pando.remove ctx [ "singleton-step" ] in
  let zero = b "0000000000" in
  let ctx = Pando.add (Pando.add ctx [ "00" ] zero) [ "01" ] zero in
  check_eq "tree hash" Fun.id
    "83722c2791a1c47dada4718656a20a2f3a063ae9945b475e67bbb6ef29d88ca4"
    (hex (Pando.tree_hash (Pando.get_tree ctx)));
  let predicted = Pando.hash ctx 0L "Tezos" "" in
  let commit = Pando.commit ctx 0L "Tezos" "" in
  check_eq "commit" Fun.id "CoW7mALEs2vue5cfTMdJfSAjNmjmALYS1YyqSsYr9siLcNEcrvAm"
    (Pando.Hash.to_b58check commit);
  check_eq "hash = commit" hex commit predicted;
  check_eq "of_b58check" hex commit
    (Pando.Hash.of_b58check (Pando.Hash.to_b58check commit));
  (match Pando.commit_info index commit with
  | None -> check "commit_info" false
  | Some info ->
      check_eq "info date" Int64.to_string 0L info.date;
      check_eq "info author" Fun.id "Tezos" info.author;
      check_eq "info parents" (fun l -> String.concat "," (List.map hex l))
        [ parent ] info.parents);
  commit

let reads index commit =
  let ctx = Option.get (Pando.checkout index commit) in
  check_eq "find" show_opt (Some (b "0000000000")) (Pando.find ctx [ "00" ]);
  check_eq "find absent" show_opt None (Pando.find ctx [ "02" ]);
  check "mem" (Pando.mem ctx [ "01" ]);
  check "mem of a directory" (not (Pando.mem ctx []));
  check "mem_tree" (Pando.mem_tree ctx []);
  check_eq "length" string_of_int 2 (Pando.length ctx []);
  let ctx = Pando.add ctx [ "a"; "b"; "c" ] (b "abc") in
  let ctx = Pando.add ctx [ "a"; "d" ] (b "ad") in
  check_eq "length of a" string_of_int 2 (Pando.length ctx [ "a" ]);
  check_eq "length of a value" string_of_int 0 (Pando.length ctx [ "00" ]);
  let names l = String.concat "," (Array.to_list (Array.map fst l)) in
  check_eq "list" Fun.id "00,01,a" (names (Pando.list ctx None None []));
  check_eq "list offset length" Fun.id "01"
    (names (Pando.list ctx (Some 1) (Some 1) []));
  let a = Option.get (Pando.find_tree ctx [ "a" ]) in
  check "kind tree" (Pando.tree_kind a = Pando.Tree);
  check_eq "tree_find" show_opt (Some (b "abc")) (Pando.tree_find a [ "b"; "c" ]);
  check "tree_mem_tree" (Pando.tree_mem_tree a [ "b" ]);
  check "tree_mem" (Pando.tree_mem a [ "d" ]);
  check_eq "tree_length" string_of_int 2 (Pando.tree_length a []);
  let v = Option.get (Pando.tree_find_tree a [ "d" ]) in
  check "kind value" (Pando.tree_kind v = Pando.Value);
  check_eq "to_value" show_opt (Some (b "ad")) (Pando.tree_to_value v);
  check "of_value equal"
    (Pando.tree_equal v (Pando.tree_of_value ctx (b "ad")));
  let a2 = Pando.tree_remove (Pando.tree_add a [ "e" ] (b "e")) [ "b" ] in
  check_eq "tree_list" Fun.id "d,e" (names (Pando.tree_list a2 None None []));
  check "tree persistent" (Pando.tree_mem a [ "b"; "c" ]);
  let a3 = Pando.tree_add_tree a2 [ "x" ] a in
  check_eq "tree_add_tree" show_opt (Some (b "abc"))
    (Pando.tree_find a3 [ "x"; "b"; "c" ]);
  let empty = Pando.tree_empty ctx in
  check "empty" (Pando.tree_is_empty empty);
  check "empty_tree" (Pando.tree_equal empty (Pando.empty_tree ()));
  check "a not empty" (not (Pando.tree_is_empty a));
  let ctx2 = Pando.add_tree ctx [ "copy" ] a in
  check "add_tree" (Pando.tree_equal a (Option.get (Pando.find_tree ctx2 [ "copy" ])));
  check "context persistent" (not (Pando.mem_tree ctx [ "copy" ]));
  Pando.tree_clear None a;
  check_eq "after clear" show_opt (Some (b "abc")) (Pando.tree_find a [ "b"; "c" ]);
  (* The fold: every subtree with its path, root first, sorted. *)
  let walk depth =
    let w = Pando.make_tree_walker (Pando.get_tree ctx) depth [ "a" ] Pando.Sorted in
    let rec go acc =
      match Pando.tree_walker_next w with
      | None -> List.rev acc
      | Some (path, _) -> go (String.concat "/" (Array.to_list path) :: acc)
    in
    String.concat " " (List.map (fun p -> "[" ^ p ^ "]") (go []))
  in
  check_eq "fold all" Fun.id "[] [b] [b/c] [d]" (walk None);
  check_eq "fold depth 1" Fun.id "[b] [d]" (walk (Some (Pando.Eq 1)));
  check_eq "fold depth <= 1" Fun.id "[] [b] [d]" (walk (Some (Pando.Le 1)));
  ctx

(* A context's newest version changes in place (the Rust side keeps an
   undo log): every older one still reads, updates and hashes as it was,
   before and after collections finalize others, and a committed one
   reads back the same. *)
let versions index =
  let v i = b (string_of_int i) in
  let chain = Array.make 101 (Pando.context_init index) in
  for i = 0 to 100 do
    chain.(i) <- Pando.add chain.(max 0 (i - 1)) [ "k" ] (v i)
  done;
  let commit = Pando.commit chain.(100) 0L "" "" in
  Gc.full_major ();
  let read c = Pando.find c [ "k" ] in
  Array.iteri
    (fun i c -> check_eq (Printf.sprintf "version %d" i) show_opt (Some (v i)) (read c))
    chain;
  let branch = Pando.add chain.(50) [ "b" ] (v 1) in
  let branch = Pando.remove branch [ "k" ] in
  check "a branch of an older version" (Pando.mem branch [ "b" ] && read branch = None);
  check_eq "the newest after the branch" show_opt (Some (v 100)) (read chain.(100));
  check "the newest has no b" (not (Pando.mem chain.(100) [ "b" ]));
  let fresh = Pando.add (Pando.context_init index) [ "k" ] (v 50) in
  check "an older version hashes as the same contents made afresh"
    (Bytes.equal (Pando.hash chain.(50) 0L "" "") (Pando.hash fresh 0L "" ""));
  let after = Pando.add chain.(100) [ "n" ] (v 7) in
  check_eq "the committed version, updated" show_opt (Some (v 100)) (read after);
  check "the committed version unchanged" (not (Pando.mem chain.(100) [ "n" ]));
  check "the commit reads back"
    (Bytes.equal commit (Pando.commit chain.(100) 0L "" ""));
  Gc.full_major ();
  check_eq "version 3 after a collection" show_opt (Some (v 3)) (read chain.(3))

let errors index dir =
  check "unknown commit" (Pando.checkout index (Bytes.make 32 'x') = None);
  check "exists" (not (Pando.exists index (Bytes.make 32 'x')));
  raises "short hash" (contains ~sub:"32 bytes") (fun () ->
      Pando.checkout index (b "short"));
  raises "gc of an unknown commit" (contains ~sub:"unknown commit") (fun () ->
      Pando.gc index (Bytes.make 32 'x'));
  raises "bad b58" (contains ~sub:"base58") (fun () ->
      Pando.Hash.of_b58check "CoNotAHash");
  raises "missing directory" (contains ~sub:(dir ^ "/missing")) (fun () ->
      Pando.index_open_readonly (dir ^ "/missing"));
  raises "a file as a store" (contains ~sub:"is a file") (fun () ->
      let file = Filename.concat dir "file" in
      close_out (open_out file);
      Pando.index_init file)

let snapshots index commit dir =
  let file = Filename.concat dir "snap" in
  Pando.export_snapshot index commit file;
  raises "export over a file" (contains ~sub:"exists") (fun () ->
      Pando.export_snapshot index commit file);
  let other = Pando.index_init (Filename.concat dir "imported") in
  let imported = Pando.import_snapshot other file in
  check_eq "import" hex commit imported;
  check_eq "imported find" show_opt (Some (b "0000000000"))
    (Pando.find (Option.get (Pando.checkout other imported)) [ "01" ]);
  Pando.close other

(* Tree and stream proofs, in both encodings: each verifies against the
   commit's tree hash and reads what the store holds; a blinded part, a
   wrong root and a damaged proof raise. *)
let proofs index commit =
  let ctx = Option.get (Pando.checkout index commit) in
  let root = Pando.tree_hash (Pando.get_tree ctx) in
  let paths = [ [ "n" ]; [ "00" ]; [ "absent" ] ] in
  List.iter
    (fun (name, encoding) ->
      let tree = Pando.produce_tree_proof index commit paths encoding in
      let proven = Pando.verify_tree_proof encoding tree root in
      check_eq (name ^ " tree proof reads") show_opt (Pando.find ctx [ "n" ])
        (Pando.tree_find proven [ "n" ]);
      check_eq (name ^ " tree proof hash") hex root (Pando.tree_hash proven);
      let show (k, h) = (if k = Pando.Tree then "node " else "value ") ^ hex h in
      check_eq (name ^ " before, after") (fun (a, b) -> show a ^ " " ^ show b)
        ((Pando.Tree, root), (Pando.Tree, root)) (Pando.tree_proof_hashes encoding tree);
      raises (name ^ " blinded") (contains ~sub:"blinds") (fun () ->
          Pando.tree_find proven [ "later" ]);
      raises (name ^ " wrong root") (fun _ -> true) (fun () ->
          Pando.verify_tree_proof encoding tree (Bytes.make 32 'r'));
      let cut = Bytes.sub tree 0 (Bytes.length tree - 3) in
      raises (name ^ " truncated") (fun _ -> true) (fun () ->
          Pando.verify_tree_proof encoding cut root);
      let stream = Pando.produce_stream_proof index commit paths encoding in
      let proven = Pando.verify_stream_proof encoding stream root paths in
      check_eq (name ^ " stream proof reads") show_opt (Pando.find ctx [ "00" ])
        (Pando.tree_find proven [ "00" ]);
      raises (name ^ " stream of other reads") (fun _ -> true) (fun () ->
          Pando.verify_stream_proof encoding stream root [ [ "n" ] ]))
    [ ("V1", Pando.V1); ("V2", Pando.V2) ]

(* The edge cases (Common.Edges): every answer asserted is irmin 3.7.2's
   own (ocaml/duo/edge_answers.ml prints them). *)
let edges index =
  let module E = Edges in
  let names l = List.map fst (Array.to_list l) in
  let show_names = String.concat "," in
  (* fold ~depth:(`Le 1) ~order:`Sorted of a tree, the root included *)
  let walk tree =
    let w = Pando.make_tree_walker tree (Some (Pando.Le 1)) [] Pando.Sorted in
    let rec go acc =
      match Pando.tree_walker_next w with
      | None -> List.rev acc
      | Some (p, t) -> go ((Array.to_list p, Pando.tree_kind t = Pando.Tree) :: acc)
    in
    go []
  in
  let show_walk l =
    String.concat " " (List.map (fun (p, d) -> "/" ^ String.concat "/" p ^ if d then ":tree" else ":value") l)
  in
  let tree_hash = function None -> "None" | Some t -> hex (Pando.tree_hash t) in
  (* the empty path of an empty tree: the root, there even empty *)
  let empty = Pando.context_init index in
  check_eq "empty: find []" show_opt None (Pando.find empty []);
  check "empty: mem []" (not (Pando.mem empty []));
  check "empty: mem_tree []" (Pando.mem_tree empty []);
  check_eq "empty: find_tree []" Fun.id E.empty_tree_hash (tree_hash (Pando.find_tree empty []));
  check_eq "empty: list []" show_names [] (names (Pando.list empty None None []));
  check_eq "empty: length []" string_of_int 0 (Pando.length empty []);
  check_eq "empty: fold []" show_walk [ ([], true) ]
    (walk (Option.get (Pando.find_tree empty [])));
  let empty_tree = Pando.tree_empty empty in
  check "empty tree: tree_mem_tree []" (Pando.tree_mem_tree empty_tree []);
  check "empty tree: tree_mem []" (not (Pando.tree_mem empty_tree []));
  check_eq "empty tree: tree_find_tree []" Fun.id E.empty_tree_hash
    (tree_hash (Pando.tree_find_tree empty_tree []));
  (* every edge path, and the empty path of the tree holding them *)
  let ctx = List.fold_left (fun c (k, v) -> Pando.add c k v) empty E.paths in
  List.iteri
    (fun i (k, v) ->
      let name what = Printf.sprintf "edge %d: %s" i what in
      check (name "find") (Pando.find ctx k = Some v);
      check (name "mem") (Pando.mem ctx k);
      check (name "mem_tree") (Pando.mem_tree ctx k);
      let p = E.parent k in
      check (name "mem of its directory") (not (Pando.mem ctx p));
      check (name "mem_tree of its directory") (Pando.mem_tree ctx p);
      check_eq (name "length of its directory") string_of_int (E.parent_length k) (Pando.length ctx p))
    E.paths;
  check_eq "edges: find []" show_opt None (Pando.find ctx []);
  check "edges: mem []" (not (Pando.mem ctx []));
  check "edges: mem_tree []" (Pando.mem_tree ctx []);
  check_eq "edges: find_tree []" Fun.id E.tree_hash (tree_hash (Pando.find_tree ctx []));
  check_eq "edges: tree hash" Fun.id E.tree_hash (hex (Pando.tree_hash (Pando.get_tree ctx)));
  check_eq "edges: list []" show_names E.top (names (Pando.list ctx None None []));
  check_eq "edges: length []" string_of_int (List.length E.top) (Pando.length ctx []);
  check_eq "edges: fold []" show_walk
    (([], true) :: List.map (fun n -> ([ n ], true)) E.top)
    (walk (Pando.get_tree ctx));
  (* copies: from a missing path there is no tree to copy *)
  check_eq "copy from a missing path" Fun.id "None" (tree_hash (Pando.find_tree ctx [ "missing" ]));
  check_eq "copy from under a value" Fun.id "None" (tree_hash (Pando.find_tree ctx [ "v"; "empty"; "x" ]));
  let sub = Pando.find_tree ctx (E.deep 32) in
  check_eq "find_tree 32 steps deep" Fun.id E.deep32_hash (tree_hash sub);
  check_eq "copy 32 steps deep" Fun.id E.copied_hash
    (hex (Pando.tree_hash (Pando.get_tree (Pando.add_tree ctx [ "copy" ] (Option.get sub)))));
  (* commits, then a commit of a tree equal to its parent's *)
  let h = Pando.commit ctx 1L "Tezos" "edges" in
  check_eq "edges: commit" Fun.id E.commit (hex h);
  let again = Pando.commit (Option.get (Pando.checkout index h)) 2L "Tezos" "same tree" in
  check_eq "edges: commit of the same tree" Fun.id E.commit_again (hex again);
  (* proofs: a step of 256 bytes or more has no encoding (its length is
     one byte), refused with an error; up to 255 bytes it is proved *)
  let root = Pando.tree_hash (Pando.get_tree ctx) in
  List.iter
    (fun (name, enc) ->
      List.iter
        (fun k ->
          let long = Printf.sprintf "%s proof of a %d-byte step" name (String.length (List.nth k 1)) in
          raises long (contains ~sub:"cannot encode") (fun () ->
              Pando.produce_tree_proof index h [ k ] enc);
          raises (long ^ " (stream)") (contains ~sub:"cannot encode") (fun () ->
              Pando.produce_stream_proof index h [ k ] enc))
        [ [ "long"; E.s 256 'b' ]; [ "long"; E.s 65536 'd' ] ];
      List.iteri
        (fun i (k, v) ->
          if List.length k < 2 || String.length (List.nth k 1) <= 255 then (
            let proven = Pando.verify_tree_proof enc (Pando.produce_tree_proof index h [ k ] enc) root in
            check (Printf.sprintf "%s proof of edge %d" name i) (Pando.tree_find proven k = Some v);
            let stream = Pando.produce_stream_proof index h [ k ] enc in
            let proven = Pando.verify_stream_proof enc stream root [ k ] in
            check (Printf.sprintf "%s stream proof of edge %d" name i) (Pando.tree_find proven k = Some v)))
        E.paths)
    [ ("V1", Pando.V1); ("V2", Pando.V2) ]

let readonly_and_gc index dir ctx =
  let reader = Pando.index_open_readonly dir in
  check "gc not allowed read-only" (not (Pando.is_gc_allowed reader));
  check "gc allowed" (Pando.is_gc_allowed index);
  (* A commit the writer makes now is found by the reader. *)
  let later = Pando.commit (Pando.add ctx [ "later" ] (b "1")) 1L "t" "m" in
  Pando.sync index;
  check "reader sees new commit" (Pando.checkout reader later <> None);
  raises "reader cannot commit" (fun _ -> true) (fun () ->
      Pando.commit (Option.get (Pando.checkout reader later)) 2L "" "");
  Pando.close reader;
  (* Collect everything before the last commit. *)
  let rec chain ctx n last =
    if n = 0 then last
    else
      let ctx = Pando.add ctx [ "n" ] (b (string_of_int n)) in
      let h = Pando.commit ctx (Int64.of_int n) "" "" in
      chain (Option.get (Pando.checkout index h)) (n - 1) h
  in
  let last = chain (Option.get (Pando.checkout index later)) 20 later in
  Pando.gc index last;
  Pando.wait_gc_completion index;
  check "kept after gc" (Pando.checkout index last <> None);
  check "collected" (Pando.checkout index later = None);
  check "collected does not exist" (not (Pando.exists index later));
  proofs index last;
  last

(* A damaged store: every byte of the pack files (.pack) flipped but
   the first and last 8. Reading
   it raises an error that names the file and the offset. *)
let damaged dir last =
  Array.iter
    (fun name ->
      if Filename.check_suffix name ".pack" then (
        let path = Filename.concat dir name in
        let ic = open_in_bin path in
        let data = Bytes.of_string (really_input_string ic (in_channel_length ic)) in
        close_in ic;
        for i = 8 to Bytes.length data - 9 do
          Bytes.set data i (Char.chr (Char.code (Bytes.get data i) lxor 0x55))
        done;
        let oc = open_out_bin path in
        output_bytes oc data;
        close_out oc))
    (Sys.readdir dir);
  raises "damaged store" (fun m -> contains ~sub:".pack" m && contains ~sub:"offset" m) (fun () ->
      let index = Pando.index_open_readonly dir in
      let ctx = Pando.checkout index last in
      ignore (Option.map (fun ctx -> Pando.find ctx [ "n" ]) ctx))

(* A store of the binary layout (smart rollups'): irmin 3.7.2's hash of a
   directory of 3 entries in that layout (tests/vectors/
   tezos-binary-inodes.json, "dir-3"), which L1's hashes otherwise; the
   store refused with the other layout, and opened by index_init. *)
let binary_layout () =
  let dir = temp_dir () in
  let index = Pando.index_init_layout Pando.Tezos_binary Pando.Every_commit dir in
  let ctx =
    List.fold_left
      (fun ctx i -> Pando.add ctx [ Printf.sprintf "a%d" i ] (b (Printf.sprintf "v%d" i)))
      (Pando.context_init index) [ 0; 1; 2 ]
  in
  check_eq "binary layout's tree hash" Fun.id
    "44cfcb12a35c4265606061488fca188c6faf0a89dfd58610993e1dc8f55c3e11"
    (hex (Pando.tree_hash (Pando.get_tree ctx)));
  let commit = Pando.commit ctx 0L "Tezos" "" in
  Pando.close index;
  raises "a binary store opened as L1's"
    (contains ~sub:"is of the tezos-binary layout, not the tezos layout")
    (fun () -> Pando.index_init_layout Pando.Tezos Pando.Every_commit dir);
  let index = Pando.index_init dir in
  check "a binary store reopened" (Pando.checkout index commit <> None);
  Pando.close index

let () =
  binary_layout ();
  let dir = temp_dir () in
  let index = Pando.index_init dir in
  let commit = irmin_vectors index in
  let ctx = reads index commit in
  versions index;
  errors index dir;
  snapshots index commit dir;
  edges index;
  let last = readonly_and_gc index dir ctx in
  let tree = Pando.get_tree (Option.get (Pando.checkout index last)) in
  (* An update refused raises, and changes nothing. *)
  let deep = List.init 257 (fun _ -> "d") in
  raises "add at 257 steps" (contains ~sub:"steps") (fun () -> Pando.add ctx deep (b "v"));
  raises "tree_remove at 257 steps" (contains ~sub:"steps") (fun () ->
      Pando.tree_remove tree deep);
  check_eq "tree after refused updates" show_opt (Some (b "1")) (Pando.tree_find tree [ "n" ]);
  Pando.close index;
  raises "closed index" (contains ~sub:"closed") (fun () ->
      Pando.checkout index last);
  raises "tree of a closed index" (contains ~sub:"closed") (fun () ->
      Pando.tree_find tree [ "n" ]);
  raises "add to a closed index" (contains ~sub:"closed") (fun () ->
      Pando.add ctx [ "n" ] (b "2"));
  raises "tree_add to a closed index" (contains ~sub:"closed") (fun () ->
      Pando.tree_add tree [ "n" ] (b "2"));
  raises "add_tree to a closed index" (contains ~sub:"closed") (fun () ->
      Pando.add_tree ctx [ "m" ] tree);
  raises "tree_add_tree to a closed index" (contains ~sub:"closed") (fun () ->
      Pando.tree_add_tree tree [ "m" ] tree);
  Pando.close index;
  (* Reopened, everything is there. *)
  let index = Pando.index_init dir in
  check_eq "reopened" show_opt (Some (b "1"))
    (Pando.find (Option.get (Pando.checkout index last)) [ "n" ]);
  Pando.close index;
  damaged dir last;
  remove_dir dir;
  (* Huge pages off for the process, as the pando command does: the
     kernel says so in /proc/self/status. *)
  if Sys.file_exists "/proc/self/status" then begin
    check_eq "huge pages off" string_of_bool true (Pando.disable_transparent_huge_pages ());
    let status = open_in "/proc/self/status" in
    let rec thp () =
      match input_line status with
      | line when contains ~sub:"THP_enabled:" line -> Some line
      | _ -> thp ()
      | exception End_of_file -> None
    in
    let line = thp () in
    close_in status;
    (* The line is there since Linux 5.0. *)
    Option.iter (check_eq "THP_enabled" Fun.id "THP_enabled:\t0") line
  end;
  finish "test_pando"
