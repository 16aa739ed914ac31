(* Tests of Pando_context on real stores in temporary directories. Every
   promise of Pando_context resolves at once (the binding is synchronous),
   so [run] reads its state instead of starting an event loop. *)

module C = Pando_context

let failures = ref 0

let checks = ref 0

let run p =
  match Lwt.state p with
  | Lwt.Return v -> v
  | Lwt.Fail e -> raise e
  | Lwt.Sleep -> failwith "promise left pending"

let check name cond =
  incr checks ;
  if not cond then (
    incr failures ;
    Printf.printf "FAIL: %s\n%!" name)

let hex b =
  String.concat "" (List.init (Bytes.length b) (fun i -> Printf.sprintf "%02x" (Bytes.get_uint8 b i)))

let of_hex s = Bytes.init (String.length s / 2) (fun i -> Char.chr (int_of_string ("0x" ^ String.sub s (2 * i) 2)))

let check_bytes name expected actual =
  if not (Bytes.equal expected actual) then
    Printf.printf "  %s: expected %s, got %s\n" name (hex expected) (hex actual) ;
  check name (Bytes.equal expected actual)

(* [raises name pred f]: [f ()] raises (or fails its promise with) an
   exception [pred] accepts. *)
let raises name pred f =
  match run (f ()) with
  | _ -> check (name ^ " (no exception)") false
  | exception e ->
      if not (pred e) then Printf.printf "  %s: unexpected %s\n" name (Printexc.to_string e) ;
      check name (pred e)

let is_pando_error = function Pando.Error _ -> true | _ -> false

let tmp_dirs = ref []

let fresh_dir () =
  let d = Filename.temp_file "pando-context-test" "" in
  Sys.remove d ;
  tmp_dirs := d :: !tmp_dirs ;
  d

let rec rm_rf path =
  if Sys.file_exists path then
    if Sys.is_directory path then (
      Array.iter (fun f -> rm_rf (Filename.concat path f)) (Sys.readdir path) ;
      Sys.rmdir path)
    else Sys.remove path

let b = Bytes.of_string

(* Known values. Mainnet's genesis (Octez's mainnet_genesis): protocol
   Ps9mPmXaRzmzk35gbAYNCAw6UXdE2qoABTHbN2oEEc1qM7CwT9P, time
   2018-06-30T16:07:32Z, and its block header's context hash
   CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj (block 0 of
   mainnet). The node's patch_context runs the genesis protocol's init,
   which sets data/version to "genesis". Bytes decoded from base58check
   with Python. *)
let mainnet_protocol = of_hex "38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21"

let mainnet_genesis_time = 1530374852L

let mainnet_genesis_context = of_hex "3fdf8e76abec28f333dca1964e86404e455f5fc7838012558d9e43e23937ea88"

let mainnet_genesis_block = of_hex "8fcf233671b6a04fcf679d2a381c2544ea6c1ea29ba6157776ed8424c7ccd00b"

(* NetXdQprcVkpaWU, mainnet's chain id. *)
let mainnet_chain_id = of_hex "7a06a770"

let protocol_a = Bytes.make 32 'a'

let keys_of l = List.map fst l

let read_file path =
  let ic = open_in_bin path in
  Fun.protect ~finally:(fun () -> close_in ic) (fun () -> really_input_string ic (in_channel_length ic))

let find_sub s sub =
  let n = String.length sub in
  let rec at i = if i + n > String.length s then None else if String.sub s i n = sub then Some i else at (i + 1) in
  at 0

(* The branch pando's store holds for [commit] (its file "branches":
   "PANDOBR1", count, then each name with its length on one byte and the
   32-byte commit hash). *)
let branch_of dir commit =
  let s = read_file (Filename.concat dir "branches") in
  match find_sub s (Bytes.to_string commit) with
  | None -> None
  | Some i ->
      let rec name_start j = if j < 12 then None else if Char.code s.[j] = i - j - 1 then Some (j + 1) else name_start (j - 1) in
      Option.map (fun j -> String.sub s j (i - j)) (name_start (i - 1))

let genesis_patch ctx = Lwt.map (fun c -> Ok c) (C.add ctx ["version"] (b "genesis"))

let test_genesis () =
  let dir = fresh_dir () in
  let index = run (C.init ~patch_context:genesis_patch dir) in
  check "mainnet protocol is 32 bytes" (Bytes.length mainnet_protocol = 32) ;
  (match
     run (C.commit_genesis index ~chain_id:mainnet_chain_id ~time:mainnet_genesis_time ~protocol:mainnet_protocol)
   with
  | Ok h ->
      check_bytes "mainnet genesis context hash" mainnet_genesis_context h ;
      check "mainnet genesis hash in b58" (Pando.Hash.to_b58check h = "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj") ;
      check "genesis exists" (run (C.exists index h)) ;
      check "genesis branch named after mainnet's chain id" (branch_of dir h = Some "NetXdQprcVkpaWU") ;
      let ctx = run (C.checkout_exn index h) in
      check_bytes "genesis protocol" mainnet_protocol (run (C.get_protocol ctx)) ;
      check "genesis test chain" (run (C.get_test_chain ctx) = C.Test_chain_status.Not_running) ;
      (match run (C.commit_info index h) with
      | Some {Pando.date; author; message; parents} ->
          check "genesis date" (date = mainnet_genesis_time) ;
          check "genesis author" (author = "Tezos") ;
          check "genesis message" (message = "Genesis") ;
          check "genesis parents" (parents = [])
      | None -> check "genesis commit_info" false) ;
      check "unknown commit_info" (run (C.commit_info index (Bytes.make 32 '\000')) = None) ;
      check "genesis data" (keys_of (run (C.list ctx [])) = ["version"])
  | Error _ -> check "commit_genesis" false) ;
  (* patch_context runs before protocol and test chain. *)
  let dir2 = fresh_dir () in
  let patch ctx = Lwt.map (fun c -> Ok c) (C.add ctx ["patched"] (b "yes")) in
  let index2 = run (C.init ~patch_context:patch dir2) in
  (match run (C.commit_genesis index2 ~chain_id:mainnet_chain_id ~time:0L ~protocol:protocol_a) with
  | Ok h ->
      let ctx = run (C.checkout_exn index2 h) in
      check "patch_context applied" (run (C.find ctx ["patched"]) = Some (b "yes"))
  | Error _ -> check "commit_genesis with patch" false) ;
  let dir3 = fresh_dir () in
  let index3 = run (C.init ~patch_context:(fun _ -> Lwt.return (Error (`Patch_context "no"))) dir3) in
  check "patch_context error"
    (run (C.commit_genesis index3 ~chain_id:mainnet_chain_id ~time:0L ~protocol:protocol_a) = Error (`Patch_context "no")) ;
  (* A bad protocol hash: the store refuses nothing, Pando_context does. *)
  raises "commit_genesis with a 3-byte chain id" (function Invalid_argument _ -> true | _ -> false) (fun () ->
      C.commit_genesis index ~chain_id:(b "abc") ~time:0L ~protocol:protocol_a) ;
  raises "commit_genesis with a 3-byte protocol" (function Invalid_argument _ -> true | _ -> false) (fun () ->
      C.commit_genesis index ~chain_id:mainnet_chain_id ~time:0L ~protocol:(b "abc")) ;
  run (C.close index) ;
  run (C.close index2) ;
  run (C.close index3)

let test_hashes_of_chains () =
  (* Mainnet's chain id is Chain_id.of_block_hash of its genesis block:
     the first 4 bytes of compute_testchain_genesis. *)
  let g = C.compute_testchain_genesis mainnet_genesis_block in
  check_bytes "testchain genesis (Blake2b of the block hash)"
    (of_hex "7a06a7709ff405d1791d856c52a3c55246e03ec913599b813ec2977398afb3be") g ;
  check_bytes "Chain_id.of_block_hash on mainnet's genesis" mainnet_chain_id (Bytes.sub g 0 4) ;
  check_bytes "testchain chain id" (of_hex "a8e68741") (C.compute_testchain_chain_id mainnet_genesis_block) ;
  (* Mainnet's block 28014, BKoBK7Qa8J4Wvz85MDRWmpAntd5UhPhCh3p6Ga6woJywF8cZkeJ
     (its encoded header as TezEdge's tests hold it). *)
  let header : C.Block_header.t =
    {
      shell =
        {
          level = 28014l;
          proto_level = 1;
          predecessor = of_hex "02dd00defaf70c53e180ea148b349a6feb4795610b2abc7b07fe91ce50a90814";
          timestamp = 1544713848L;
          validation_passes = 4;
          operations_hash = of_hex "32bc1d3a28df9a67b363aa1638f807214bb8987e5f9c0abcbd69531facffd1c8";
          fitness = [of_hex "00"; of_hex "00000000000c15ef"];
          context = of_hex "15a6f54021cb353780e2847fb9c546f1d72c1dc17c3db510f45553ce501ce1de";
        };
      protocol_data =
        of_hex
          "000000000003c762c7df00a856b8bfcaf0676f069f825ca75f37f2bee9fe55ba109cec3d1d041d8c03519626c0c0faa557e778cb09d2e0c729e8556ed6a7a518c84982d1f2682bc6aa753f";
    }
  in
  check_bytes "block header encoding (mainnet 28014)"
    (of_hex
       "00006d6e0102dd00defaf70c53e180ea148b349a6feb4795610b2abc7b07fe91ce50a90814000000005c1276780432bc1d3a28df9a67b363aa1638f807214bb8987e5f9c0abcbd69531facffd1c80000001100000001000000000800000000000c15ef15a6f54021cb353780e2847fb9c546f1d72c1dc17c3db510f45553ce501ce1de000000000003c762c7df00a856b8bfcaf0676f069f825ca75f37f2bee9fe55ba109cec3d1d041d8c03519626c0c0faa557e778cb09d2e0c729e8556ed6a7a518c84982d1f2682bc6aa753f")
    (C.Block_header.to_bytes header) ;
  check_bytes "block hash (mainnet 28014)"
    (of_hex "0b1e09cf8f346cd0cb7cb933162fc5cd64cb66902412090545e1a764ef99c950")
    (C.Block_header.hash header)

let sample index =
  let ctx = C.empty index in
  let ctx = run (C.add ctx ["a"; "x"] (b "1")) in
  let ctx = run (C.add ctx ["a"; "y"] (b "2")) in
  let ctx = run (C.add ctx ["b"] (b "3")) in
  let ctx = run (C.add ctx ["c"; "d"; "e"] (b "4")) in
  run (C.add_protocol ctx protocol_a)


let test_reads_and_writes () =
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  let ctx = sample index in
  check "find" (run (C.find ctx ["a"; "x"]) = Some (b "1")) ;
  check "find missing" (run (C.find ctx ["a"; "z"]) = None) ;
  check "find on a directory" (run (C.find ctx ["a"]) = None) ;
  check "find through a value" (run (C.find ctx ["b"; "x"]) = None) ;
  check "mem value" (run (C.mem ctx ["b"])) ;
  check "mem directory" (not (run (C.mem ctx ["a"]))) ;
  check "mem_tree directory" (run (C.mem_tree ctx ["a"])) ;
  check "mem_tree value" (run (C.mem_tree ctx ["b"])) ;
  check "mem_tree missing" (not (run (C.mem_tree ctx ["z"]))) ;
  (* Context keys are under data/, the protocol at the root. *)
  check "protocol not under data" (run (C.find ctx ["protocol"]) = None) ;
  check_bytes "get_protocol" protocol_a (run (C.get_protocol ctx)) ;
  check "list" (keys_of (run (C.list ctx [])) = ["a"; "b"; "c"]) ;
  check "list offset" (keys_of (run (C.list ctx ~offset:1 [])) = ["b"; "c"]) ;
  check "list length" (keys_of (run (C.list ctx ~offset:1 ~length:1 [])) = ["b"]) ;
  check "list of a value" (run (C.list ctx ["b"]) = []) ;
  check "list missing" (run (C.list ctx ["z"]) = []) ;
  check "length" (run (C.length ctx ["a"]) = 2) ;
  check "length root" (run (C.length ctx []) = 3) ;
  check "length missing" (run (C.length ctx ["z"]) = 0) ;
  (match run (C.find_tree ctx ["a"]) with
  | Some t ->
      check "find_tree kind" (C.Tree.kind t = `Tree) ;
      check "find_tree contents" (run (C.Tree.find t ["y"]) = Some (b "2")) ;
      let ctx2 = run (C.add_tree ctx ["copy"] t) in
      check "add_tree" (run (C.find ctx2 ["copy"; "x"]) = Some (b "1")) ;
      check "add_tree keeps the original" (run (C.find ctx ["copy"; "x"]) = None) ;
      let ctx3 = run (C.add_tree ctx2 ["copy"] (C.Tree.empty ctx)) in
      check "add_tree empty removes" (not (run (C.mem_tree ctx3 ["copy"])))
  | None -> check "find_tree" false) ;
  check "find_tree missing" (run (C.find_tree ctx ["z"]) = None) ;
  let ctx2 = run (C.remove ctx ["a"; "x"]) in
  check "remove" (run (C.find ctx2 ["a"; "x"]) = None) ;
  check "remove keeps sibling" (run (C.find ctx2 ["a"; "y"]) = Some (b "2")) ;
  check "remove leaves the original" (run (C.find ctx ["a"; "x"]) = Some (b "1")) ;
  let ctx3 = run (C.remove ctx2 ["a"; "y"]) in
  check "empty directory disappears" (not (run (C.mem_tree ctx3 ["a"]))) ;
  (* Commit, hash, checkout. *)
  let h = C.hash ~time:10L ~message:"m" ctx in
  let h' = run (C.commit ~time:10L ~message:"m" ctx) in
  check_bytes "hash = commit" h h' ;
  check "commit exists" (run (C.exists index h)) ;
  check "hash is 32 bytes" (Bytes.length h = 32) ;
  let co = run (C.checkout_exn index h) in
  check "checkout reads" (run (C.find co ["c"; "d"; "e"]) = Some (b "4")) ;
  let child = run (C.add co ["b"] (b "33")) in
  let h2 = run (C.commit ~time:11L child) in
  (match run (C.commit_info index h2) with
  | Some i ->
      check "child's parent" (List.map hex i.Pando.parents = [hex h]) ;
      check "default message" (i.Pando.message = "") ;
      check "author" (i.Pando.author = "Tezos")
  | None -> check "commit_info child" false) ;
  check "commit's hash with another time differs" (not (Bytes.equal (C.hash ~time:12L child) h2)) ;
  check "checkout unknown" (run (C.checkout index (Bytes.make 32 '\001')) = None) ;
  check "exists unknown" (not (run (C.exists index (Bytes.make 32 '\001')))) ;
  raises "checkout_exn unknown" (fun e -> e = Not_found) (fun () -> C.checkout_exn index (Bytes.make 32 '\001')) ;
  check "index" (C.index co == index) ;
  check "config" (C.equal_config (C.config co) (C.Config.v ~entries:32 ~stable_hash:256 ~inode_child_order:`Seeded_hash)) ;
  check "config differs" (not (C.equal_config (C.config co) (C.Config.v ~entries:2 ~stable_hash:256 ~inode_child_order:`Seeded_hash))) ;
  check "name" (C.name = "pando") ;
  run (C.close index)

let collect_fold fold =
  List.rev (run (fold ~init:[] ~f:(fun k _ acc -> Lwt.return (String.concat "/" k :: acc))))

let test_fold () =
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  let ctx = sample index in
  let all = collect_fold (C.fold ctx [] ~order:`Sorted) in
  check "fold sorted, directory before entries"
    (all = [""; "a"; "a/x"; "a/y"; "b"; "c"; "c/d"; "c/d/e"]) ;
  if all <> [""; "a"; "a/x"; "a/y"; "b"; "c"; "c/d"; "c/d/e"] then
    Printf.printf "  got [%s]\n" (String.concat "; " all) ;
  let undefined = collect_fold (C.fold ctx [] ~order:`Undefined) in
  check "fold undefined: same set" (List.sort compare undefined = List.sort compare all) ;
  check "fold depth Eq 1" (collect_fold (C.fold ~depth:(`Eq 1) ctx [] ~order:`Sorted) = ["a"; "b"; "c"]) ;
  check "fold depth Le 1" (collect_fold (C.fold ~depth:(`Le 1) ctx [] ~order:`Sorted) = [""; "a"; "b"; "c"]) ;
  check "fold depth Lt 1" (collect_fold (C.fold ~depth:(`Lt 1) ctx [] ~order:`Sorted) = [""]) ;
  check "fold depth Ge 2" (collect_fold (C.fold ~depth:(`Ge 2) ctx [] ~order:`Sorted) = ["a/x"; "a/y"; "c/d"; "c/d/e"]) ;
  check "fold depth Gt 2" (collect_fold (C.fold ~depth:(`Gt 2) ctx [] ~order:`Sorted) = ["c/d/e"]) ;
  check "fold below a key, keys relative" (collect_fold (C.fold ctx ["c"] ~order:`Sorted) = [""; "d"; "d/e"]) ;
  check "fold over a value is a no-op" (collect_fold (C.fold ctx ["b"] ~order:`Sorted) = []) ;
  check "fold over nothing" (collect_fold (C.fold ctx ["z"] ~order:`Sorted) = []) ;
  (* The trees given to f are the subtrees. *)
  let values =
    run
      (C.fold ctx [] ~order:`Sorted ~init:[] ~f:(fun k t acc ->
           Lwt.map (function Some v -> (String.concat "/" k, Bytes.to_string v) :: acc | None -> acc) (C.Tree.to_value t)))
  in
  check "fold values" (List.rev values = [("a/x", "1"); ("a/y", "2"); ("b", "3"); ("c/d/e", "4")]) ;
  (* Tree.fold on a tree, and a promise that is not resolved at once. *)
  let tree = Option.get (run (C.find_tree ctx [])) in
  let waiter, wakener = Lwt.wait () in
  let p =
    C.Tree.fold tree ["a"] ~order:`Sorted ~init:0 ~f:(fun k _ n ->
        if k = ["x"] then Lwt.map (fun () -> n + 1) waiter else Lwt.return (n + 1))
  in
  check "fold waits for f" (Lwt.state p = Lwt.Sleep) ;
  Lwt.wakeup wakener () ;
  check "fold resumes" (Lwt.state p = Lwt.Return 3) ;
  raises "fold passes f's failure" (fun e -> e = Exit) (fun () ->
      C.Tree.fold tree [] ~order:`Sorted ~init:() ~f:(fun _ _ () -> Lwt.fail Exit)) ;
  (* Many entries: no stack growth with the loop. *)
  let big =
    List.fold_left (fun t i -> run (C.Tree.add t ["big"; string_of_int i] (b "v"))) (C.Tree.empty ctx) (List.init 3000 Fun.id)
  in
  check "fold over 3000 entries"
    (run (C.Tree.fold big ["big"] ~order:`Undefined ~init:0 ~f:(fun _ _ n -> Lwt.return (n + 1))) = 3001) ;
  run (C.close index)

let test_tree () =
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  let ctx = sample index in
  let e = C.Tree.empty ctx in
  check "empty is_empty" (C.Tree.is_empty e) ;
  check "empty kind" (C.Tree.kind e = `Tree) ;
  let t = run (C.Tree.add e ["k"; "l"] (b "v")) in
  check "add is not empty" (not (C.Tree.is_empty t)) ;
  check "Tree.mem" (run (C.Tree.mem t ["k"; "l"])) ;
  check "Tree.mem dir" (not (run (C.Tree.mem t ["k"]))) ;
  check "Tree.mem_tree" (run (C.Tree.mem_tree t ["k"])) ;
  check "Tree.find" (run (C.Tree.find t ["k"; "l"]) = Some (b "v")) ;
  check "Tree.length" (run (C.Tree.length t ["k"]) = 1) ;
  check "Tree.list" (keys_of (run (C.Tree.list t ["k"])) = ["l"]) ;
  let t2 = run (C.Tree.remove t ["k"; "l"]) in
  check "Tree.remove" (C.Tree.is_empty t2) ;
  check "Tree.remove leaves original" (run (C.Tree.mem t ["k"; "l"])) ;
  let v = run (C.Tree.of_value ctx (b "val")) in
  check "of_value kind" (C.Tree.kind v = `Value) ;
  check "to_value" (run (C.Tree.to_value v) = Some (b "val")) ;
  check "to_value of a directory" (run (C.Tree.to_value t) = None) ;
  check "find [] on a value" (run (C.Tree.find v []) = Some (b "val")) ;
  let t3 = run (C.Tree.add_tree e ["w"] v) in
  check "Tree.add_tree" (run (C.Tree.find t3 ["w"]) = Some (b "val")) ;
  (match run (C.Tree.find_tree t3 ["w"]) with
  | Some w -> check "Tree.find_tree equal" (C.Tree.equal w v)
  | None -> check "Tree.find_tree" false) ;
  check "equal" (C.Tree.equal t (run (C.Tree.add e ["k"; "l"] (b "v")))) ;
  check "not equal" (not (C.Tree.equal t t3)) ;
  check "hash is 32 bytes" (Bytes.length (C.Tree.hash t) = 32) ;
  check "hash of equal trees" (Bytes.equal (C.Tree.hash t) (C.Tree.hash (run (C.Tree.add e ["k"; "l"] (b "v"))))) ;
  check "config" (C.Config.equal (C.Tree.config t) (C.config ctx)) ;
  (* pp *)
  let s = Format.asprintf "%a" C.Tree.pp t3 in
  check "pp" (s = "{w: 0x76616c}") ;
  if s <> "{w: 0x76616c}" then Printf.printf "  pp: %S\n" s ;
  (* raw *)
  let raw = run (C.Tree.to_raw (Option.get (run (C.find_tree ctx [])))) in
  let expected : C.Tree.raw =
    `Tree
      (C.String_map.of_seq
         (List.to_seq
            [
              ("a", `Tree (C.String_map.of_seq (List.to_seq [("x", `Value (b "1")); ("y", `Value (b "2"))])));
              ("b", `Value (b "3"));
              ("c", `Tree (C.String_map.singleton "d" (`Tree (C.String_map.singleton "e" (`Value (b "4"))))));
            ]))
  in
  let equal_raw a b = fst C.Tree.raw_encoding a = fst C.Tree.raw_encoding b in
  check "to_raw" (equal_raw raw expected) ;
  let back = C.Tree.of_raw raw in
  check "of_raw hash" (C.Tree.equal back (Option.get (run (C.find_tree ctx [])))) ;
  let enc, dec = C.Tree.raw_encoding in
  (* Data_encoding.Binary of raw_encoding: tag 1, size, bytes / tag 0,
     size of the list, then (size, step, raw) each. *)
  check_bytes "raw_encoding of a value" (of_hex "010000000178") (enc (`Value (b "x"))) ;
  check_bytes "raw_encoding of a directory"
    (of_hex "000000000b0000000161010000000178")
    (enc (`Tree (C.String_map.singleton "a" (`Value (b "x"))))) ;
  check "raw_encoding round trip" (equal_raw (dec (enc raw)) raw) ;
  raises "raw decode of garbage" is_pando_error (fun () -> Lwt.return (dec (b "\002"))) ;
  raises "raw decode with trailing bytes" is_pando_error (fun () -> Lwt.return (dec (of_hex "01000000017800"))) ;
  (* unshallow, is_shallow, clear, kinded_key *)
  let data = Option.get (run (C.find_tree ctx [])) in
  check "kinded_key of a changed tree" (C.Tree.kinded_key data = None) ;
  let h = run (C.commit ~time:1L ctx) in
  let co = run (C.checkout_exn index h) in
  let data = Option.get (run (C.find_tree co [])) in
  (match C.Tree.kinded_key data with
  | Some (`Node k) -> check_bytes "kinded_key of a stored tree" (C.Tree.hash data) k
  | _ -> check "kinded_key of a stored tree" false) ;
  (match run (C.find_tree co ["b"]) with
  | Some v -> check "kinded_key of a stored value" (C.Tree.kinded_key v = Some (`Value (C.Tree.hash v)))
  | None -> check "find_tree b" false) ;
  let changed = run (C.Tree.add data ["n"] (b "n")) in
  check "kinded_key after a change" (C.Tree.kinded_key changed = None) ;
  check "is_shallow" (not (C.Tree.is_shallow data)) ;
  let u = run (C.Tree.unshallow data) in
  check "unshallow keeps the hash" (C.Tree.equal u data) ;
  C.Tree.clear data ;
  C.Tree.clear ~depth:1 data ;
  check "clear keeps the contents" (run (C.Tree.find data ["a"; "x"]) = Some (b "1")) ;
  run (C.close index)

let test_fields () =
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  let ctx = C.empty index in
  raises "get_protocol without one" is_pando_error (fun () -> C.get_protocol ctx) ;
  raises "get_test_chain without one" is_pando_error (fun () -> C.get_test_chain ctx) ;
  let ctx = run (C.set_protocol ctx protocol_a) in
  check_bytes "set_protocol" protocol_a (run (C.get_protocol ctx)) ;
  let expiration = 1_700_000_000L in
  let ctx = run (C.fork_test_chain ctx ~protocol:protocol_a ~expiration) in
  check "fork_test_chain" (run (C.get_test_chain ctx) = C.Test_chain_status.Forking {protocol = protocol_a; expiration}) ;
  (* The stored bytes are Octez's encoding: tag 1, protocol, int64. *)
  check_bytes "Forking encoding"
    (Bytes.concat Bytes.empty [of_hex "01"; protocol_a; of_hex "000000006553f100"])
    (C.Test_chain_status.to_bytes (Forking {protocol = protocol_a; expiration})) ;
  check_bytes "Not_running encoding" (of_hex "00") (C.Test_chain_status.to_bytes Not_running) ;
  let running =
    C.Test_chain_status.Running {chain_id = mainnet_chain_id; genesis = Bytes.make 32 'g'; protocol = protocol_a; expiration}
  in
  check "Running round trip" (C.Test_chain_status.of_bytes (C.Test_chain_status.to_bytes running) = running) ;
  check "Running size" (Bytes.length (C.Test_chain_status.to_bytes running) = 1 + 4 + 32 + 32 + 8) ;
  raises "bad status" is_pando_error (fun () -> Lwt.return (C.Test_chain_status.of_bytes (of_hex "03"))) ;
  let ctx = run (C.add_test_chain ctx running) in
  check "add_test_chain" (run (C.get_test_chain ctx) = running) ;
  check "no block metadata hash" (run (C.find_predecessor_block_metadata_hash ctx) = None) ;
  let bm = Bytes.make 32 'b' and om = Bytes.make 32 'o' in
  let ctx = run (C.add_predecessor_block_metadata_hash ctx bm) in
  let ctx = run (C.add_predecessor_ops_metadata_hash ctx om) in
  check "block metadata hash" (run (C.find_predecessor_block_metadata_hash ctx) = Some bm) ;
  check "ops metadata hash" (run (C.find_predecessor_ops_metadata_hash ctx) = Some om) ;
  raises "short metadata hash" (function Invalid_argument _ -> true | _ -> false) (fun () ->
      C.add_predecessor_block_metadata_hash ctx (b "short")) ;
  (* They sit at the root, beside data, under Octez's key names: a tree
     proof of those raw keys shows them. *)
  let h = run (C.commit ~time:5L ctx) in
  let keys = [["predecessor_block_metadata_hash"]; ["predecessor_ops_metadata_hash"]; ["protocol"]; ["test_chain"]] in
  let proof = Pando.produce_tree_proof (C.pando_index index) h keys Pando.V1 in
  (match
     run
       (C.verify_tree_proof ~encoding:C.Proof.V1 proof (fun tree ->
            Lwt.map (fun l -> (tree, l)) (Lwt_list.map_s (C.Tree.find tree) keys)))
   with
  | Ok (_, [Some b1; Some o1; Some p1; Some t1]) ->
      check "block metadata hash at its raw key" (Bytes.equal b1 bm) ;
      check "ops metadata hash at its raw key" (Bytes.equal o1 om) ;
      check "protocol at its raw key" (Bytes.equal p1 protocol_a) ;
      check "test chain at its raw key" (Bytes.equal t1 (C.Test_chain_status.to_bytes running))
  | Ok _ | Error _ -> check "raw keys of the predefined fields" false) ;
  (* hash versions *)
  check "get_hash_version" (C.get_hash_version ctx = 0) ;
  (match run (C.set_hash_version ctx 0) with Ok c -> check "set_hash_version 0" (c == ctx) | Error _ -> check "set_hash_version 0" false) ;
  check "set_hash_version 1" (run (C.set_hash_version ctx 1) = Error (`Unsupported_context_hash_version 1)) ;
  (* commit_test_chain_genesis *)
  let forked : C.Block_header.t =
    {
      shell =
        {
          level = 42l;
          proto_level = 3;
          predecessor = Bytes.make 32 'p';
          timestamp = 1_600_000_000L;
          validation_passes = 4;
          operations_hash = Bytes.make 32 'o';
          fitness = [b "\001"; b "\000\000\000\007"];
          context = Bytes.make 32 'c';
        };
      protocol_data = b "proto";
    }
  in
  let genesis = run (C.commit_test_chain_genesis ctx forked) in
  let forked_hash = C.Block_header.hash forked in
  check_bytes "test genesis predecessor" (C.compute_testchain_genesis forked_hash) genesis.shell.predecessor ;
  check "test genesis proto_level" (genesis.shell.proto_level = 4) ;
  check "test genesis level" (genesis.shell.level = 42l) ;
  check "test genesis validation passes" (genesis.shell.validation_passes = 0) ;
  check "test genesis protocol data" (Bytes.length genesis.protocol_data = 0) ;
  (* LLoZS2LW3rEi7KYU4ouBQtorua37aWWCtpDmv1n2x3xoKi6sVXLWp, the operations
     hash of a block without operations. *)
  check_bytes "empty operations hash" (of_hex "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8") genesis.shell.operations_hash ;
  (match branch_of dir genesis.shell.context with
  | Some name ->
      check "test chain branch is a chain id in base58check" (String.length name = 15 && String.sub name 0 3 = "Net") ;
      check "test chain branch is not mainnet's" (name <> "NetXdQprcVkpaWU")
  | None -> check "test chain branch" false) ;
  (match run (C.commit_info index genesis.shell.context) with
  | Some i ->
      check "test chain commit message" (i.Pando.message = "Forking testchain at level 42.") ;
      check "test chain commit date" (i.Pando.date = 1_600_000_000L)
  | None -> check "test chain genesis commit" false) ;
  (* Block header encoding: 4 + 1 + 32 + 8 + 1 + 32 + (4 + 5 + 8) + 32 + 5 *)
  check "block header size" (Bytes.length (C.Block_header.to_bytes forked) = 132) ;
  let co = run (C.checkout_exn index (run (C.commit ~time:6L (run (C.add ctx ["k"] (b "v")))))) in
  let in_store = Option.get (run (C.find_tree co [])) in
  run (C.close index) ;
  (* Trees in memory need no index: made with every index closed. *)
  let raw = `Tree (C.String_map.of_seq (List.to_seq [("a", `Value (b "1")); ("d", `Tree (C.String_map.singleton "e" (`Value (b "2"))))])) in
  let t = C.Tree.of_raw raw in
  check "of_raw with no index open" (run (C.Tree.find t ["d"; "e"]) = Some (b "2")) ;
  check "of_raw round trip" (run (C.Tree.to_raw t) = raw) ;
  check "Tree.empty with its context's index closed" (C.Tree.is_empty (C.Tree.empty ctx)) ;
  raises "store tree after close" is_pando_error (fun () -> C.Tree.to_raw in_store)

let expect_ok name = function
  | Ok v -> Some v
  | Error (`Proof_mismatch m | `Stream_too_long m | `Stream_too_short m) ->
      Printf.printf "  %s: %s\n" name m ;
      check name false ;
      None

let expect_mismatch name = function
  | Error (`Proof_mismatch _) -> check name true
  | Ok _ | Error _ -> check name false

let expect_error name pred
    (r : (_, [`Proof_mismatch of string | `Stream_too_long of string | `Stream_too_short of string]) result) =
  match r with
  | Error e when pred e -> check name true
  | Error (`Proof_mismatch m | `Stream_too_long m | `Stream_too_short m) ->
      Printf.printf "  %s: other error %s\n" name m ;
      check name false
  | Ok _ -> check name false

let enc_name = function C.Proof.V1 -> "V1" | C.Proof.V2 -> "V2"

(* Where the after hash starts: V1 after the version (2) and the tagged
   before (33), and its tag; V2 after the kinds byte, version and before. *)
let after_at = function C.Proof.V1 -> 36 | C.Proof.V2 -> 35

(* The proof with its after hash replaced. *)
let with_after enc proof after =
  let p = Bytes.copy proof in
  Bytes.blit after 0 p (after_at enc) 32 ;
  p

(* The proof with its after stated as a value's hash (it is a node's). *)
let after_as_value enc proof =
  let p = Bytes.copy proof in
  (match enc with
  | C.Proof.V1 -> Bytes.set_uint8 p 35 0
  | C.Proof.V2 -> Bytes.set_uint8 p 0 (Bytes.get_uint8 p 0 land lnot 2)) ;
  p

let tree_proofs enc index h =
  let co = run (C.checkout_exn index h) in
  let pindex = C.pando_index index in
  let name s = enc_name enc ^ " " ^ s in
  let verify p f = C.verify_tree_proof ~encoding:enc p f in
  let proof = Pando.produce_tree_proof pindex h [["data"; "a"; "x"]; ["data"; "b"]; ["data"; "big"; "k0500"]] enc in
  (match
     expect_ok (name "tree proof verifies, callback reads")
       (run
          (verify proof (fun tree ->
               Lwt.bind (C.Tree.find tree ["data"; "a"; "x"]) (fun x ->
                   Lwt.bind (C.Tree.find tree ["data"; "big"; "k0500"]) (fun k ->
                       Lwt.bind (C.Tree.length tree ["data"; "big"]) (fun n ->
                           Lwt.return (tree, (x, k, n))))))))
   with
  | Some (_, (x, k, n)) ->
      check (name "proved value") (x = Some (b "1")) ;
      check (name "proved value in an inode") (k = Some (b "500")) ;
      check (name "proved length of an inode") (n = 1000)
  | None -> ()) ;
  (* Reads the proof shows as absent, and kinds. *)
  (match
     expect_ok (name "absent paths")
       (run
          (verify proof (fun tree ->
               Lwt.bind (C.Tree.mem tree ["data"; "zzz"]) (fun m ->
                   Lwt.bind (C.Tree.mem_tree tree ["data"; "a"]) (fun mt ->
                       Lwt.bind (C.Tree.list tree ["data"]) (fun l -> Lwt.return (tree, (m, mt, List.map fst l))))))))
   with
  | Some (_, (m, mt, l)) ->
      check (name "absent in proof") (not m) ;
      check (name "mem_tree in proof") mt ;
      check (name "list in proof") (l = ["a"; "b"; "big"; "c"])
  | None -> ()) ;
  (* A read of a blinded part, a changed tree, damaged bytes. *)
  expect_mismatch (name "blinded read")
    (run (verify proof (fun tree -> Lwt.map (fun v -> (tree, v)) (C.Tree.find tree ["data"; "c"; "d"; "e"])))) ;
  expect_mismatch (name "blinded inode read")
    (run (verify proof (fun tree -> Lwt.map (fun v -> (tree, v)) (C.Tree.find tree ["data"; "big"; "k0001"])))) ;
  expect_mismatch (name "after mismatch")
    (run (verify proof (fun tree -> Lwt.map (fun t -> (t, ())) (C.Tree.add tree ["data"; "b"] (b "9"))))) ;
  expect_ok (name "unchanged tree matches after") (run (verify proof (fun t -> Lwt.return (t, ())))) |> ignore ;
  expect_mismatch (name "after of the wrong kind") (run (verify (after_as_value enc proof) (fun t -> Lwt.return (t, ())))) ;
  let damaged = Bytes.copy proof in
  Bytes.set_uint8 damaged (Bytes.length damaged - 1) (Bytes.get_uint8 damaged (Bytes.length damaged - 1) lxor 1) ;
  expect_mismatch (name "damaged proof") (run (verify damaged (fun t -> Lwt.return (t, ())))) ;
  let before = Bytes.copy proof in
  let at = after_at enc - 33 in
  Bytes.set_uint8 before at (Bytes.get_uint8 before at lxor 1) ;
  expect_mismatch (name "before of another tree") (run (verify before (fun t -> Lwt.return (t, ())))) ;
  expect_mismatch (name "truncated proof") (run (verify (b "xx") (fun t -> Lwt.return (t, ())))) ;
  let other = match enc with C.Proof.V1 -> C.Proof.V2 | C.Proof.V2 -> C.Proof.V1 in
  expect_mismatch (name "read in the other encoding")
    (run (C.verify_tree_proof ~encoding:other proof (fun t -> Lwt.return (t, ())))) ;
  raises (name "callback's own exception") (fun e -> e = Exit) (fun () -> verify proof (fun _ -> Lwt.fail Exit)) ;
  (* Writes, in a flat directory and in an inode: the after hash is the
     one pando computes for the same writes on the stored tree. *)
  let stored = Option.get (Pando.checkout pindex h) in
  let written = Pando.tree_remove (Pando.tree_add (Pando.get_tree stored) ["data"; "a"; "x"] (b "new")) ["data"; "b"] in
  (match
     expect_ok (name "write replayed on the proof")
       (run
          (verify (with_after enc proof (Pando.tree_hash written)) (fun tree ->
               Lwt.bind (C.Tree.add tree ["data"; "a"; "x"] (b "new")) (fun t ->
                   Lwt.map (fun t -> (t, ())) (C.Tree.remove t ["data"; "b"])))))
   with
  | Some (t, ()) -> check (name "written tree's hash") (Bytes.equal (C.Tree.hash t) (Pando.tree_hash written))
  | None -> ()) ;
  let in_inode = Pando.tree_add (Pando.get_tree stored) ["data"; "big"; "k0500"] (b "new") in
  ignore
    (expect_ok (name "write in an inode")
       (run
          (verify (with_after enc proof (Pando.tree_hash in_inode)) (fun tree ->
               Lwt.map (fun t -> (t, ())) (C.Tree.add tree ["data"; "big"; "k0500"] (b "new")))))) ;
  (* Folding over a proved tree. *)
  let proof_c = Pando.produce_tree_proof pindex h [["data"; "c"; "d"; "e"]; ["data"; "a"; "x"]; ["data"; "a"; "y"]] enc in
  (match
     expect_ok (name "fold on a proved tree")
       (run
          (verify proof_c (fun tree ->
               Lwt.map (fun l -> (tree, List.rev l))
                 (C.Tree.fold tree ["data"; "c"] ~order:`Sorted ~init:[] ~f:(fun k _ acc ->
                      Lwt.return (String.concat "/" k :: acc))))))
   with
  | Some (_, l) -> check (name "fold on a proved tree") (l = [""; "d"; "d/e"])
  | None -> ()) ;
  (* Trees move between a proof and the store (as copies) when the proof
     shows them whole: a proved subtree added to a context, a store tree
     into a proved one; one with a blinded part does not. *)
  (match
     expect_ok (name "proved subtree out of the callback")
       (run (verify proof_c (fun tree -> Lwt.map (fun c -> (tree, c)) (C.Tree.find_tree tree ["data"; "c"]))))
   with
  | Some (_, Some c) ->
      let ctx2 = run (C.add_tree co ["copied"] c) in
      check (name "proved subtree added to a context") (run (C.find ctx2 ["copied"; "d"; "e"]) = Some (b "4")) ;
      check (name "same hash in the store") (C.Tree.equal c (Option.get (run (C.find_tree ctx2 ["copied"])))) ;
      let t2 = run (C.Tree.add_tree (Option.get (run (C.find_tree co []))) ["copied"] c) in
      check (name "proved subtree added to a store tree") (run (C.Tree.find t2 ["copied"; "d"; "e"]) = Some (b "4"))
  | Some (_, None) | None -> check (name "proved subtree") false) ;
  (match run (verify proof_c (fun tree -> Lwt.return (tree, ()))) with
  | Ok (tree, ()) ->
      raises (name "blinded subtree not added to a context") is_pando_error (fun () -> C.add_tree co ["copied"] tree)
  | Error _ -> check (name "proof_c") false) ;
  let small = run (C.Tree.add (C.Tree.empty co) ["s"] (b "v")) in
  let expected = Pando.tree_add_tree (Pando.get_tree stored) ["data"; "a"; "z"] (Pando.tree_add (Pando.empty_tree ()) ["s"] (b "v")) in
  ignore
    (expect_ok (name "memory tree added to a proved tree")
       (run
          (verify (with_after enc proof (Pando.tree_hash expected)) (fun tree ->
               Lwt.map (fun t -> (t, ())) (C.Tree.add_tree tree ["data"; "a"; "z"] small))))) ;
  let store_sub = Option.get (run (C.find_tree co ["c"])) in
  let expected = Pando.tree_add_tree (Pando.get_tree stored) ["data"; "a"; "z"] (Option.get (Pando.find_tree stored ["data"; "c"])) in
  ignore
    (expect_ok (name "store tree added to a proved tree")
       (run
          (verify (with_after enc proof (Pando.tree_hash expected)) (fun tree ->
               Lwt.map (fun t -> (t, ())) (C.Tree.add_tree tree ["data"; "a"; "z"] store_sub)))))

(* Stream proofs, checked against a callback's reads as it makes them. *)
let stream_proofs enc index h =
  let pindex = C.pando_index index in
  let name s = enc_name enc ^ " " ^ s in
  let paths = [["data"; "a"; "x"]; ["data"; "big"; "k0500"]; ["data"; "zzz"]; ["data"; "c"]] in
  let proof = Pando.produce_stream_proof pindex h paths enc in
  let verify p f = C.verify_stream_proof ~encoding:enc p f in
  let ( let* ) = Lwt.bind in
  (* The reads of [paths], the later ones chosen from earlier answers. *)
  let reads tree =
    let* x = C.Tree.find tree ["data"; "a"; "x"] in
    let* k = C.Tree.find tree ["data"; "big"; (if x = Some (b "1") then "k0500" else "k0001")] in
    let* m = C.Tree.mem tree ["data"; "zzz"] in
    let* c = C.Tree.find_tree tree ["data"; "c"] in
    Lwt.return (x, k, m, c)
  in
  (match expect_ok (name "stream proof") (run (verify proof (fun tree -> Lwt.map (fun r -> (tree, r)) (reads tree)))) with
  | Some (tree, (x, k, m, c)) ->
      check (name "streamed value") (x = Some (b "1")) ;
      check (name "streamed value in an inode") (k = Some (b "500")) ;
      check (name "streamed absence") (not m) ;
      (match c with
      | Some c ->
          check (name "streamed subtree kind") (C.Tree.kind c = `Tree) ;
          let stored = Option.get (Pando.checkout pindex h) in
          check (name "streamed subtree hash") (Bytes.equal (C.Tree.hash c) (Pando.tree_hash (Option.get (Pando.find_tree stored ["data"; "c"]))))
      | None -> check (name "streamed subtree") false) ;
      (* Once checked, the tree answers from the whole stream. *)
      check (name "checked tree lists") (List.map fst (run (C.Tree.list tree ["data"; "a"])) = ["x"; "y"]) ;
      raises (name "checked tree: unstreamed part") is_pando_error (fun () -> C.Tree.find tree ["data"; "b"])
  | None -> ()) ;
  (* Reads through a subtree are the same reads. *)
  ignore
    (expect_ok (name "stream read through a subtree")
       (run
          (verify proof (fun tree ->
               let* x = C.Tree.find tree ["data"; "a"; "x"] in
               let* data = C.Tree.find_tree tree ["data"] in
               let data = Option.get data in
               let* k = C.Tree.find data ["big"; (if x = Some (b "1") then "k0500" else "?")] in
               let* m = C.Tree.mem data ["zzz"] in
               let* _ = C.Tree.mem_tree tree ["data"; "c"] in
               check (name "subtree read") (k = Some (b "500") && not m) ;
               Lwt.return (tree, ()))))) ;
  expect_error (name "stream: fewer reads (too long)")
    (function `Stream_too_long _ -> true | _ -> false)
    (run (verify proof (fun tree -> Lwt.map (fun _ -> (tree, ())) (C.Tree.find tree ["data"; "a"; "x"])))) ;
  expect_error (name "stream: more reads (too short)")
    (function `Stream_too_short _ -> true | _ -> false)
    (run (verify proof (fun tree -> Lwt.bind (reads tree) (fun _ -> Lwt.map (fun _ -> (tree, ())) (C.Tree.find tree ["data"; "b"]))))) ;
  expect_mismatch (name "stream: other read first")
    (run (verify proof (fun tree -> Lwt.map (fun _ -> (tree, ())) (C.Tree.find tree ["data"; "b"])))) ;
  expect_mismatch (name "stream: list refused")
    (run (verify proof (fun tree -> Lwt.map (fun _ -> (tree, ())) (C.Tree.list tree ["data"])))) ;
  expect_mismatch (name "stream: write refused")
    (run (verify proof (fun tree -> Lwt.map (fun t -> (t, ())) (C.Tree.add tree ["data"; "a"; "x"] (b "9"))))) ;
  expect_mismatch (name "stream: other result")
    (run (verify proof (fun tree -> Lwt.bind (reads tree) (fun _ -> Lwt.return (C.Tree.empty (C.empty index), ()))))) ;
  (* The binding's stream verifier checks after against the reads' tree:
     a proof whose after is a write's is refused whatever the callback. *)
  let stored = Option.get (Pando.checkout pindex h) in
  let written = Pando.tree_add (Pando.get_tree stored) ["data"; "a"; "x"] (b "9") in
  expect_mismatch (name "stream: after of a write refused")
    (run (verify (with_after enc proof (Pando.tree_hash written)) (fun tree -> Lwt.map (fun r -> (tree, r)) (reads tree)))) ;
  let damaged = Bytes.copy proof in
  Bytes.set_uint8 damaged (Bytes.length damaged - 1) (Bytes.get_uint8 damaged (Bytes.length damaged - 1) lxor 1) ;
  expect_mismatch (name "stream: damaged") (run (verify damaged (fun tree -> Lwt.map (fun r -> (tree, r)) (reads tree)))) ;
  (* An element altered early: the first read gets no answer. *)
  let early = Bytes.copy proof in
  let at = (match enc with C.Proof.V1 -> 72 | C.Proof.V2 -> 71) + 10 in
  Bytes.set_uint8 early at (Bytes.get_uint8 early at lxor 0x40) ;
  let answered = ref false in
  expect_mismatch (name "stream: early element altered")
    (run
       (verify early (fun tree ->
            Lwt.map (fun x -> answered := true ; (tree, x)) (C.Tree.find tree ["data"; "a"; "x"])))) ;
  check (name "stream: no answer from an altered element") (not !answered) ;
  expect_mismatch (name "stream: truncated") (run (verify (Bytes.sub proof 0 40) (fun t -> Lwt.return (t, ())))) ;
  let other = match enc with C.Proof.V1 -> C.Proof.V2 | C.Proof.V2 -> C.Proof.V1 in
  expect_mismatch (name "stream: other encoding")
    (run (C.verify_stream_proof ~encoding:other proof (fun tree -> Lwt.map (fun r -> (tree, r)) (reads tree)))) ;
  (* No reads: only an empty stream. *)
  let empty = Pando.produce_stream_proof pindex h [] enc in
  ignore (expect_ok (name "stream: no reads") (run (verify empty (fun t -> Lwt.return (t, ()))))) ;
  raises (name "stream: callback's own exception") (fun e -> e = Exit) (fun () -> verify proof (fun _ -> Lwt.fail Exit))

let test_proofs () =
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  let ctx = sample index in
  (* A directory of 1,000 entries: its proofs have inodes. *)
  let ctx =
    List.fold_left (fun c i -> run (C.add c ["big"; Printf.sprintf "k%04d" i] (b (string_of_int i)))) ctx (List.init 1000 Fun.id)
  in
  let h = run (C.commit ~time:1L ctx) in
  let co = run (C.checkout_exn index h) in
  List.iter (fun enc -> tree_proofs enc index h ; stream_proofs enc index h) [C.Proof.V1; C.Proof.V2] ;
  (* merkle_tree_v2: a proof the verifier accepts, with the data. *)
  let proof = run (C.merkle_tree_v2 co C.Proof.Raw_context ["data"; "a"]) in
  (match
     run (C.verify_tree_proof ~encoding:C.Proof.V2 proof (fun tree -> Lwt.map (fun r -> (tree, r)) (C.Tree.to_raw (Option.get (run (C.Tree.find_tree tree ["data"; "a"]))))))
   with
  | Ok (_, `Tree m) -> check "merkle_tree_v2 Raw_context shows the subtree" (C.String_map.cardinal m = 2)
  | Ok _ | Error _ -> check "merkle_tree_v2 Raw_context" false) ;
  let hole = run (C.merkle_tree_v2 co C.Proof.Hole ["data"; "b"]) in
  (match run (C.verify_tree_proof ~encoding:C.Proof.V2 hole (fun tree -> Lwt.map (fun m -> (tree, m)) (C.Tree.mem_tree tree ["data"; "b"]))) with
  | Ok (_, true) -> check "merkle_tree_v2 Hole" true
  | Ok _ | Error _ -> check "merkle_tree_v2 Hole" false) ;
  expect_mismatch "merkle_tree_v2 is V2 by default" (run (C.verify_tree_proof ~encoding:C.Proof.V1 hole (fun t -> Lwt.return (t, ())))) ;
  let hole1 = run (C.merkle_tree_v2 ~encoding:C.Proof.V1 co C.Proof.Hole ["data"; "b"]) in
  (match run (C.verify_tree_proof hole1 (fun tree -> Lwt.map (fun m -> (tree, m)) (C.Tree.mem_tree tree ["data"; "b"]))) with
  | Ok (_, true) -> check "merkle_tree_v2 ~encoding:V1" true
  | Ok _ | Error _ -> check "merkle_tree_v2 ~encoding:V1" false) ;
  let changed = run (C.add co ["z"] (b "z")) in
  raises "merkle_tree_v2 on a changed context" (function Invalid_argument _ -> true | _ -> false) (fun () ->
      C.merkle_tree_v2 changed C.Proof.Hole ["data"]) ;
  (* merkle_tree (v1) *)
  let mt = run (C.merkle_tree co C.Proof.Hole ["a"; "x"]) in
  (match C.String_map.find_opt "a" mt, C.String_map.find_opt "b" mt with
  | Some (C.Proof.Continue sub), Some (C.Proof.Hash (C.Proof.Contents, hb)) ->
      let vb = Option.get (run (C.find_tree co ["b"])) in
      check "merkle_tree sibling hash" (hb = Pando.Hash.to_b58check (C.Tree.hash vb)) ;
      (match C.String_map.find_opt "x" sub, C.String_map.find_opt "y" sub with
      | Some (C.Proof.Hash (C.Proof.Contents, _)), Some (C.Proof.Hash (C.Proof.Contents, _)) ->
          check "merkle_tree Hole leaf" true
      | _ -> check "merkle_tree Hole leaf" false) ;
      check "merkle_tree keys" (List.map fst (C.String_map.bindings mt) = ["a"; "b"; "big"; "c"])
  | _ -> check "merkle_tree shape" false) ;
  let mt = run (C.merkle_tree co C.Proof.Raw_context ["c"; "d"]) in
  (match C.String_map.find_opt "c" mt with
  | Some (C.Proof.Continue sub) -> (
      match C.String_map.find_opt "d" sub with
      | Some (C.Proof.Data (C.Proof.Dir m)) -> check "merkle_tree Raw_context" (C.String_map.find_opt "e" m = Some (C.Proof.Key (b "4")))
      | _ -> check "merkle_tree Raw_context" false)
  | _ -> check "merkle_tree Raw_context shape" false) ;
  raises "merkle_tree through a value" (function Invalid_argument _ -> true | _ -> false) (fun () ->
      C.merkle_tree co C.Proof.Hole ["b"; "x"; "y"]) ;
  raises "merkle_tree empty key" (function Invalid_argument _ -> true | _ -> false) (fun () -> C.merkle_tree co C.Proof.Hole []) ;
  check "merkle_tree without data" (C.String_map.is_empty (run (C.merkle_tree (C.empty index) C.Proof.Hole ["a"]))) ;
  run (C.close index)

let test_store_life () =
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  check "gc allowed" (C.is_gc_allowed index) ;
  (* Commits, a collection keeping the last few. *)
  let commits = ref [] in
  let ctx = ref (C.empty index) in
  for i = 1 to 10 do
    let c = run (C.add !ctx ["n"] (b (string_of_int i))) in
    let h = run (C.commit ~time:(Int64.of_int i) c) in
    commits := h :: !commits ;
    ctx := run (C.checkout_exn index h)
  done ;
  let commits = Array.of_list (List.rev !commits) in
  run (C.split index) ;
  run (C.sync index) ;
  raises "gc of an unknown commit" is_pando_error (fun () -> C.gc index (Bytes.make 32 '\002')) ;
  run (C.gc index commits.(7)) ;
  run (C.wait_gc_completion index) ;
  check "kept commit" (run (C.exists index commits.(7))) ;
  check "newest commit" (run (C.exists index commits.(9))) ;
  check "collected commit" (run (C.checkout index commits.(2)) = None) ;
  check "kept reads" (run (C.find (run (C.checkout_exn index commits.(8))) ["n"]) = Some (b "9")) ;
  (* A reader in the same process, read-only. *)
  let ro = run (C.init ~readonly:true dir) in
  check "read-only sees" (run (C.exists ro commits.(9))) ;
  check "gc not allowed read-only" (not (C.is_gc_allowed ro)) ;
  let c = run (C.add !ctx ["n"] (b "11")) in
  let h11 = run (C.commit ~time:11L c) in
  run (C.sync ro) ;
  check "read-only sees a later commit" (run (C.exists ro h11)) ;
  raises "commit through a read-only index" is_pando_error (fun () ->
      C.commit ~time:12L (run (C.add (run (C.checkout_exn ro h11)) ["w"] (b "w")))) ;
  run (C.close ro) ;
  (* Snapshots. *)
  let snap = Filename.concat (fresh_dir ()) "snap" in
  Sys.mkdir (Filename.dirname snap) 0o755 ;
  run (C.export_snapshot index h11 ~path:snap) ;
  check "snapshot written" (Sys.file_exists snap) ;
  raises "snapshot over an existing file" is_pando_error (fun () -> C.export_snapshot index h11 ~path:snap) ;
  raises "snapshot of an unknown commit" is_pando_error (fun () ->
      C.export_snapshot index (Bytes.make 32 '\003') ~path:(snap ^ "2")) ;
  let other = run (C.init (fresh_dir ())) in
  let imported = run (C.import_snapshot other ~path:snap) in
  check_bytes "imported commit" h11 imported ;
  check "imported reads" (run (C.find (run (C.checkout_exn other imported)) ["n"]) = Some (b "11")) ;
  run (C.close other) ;
  (* Close: twice is fine, later uses fail with Pando.Error. *)
  run (C.close index) ;
  run (C.close index) ;
  raises "exists on a closed index" is_pando_error (fun () -> C.exists index h11) ;
  raises "checkout on a closed index" is_pando_error (fun () -> C.checkout index h11) ;
  raises "find on a context of a closed index" is_pando_error (fun () -> C.find !ctx ["n"]) ;
  raises "commit on a closed index" is_pando_error (fun () -> C.commit ~time:13L !ctx) ;
  check "gc not allowed once closed" (not (C.is_gc_allowed index)) ;
  (* A writer with another sync policy, and the store reopened. *)
  let dir2 = fresh_dir () in
  let w = run (C.init ~sync_policy:Pando.No_sync dir2) in
  let hw = run (C.commit ~time:1L (run (C.add (C.empty w) ["k"] (b "v")))) in
  run (C.close w) ;
  let w = run (C.init ~sync_policy:Pando.Pipelined dir2) in
  check "commit kept after close (No_sync)" (run (C.find (run (C.checkout_exn w hw)) ["k"]) = Some (b "v")) ;
  run (C.close w) ;
  raises "open a missing store read-only" is_pando_error (fun () -> C.init ~readonly:true (fresh_dir ())) ;
  check "of_raw of a value with no open index" (run (C.Tree.to_value (C.Tree.of_raw (`Value (b "x")))) = Some (b "x"))

(* The edge cases (Common.Edges of ocaml/test), through Octez's context
   functions: every answer asserted is irmin 3.7.2's own (printed by
   ocaml/duo/edge_answers.ml), with the context's keys under data/ as
   Octez puts them. *)
let test_edges () =
  let module E = Common.Edges in
  let dir = fresh_dir () in
  let index = run (C.init dir) in
  let names l = String.concat "," (List.map fst l) in
  let hash = function None -> "None" | Some t -> hex (C.Tree.hash t) in
  let folded ctx key =
    List.rev
      (run
         (C.fold ~depth:(`Le 1) ctx key ~order:`Sorted ~init:[] ~f:(fun k t acc ->
              Lwt.return ((String.concat "/" k ^ ":" ^ match C.Tree.kind t with `Tree -> "tree" | `Value -> "value") :: acc))))
  in
  let check_eq name show expected actual =
    if expected <> actual then Printf.printf "  %s: expected %s, got %s\n" name (show expected) (show actual) ;
    check name (expected = actual)
  in
  (* the empty path of an empty context is data/, absent *)
  let empty = C.empty index in
  check "empty: find []" (run (C.find empty []) = None) ;
  check "empty: mem []" (not (run (C.mem empty []))) ;
  check "empty: mem_tree [] (no data/)" (not (run (C.mem_tree empty []))) ;
  check_eq "empty: find_tree []" Fun.id "None" (hash (run (C.find_tree empty []))) ;
  check_eq "empty: list []" Fun.id "" (names (run (C.list empty []))) ;
  check_eq "empty: length []" string_of_int 0 (run (C.length empty [])) ;
  check_eq "empty: fold [] visits nothing" (String.concat " ") [] (folded empty []) ;
  (* the empty path of an empty tree is its root *)
  let t = C.Tree.empty empty in
  check "empty tree: find []" (run (C.Tree.find t []) = None) ;
  check "empty tree: mem []" (not (run (C.Tree.mem t []))) ;
  check "empty tree: mem_tree []" (run (C.Tree.mem_tree t [])) ;
  check_eq "empty tree: find_tree []" Fun.id E.empty_tree_hash (hash (run (C.Tree.find_tree t []))) ;
  check_eq "empty tree: list []" Fun.id "" (names (run (C.Tree.list t []))) ;
  check_eq "empty tree: length []" string_of_int 0 (run (C.Tree.length t [])) ;
  (* irmin's fold visits the root of an empty tree, at [] (test_pando's
     "empty: fold []", edge_answers.exe) *)
  check_eq "empty tree: fold [] visits the root" (String.concat " ") [ ":tree" ]
    (List.rev
       (run
          (C.Tree.fold ~depth:(`Le 1) t [] ~order:`Sorted ~init:[] ~f:(fun k t acc ->
               Lwt.return
                 ((String.concat "/" k ^ ":" ^ match C.Tree.kind t with `Tree -> "tree" | `Value -> "value") :: acc))))) ;
  (* every edge path under data/, and the empty path then *)
  let ctx = List.fold_left (fun c (k, v) -> run (C.add c k v)) empty E.paths in
  List.iteri
    (fun i (k, v) ->
      let name what = Printf.sprintf "edge %d: %s" i what in
      check (name "find") (run (C.find ctx k) = Some v) ;
      check (name "mem") (run (C.mem ctx k)) ;
      check (name "mem_tree") (run (C.mem_tree ctx k)) ;
      let p = E.parent k in
      check (name "mem of its directory") (not (run (C.mem ctx p))) ;
      check (name "mem_tree of its directory") (run (C.mem_tree ctx p)) ;
      check_eq (name "length of its directory") string_of_int (E.parent_length k) (run (C.length ctx p)))
    E.paths ;
  check "edges: find []" (run (C.find ctx []) = None) ;
  check "edges: mem []" (not (run (C.mem ctx []))) ;
  check "edges: mem_tree []" (run (C.mem_tree ctx [])) ;
  check_eq "edges: find_tree []" Fun.id E.tree_hash (hash (run (C.find_tree ctx []))) ;
  check_eq "edges: list []" Fun.id (String.concat "," E.top) (names (run (C.list ctx []))) ;
  check_eq "edges: length []" string_of_int (List.length E.top) (run (C.length ctx [])) ;
  check_eq "edges: fold []" (String.concat " ")
    (":tree" :: List.map (fun n -> n ^ ":tree") E.top)
    (folded ctx []) ;
  (* copies (find_tree, then add_tree) *)
  check_eq "copy from a missing path" Fun.id "None" (hash (run (C.find_tree ctx ["missing"]))) ;
  let sub = run (C.find_tree ctx (E.deep 32)) in
  check_eq "find_tree 32 steps deep" Fun.id E.deep32_hash (hash sub) ;
  let copied = run (C.add_tree ctx ["copy"] (Option.get sub)) in
  check_eq "copy 32 steps deep" Fun.id E.copied_hash (hash (run (C.find_tree copied []))) ;
  (* commits, then a commit of the tree checked out, unchanged *)
  let h = run (C.commit ~time:1L ~message:"edges" ctx) in
  check_eq "edges: commit" Fun.id E.data_commit (hex h) ;
  let again = run (C.commit ~time:2L ~message:"same tree" (run (C.checkout_exn index h))) in
  check_eq "edges: commit of the same tree" Fun.id E.data_commit_again (hex again) ;
  (* proofs: a 256-byte step has no encoding and is refused; a 255-byte
     one is proved and read in the tree proved *)
  let pindex = C.pando_index index in
  List.iter
    (fun enc ->
      raises (enc_name enc ^ " proof of a 256-byte step") is_pando_error (fun () ->
          Lwt.return (Pando.produce_tree_proof pindex h [["data"; "long"; E.s 256 'b']] enc)) ;
      let key = ["data"; "max"; E.s 255 'a'] in
      let proof = Pando.produce_tree_proof pindex h [key] enc in
      match expect_ok (enc_name enc ^ " proof of a 255-byte step")
              (run (C.verify_tree_proof ~encoding:enc proof (fun tree ->
                   Lwt.map (fun v -> (tree, v)) (C.Tree.find tree key)))) with
      | Some (_, v) -> check (enc_name enc ^ " 255-byte step proved") (v = Some (b "255"))
      | None -> ())
    [C.Proof.V1; C.Proof.V2] ;
  run (C.close index)

let () =
  let tests =
    [
      ("genesis", test_genesis);
      ("chain hashes", test_hashes_of_chains);
      ("reads and writes", test_reads_and_writes);
      ("fold", test_fold);
      ("tree", test_tree);
      ("predefined fields", test_fields);
      ("proofs", test_proofs);
      ("edges", test_edges);
      ("store life", test_store_life);
    ]
  in
  List.iter
    (fun (name, f) ->
      match f () with
      | () -> ()
      | exception e ->
          incr failures ;
          Printf.printf "FAIL: %s raised %s\n%!" name (Printexc.to_string e))
    tests ;
  List.iter rm_rf !tmp_dirs ;
  Printf.printf "test_context: %d checks, %d failures\n" !checks !failures ;
  if !failures > 0 then exit 1
