(* Octez's CONTEXT on pando's binding. See the interface for the contract. *)

module String_map = Map.Make (String)

module Config = struct
  type inode_child_order =
    [`Seeded_hash | `Hash_bits | `Custom of depth:int -> bytes -> int]

  type t = {entries : int; stable_hash : int; inode_child_order : inode_child_order}

  let equal_order x y =
    match (x, y) with
    | `Seeded_hash, `Seeded_hash | `Hash_bits, `Hash_bits -> true
    | `Custom f, `Custom g -> f == g
    | _ -> false

  let equal x y =
    x.entries = y.entries && x.stable_hash = y.stable_hash
    && equal_order x.inode_child_order y.inode_child_order

  let v ~entries ~stable_hash ~inode_child_order = {entries; stable_hash; inode_child_order}

  let tezos = {entries = 32; stable_hash = 256; inode_child_order = `Seeded_hash}
end

type error =
  [ `Pando_error of string
  | `Unsupported_context_hash_version of int
  | `Patch_context of string ]

let fail_error msg = raise (Pando.Error msg)

(* ------------------------------------------------------------ encodings *)

(* Readers of Octez's binary encodings: big-endian, sizes on 4 bytes. *)
module Reader = struct
  type t = {b : bytes; mutable at : int; what : string}

  let v what b = {b; at = 0; what}

  let bad r why = fail_error (Printf.sprintf "%s: %s at byte %d" r.what why r.at)

  let need r n = if n < 0 || r.at + n > Bytes.length r.b then bad r "truncated"

  let u8 r =
    need r 1 ;
    let c = Bytes.get_uint8 r.b r.at in
    r.at <- r.at + 1 ;
    c

  let int32 r =
    need r 4 ;
    let x = Bytes.get_int32_be r.b r.at in
    r.at <- r.at + 4 ;
    x

  let int64 r =
    need r 8 ;
    let x = Bytes.get_int64_be r.b r.at in
    r.at <- r.at + 8 ;
    x

  let fixed r n =
    need r n ;
    let x = Bytes.sub r.b r.at n in
    r.at <- r.at + n ;
    x

  let size r =
    let n = Int32.to_int (int32 r) in
    if n < 0 || n > (1 lsl 30) - 1 then bad r "invalid size" ;
    n

  let dynamic r = fixed r (size r)

  let finish r = if r.at <> Bytes.length r.b then bad r "trailing bytes"
end

let add_int32 buf x =
  let b = Bytes.create 4 in
  Bytes.set_int32_be b 0 x ;
  Buffer.add_bytes buf b

let add_int64 buf x =
  let b = Bytes.create 8 in
  Bytes.set_int64_be b 0 x ;
  Buffer.add_bytes buf b

let add_size buf n = add_int32 buf (Int32.of_int n)

let add_dynamic buf b =
  add_size buf (Bytes.length b) ;
  Buffer.add_bytes buf b

let check_len what n b =
  if Bytes.length b <> n then
    invalid_arg (Printf.sprintf "%s: %d bytes expected, not %d" what n (Bytes.length b))

module Test_chain_status = struct
  type t =
    | Not_running
    | Forking of {protocol : bytes; expiration : int64}
    | Running of {chain_id : bytes; genesis : bytes; protocol : bytes; expiration : int64}

  let to_bytes t =
    let buf = Buffer.create 80 in
    (match t with
    | Not_running -> Buffer.add_uint8 buf 0
    | Forking {protocol; expiration} ->
        check_len "protocol" 32 protocol ;
        Buffer.add_uint8 buf 1 ;
        Buffer.add_bytes buf protocol ;
        add_int64 buf expiration
    | Running {chain_id; genesis; protocol; expiration} ->
        check_len "chain_id" 4 chain_id ;
        check_len "genesis" 32 genesis ;
        check_len "protocol" 32 protocol ;
        Buffer.add_uint8 buf 2 ;
        Buffer.add_bytes buf chain_id ;
        Buffer.add_bytes buf genesis ;
        Buffer.add_bytes buf protocol ;
        add_int64 buf expiration) ;
    Buffer.to_bytes buf

  let of_bytes b =
    let r = Reader.v "test_chain status" b in
    let t =
      match Reader.u8 r with
      | 0 -> Not_running
      | 1 ->
          let protocol = Reader.fixed r 32 in
          Forking {protocol; expiration = Reader.int64 r}
      | 2 ->
          let chain_id = Reader.fixed r 4 in
          let genesis = Reader.fixed r 32 in
          let protocol = Reader.fixed r 32 in
          Running {chain_id; genesis; protocol; expiration = Reader.int64 r}
      | _ -> Reader.bad r "unknown tag"
    in
    Reader.finish r ;
    t
end

module Block_header = struct
  type shell_header = {
    level : int32;
    proto_level : int;
    predecessor : bytes;
    timestamp : int64;
    validation_passes : int;
    operations_hash : bytes;
    fitness : bytes list;
    context : bytes;
  }

  type t = {shell : shell_header; protocol_data : bytes}

  let to_bytes {shell = s; protocol_data} =
    check_len "predecessor" 32 s.predecessor ;
    check_len "operations_hash" 32 s.operations_hash ;
    check_len "context" 32 s.context ;
    let buf = Buffer.create 256 in
    add_int32 buf s.level ;
    Buffer.add_uint8 buf (s.proto_level land 0xff) ;
    Buffer.add_bytes buf s.predecessor ;
    add_int64 buf s.timestamp ;
    Buffer.add_uint8 buf (s.validation_passes land 0xff) ;
    Buffer.add_bytes buf s.operations_hash ;
    let fitness = Buffer.create 32 in
    List.iter (add_dynamic fitness) s.fitness ;
    add_dynamic buf (Buffer.to_bytes fitness) ;
    Buffer.add_bytes buf s.context ;
    Buffer.add_bytes buf protocol_data ;
    Buffer.to_bytes buf

  let hash h = Pando.blake2b 32 (to_bytes h)
end

module Proof = struct
  type encoding = Pando.proof_encoding = V1 | V2

  type tree

  type stream

  type 'a t = bytes

  type merkle_leaf_kind = Hole | Raw_context

  type raw_context = Key of bytes | Dir of raw_context String_map.t | Cut

  type merkle_hash_kind = Contents | Node

  type merkle_node =
    | Hash of (merkle_hash_kind * string)
    | Data of raw_context
    | Continue of merkle_tree

  and merkle_tree = merkle_node String_map.t
end

(* ---------------------------------------------------------------- types *)

type index = {
  pando : Pando.index;
  readonly : bool;
  patch_context : (t -> (t, error) result Lwt.t) option;
  mutable closed : bool;
}

(* [stored]: the commit whose tree this context's tree is, if it is one
   (checked out, or committed, and not changed since). *)
and t = {ctx : Pando.context; index : index; mutable stored : bytes option}

type key = string list

type value = bytes

(* A tree of the binding: of the store ([in_store]: read from a stored
   context and not changed since), in memory, or of a verified proof; or
   the subtree at [prefix] of a stream proof being checked (Stream). *)
type tree = S of {p : Pando.tree; in_store : bool} | Q of {st : stream; prefix : string list}

(* A stream proof being checked against a callback's reads, each answered
   from the first elements of the stream, which the reads so far take
   (see Stream). *)
and stream = {
  enc : Pando.proof_encoding;
  proof : bytes;
  before : bytes;
  mutable reads : string list list;  (** the paths read, latest first *)
  mutable seen : Pando.tree option;  (** the tree of the reads so far *)
  mutable final : Pando.tree option;  (** the whole stream's, once checked *)
}

type node_key = bytes

type value_key = bytes

type kinded_key = [`Node of node_key | `Value of value_key]

type depth = [`Eq of int | `Le of int | `Lt of int | `Ge of int | `Gt of int]

let name = "pando"

let data_key key = "data" :: key

let wrap_ctx index ctx = {ctx; index; stored = None}

let changed t ctx = {ctx; index = t.index; stored = None}

let tree_of t p = S {p; in_store = t.stored <> None}

let fresh p = S {p; in_store = false}

(* Checking a stream proof against reads not known in advance: each read
   is answered from the tree of the reads so far, this one included,
   which Pando.verify_stream_proof_reads checks in order against the first
   elements of the stream (each against the hash it must have from
   [before]); when the callback returns, Pando.verify_stream_proof checks
   its reads against the whole stream, which refuses any element left. *)
module Stream = struct
  let make enc proof =
    let (_, before), _ = Pando.stream_proof_hashes enc proof in
    {enc; proof; before; reads = []; seen = None; final = None}

  (* The tree of the reads so far and [path], from the stream. *)
  let read st path =
    match st.final with
    | Some t -> t
    | None ->
        let paths = List.rev (path :: st.reads) in
        let t, _left = Pando.verify_stream_proof_reads st.enc st.proof st.before paths in
        st.reads <- path :: st.reads ;
        st.seen <- Some t ;
        t

  (* The verified tree at [prefix], read before: its kind and hash are in
     its parent's entry, so nothing more is read. *)
  let at st prefix =
    let t = match (st.final, st.seen) with Some t, _ | None, Some t -> t | None, None -> raise Not_found in
    match Pando.tree_find_tree t prefix with Some t -> t | None -> raise Not_found

  (* The whole stream checked against every read made, none left. *)
  let finish st =
    match st.final with
    | Some t -> t
    | None ->
        let t = Pando.verify_stream_proof st.enc st.proof st.before (List.rev st.reads) in
        st.final <- Some t ;
        t

  let unsupported () =
    raise
      (Pando.Error
         "while pando checks a stream proof, its tree answers find, find_tree, mem, mem_tree, to_value, kind, \
          hash, equal and is_empty only: other reads and writes load the stream in an order the binding's \
          verifier does not replay")
end

(* The binding's tree of a tree: a streamed one only once its proof is
   checked whole. *)
let pando_of = function
  | S {p; _} -> p
  | Q {st = {final = Some _; _} as st; prefix} -> Stream.at st prefix
  | Q _ -> Stream.unsupported ()

(* The binding's tree of a tree, for its kind and hash: a streamed
   subtree's are in its parent's entry, read already, so nothing more is
   read from the stream. *)
let pando_of_read = function
  | Q {st; prefix} -> (
      match Stream.at st prefix with
      | t -> t
      | exception Not_found -> raise (Pando.Error "a streamed tree not read yet"))
  | tree -> pando_of tree

let in_store_of = function S {in_store; _} -> in_store | Q _ -> false

(* A read on a streamed tree: [f] on the tree of the reads verified so
   far, this one included. *)
let streamed st prefix key f =
  let path = prefix @ key in
  match f (Stream.read st path) path with v -> Lwt.return v | exception e -> Lwt.fail e

(* Runs [f x] as a promise: its exception fails the promise. *)
let lwt1 f x = match f x with v -> Lwt.return v | exception e -> Lwt.fail e

(* ------------------------------------------------------------- opening *)

let init ?patch_context ?(readonly = false) ?index_log_size:_ ?sync_policy dir =
  match
    match (readonly, sync_policy) with
    | true, _ -> Pando.index_open_readonly dir
    | false, None -> Pando.index_init dir
    | false, Some policy -> Pando.index_init_with policy dir
  with
  | pando ->
      Lwt.return {pando; readonly; patch_context; closed = false}
  | exception e -> Lwt.fail e

let index t = t.index

let pando_index index = index.pando

let close index =
  if index.closed then Lwt.return_unit
  else
    match Pando.close index.pando with
    | () ->
        index.closed <- true ;
        Lwt.return_unit
    | exception e -> Lwt.fail e

let sync index = lwt1 Pando.sync index.pando

let empty index = wrap_ctx index (Pando.context_init index.pando)

(* ------------------------------------------------------------- commits *)

let exists index h = match Pando.exists index.pando h with v -> Lwt.return v | exception e -> Lwt.fail e

let checkout index h =
  match Pando.checkout index.pando h with
  | None -> Lwt.return_none
  | Some ctx -> Lwt.return_some {ctx; index; stored = Some h}
  | exception e -> Lwt.fail e

let checkout_exn index h =
  match Pando.checkout index.pando h with
  | None -> Lwt.fail Not_found
  | Some ctx -> Lwt.return {ctx; index; stored = Some h}
  | exception e -> Lwt.fail e

let hash ~time ?(message = "") t = Pando.hash t.ctx time "Tezos" message

let commit ~time ?(message = "") t =
  match Pando.commit t.ctx time "Tezos" message with
  | h ->
      t.stored <- Some h ;
      Lwt.return h
  | exception e -> Lwt.fail e

let commit_info index h =
  match Pando.commit_info index.pando h with
  | v -> Lwt.return v
  | exception e -> Lwt.fail e

(* ------------------------------------------------------ under [data/] *)

let mem t key =
  match Pando.mem t.ctx (data_key key) with v -> Lwt.return v | exception e -> Lwt.fail e

let mem_tree t key =
  match Pando.mem_tree t.ctx (data_key key) with
  | v -> Lwt.return v
  | exception e -> Lwt.fail e

let find t key =
  match Pando.find t.ctx (data_key key) with v -> Lwt.return v | exception e -> Lwt.fail e

let find_tree t key =
  match Pando.find_tree t.ctx (data_key key) with
  | None -> Lwt.return_none
  | Some p -> Lwt.return_some (tree_of t p)
  | exception e -> Lwt.fail e

let entries wrap arr = Array.fold_right (fun (s, p) acc -> (s, wrap p) :: acc) arr []

let list t ?offset ?length key =
  match Pando.list t.ctx offset length (data_key key) with
  | arr -> Lwt.return (entries (tree_of t) arr)
  | exception e -> Lwt.fail e

let length t key =
  match Pando.length t.ctx (data_key key) with
  | v -> Lwt.return v
  | exception e -> Lwt.fail e

let add t key v =
  match Pando.add t.ctx (data_key key) v with
  | ctx -> Lwt.return (changed t ctx)
  | exception e -> Lwt.fail e

let add_tree t key tree =
  match
    Pando.add_tree t.ctx (data_key key) (pando_of tree)
  with
  | ctx -> Lwt.return (changed t ctx)
  | exception e -> Lwt.fail e

let remove t key =
  match Pando.remove t.ctx (data_key key) with
  | ctx -> Lwt.return (changed t ctx)
  | exception e -> Lwt.fail e

let config _ = Config.tezos

let equal_config = Config.equal

(* --------------------------------------------------------------- trees *)

let pando_depth : depth -> Pando.o_caml_depth = function
  | `Eq d -> Eq d
  | `Le d -> Le d
  | `Lt d -> Lt d
  | `Ge d -> Ge d
  | `Gt d -> Gt d

(* Folds with the walker; [f]'s promises, resolved at once in the usual
   case, are chained in a loop, not by recursion through [Lwt.bind]. *)
let fold_walker wrap walker ~init ~f =
  let rec loop acc =
    let rec step acc =
      match Pando.tree_walker_next walker with
      | None -> `Done acc
      | Some ([||], p) when Pando.tree_kind p = Pando.Value -> step acc
      | Some (path, p) -> (
          let promise = f (Array.to_list path) (wrap p) acc in
          match Lwt.state promise with
          | Lwt.Return acc -> step acc
          | Lwt.Fail e -> `Fail e
          | Lwt.Sleep -> `Wait promise)
    in
    match step acc with
    | `Done acc -> Lwt.return acc
    | `Fail e -> Lwt.fail e
    | `Wait promise -> Lwt.bind promise loop
  in
  loop init

let fold_pando wrap ?depth p key ~order ~init ~f =
  match
    Pando.make_tree_walker p
      (Option.map pando_depth depth)
      key
      (match order with `Sorted -> Pando.Sorted | `Undefined -> Pando.Undefined)
  with
  | walker -> (try fold_walker wrap walker ~init ~f with e -> Lwt.fail e)
  | exception e -> Lwt.fail e

let fold ?depth t key ~order ~init ~f =
  match Pando.get_tree t.ctx with
  | p -> fold_pando (tree_of t) ?depth p (data_key key) ~order ~init ~f
  | exception e -> Lwt.fail e

module Tree = struct
  let mem tree key =
    match tree with
    | Q {st; prefix} -> streamed st prefix key Pando.tree_mem
    | S {p; _} -> ( match Pando.tree_mem p key with v -> Lwt.return v | exception e -> Lwt.fail e)

  let mem_tree tree key =
    match tree with
    | Q {st; prefix} -> streamed st prefix key Pando.tree_mem_tree
    | S {p; _} -> ( match Pando.tree_mem_tree p key with v -> Lwt.return v | exception e -> Lwt.fail e)

  let find tree key =
    match tree with
    | Q {st; prefix} -> streamed st prefix key Pando.tree_find
    | S {p; _} -> ( match Pando.tree_find p key with v -> Lwt.return v | exception e -> Lwt.fail e)

  let find_tree tree key =
    match tree with
    | Q {st; prefix} ->
        streamed st prefix key (fun t path ->
            Option.map (fun _ -> Q {st; prefix = path}) (Pando.tree_find_tree t path))
    | S {p; in_store} -> (
        match Pando.tree_find_tree p key with
        | None -> Lwt.return_none
        | Some p -> Lwt.return_some (S {p; in_store})
        | exception e -> Lwt.fail e)

  let list tree ?offset ?length key =
    match pando_of tree with
    | exception e -> Lwt.fail e
    | p -> (
        let in_store = in_store_of tree in
        match Pando.tree_list p offset length key with
        | arr -> Lwt.return (entries (fun p -> S {p; in_store}) arr)
        | exception e -> Lwt.fail e)

  let length tree key =
    match Pando.tree_length (pando_of tree) key with v -> Lwt.return v | exception e -> Lwt.fail e

  let add tree key v =
    match Pando.tree_add (pando_of tree) key v with p -> Lwt.return (fresh p) | exception e -> Lwt.fail e

  let add_tree tree key sub =
    match Pando.tree_add_tree (pando_of tree) key (pando_of sub) with
    | p -> Lwt.return (fresh p)
    | exception e -> Lwt.fail e

  let remove tree key =
    match Pando.tree_remove (pando_of tree) key with p -> Lwt.return (fresh p) | exception e -> Lwt.fail e

  let fold ?depth tree key ~order ~init ~f =
    match pando_of tree with
    | exception e -> Lwt.fail e
    | p ->
        let in_store = in_store_of tree in
        fold_pando (fun p -> S {p; in_store}) ?depth p key ~order ~init ~f

  let config _ = Config.tezos

  let empty _ = fresh (Pando.empty_tree ())

  (* A streamed tree's kind and hash: its root's are the proof's [before]
     (V1: the tag at byte 2; V2: bit 0 of byte 0); a subtree's are in the
     entry of its parent, read already. *)
  let kind tree =
    match tree with
    | Q {st = {final = None; _} as st; prefix = []} ->
        let node = match st.enc with Pando.V1 -> Bytes.get_uint8 st.proof 2 | Pando.V2 -> Bytes.get_uint8 st.proof 0 land 1 in
        if node = 1 then `Tree else `Value
    | tree -> ( match Pando.tree_kind (pando_of_read tree) with Pando.Value -> `Value | Pando.Tree -> `Tree)

  let to_value tree =
    match tree with
    | Q {st; prefix} -> streamed st prefix [] Pando.tree_find
    | S {p; _} -> lwt1 Pando.tree_to_value p

  let of_value t v =
    match Pando.tree_of_value t.ctx v with
    | p -> Lwt.return (fresh p)
    | exception e -> Lwt.fail e

  let hash tree =
    match tree with
    | Q {st = {final = None; _} as st; prefix = []} -> st.before
    | tree -> Pando.tree_hash (pando_of_read tree)

  let equal a b = a == b || Bytes.equal (hash a) (hash b)

  let is_empty tree = Bytes.equal (hash tree) (Pando.tree_hash (Pando.empty_tree ()))

  let clear ?depth tree = Pando.tree_clear depth (pando_of tree)

  let hex b = String.concat "" (List.init (Bytes.length b) (fun i -> Printf.sprintf "%02x" (Bytes.get_uint8 b i)))

  type raw = [`Tree of raw String_map.t | `Value of value]

  let rec raw_of_pando p : raw =
    match Pando.tree_kind p with
    | Pando.Value -> (
        match Pando.tree_to_value p with Some v -> `Value v | None -> `Value Bytes.empty)
    | Pando.Tree ->
        `Tree
          (Array.fold_left
             (fun m (s, c) -> String_map.add s (raw_of_pando c) m)
             String_map.empty
             (Pando.tree_list p None None []))

  let raw_of tree = raw_of_pando (pando_of tree)

  let rec pp_raw ppf (raw : raw) =
    match raw with
    | `Value v -> Format.fprintf ppf "0x%s" (hex v)
    | `Tree m ->
        Format.fprintf ppf "@[<hv 1>{" ;
        List.iteri
          (fun i (s, c) ->
            if i > 0 then Format.fprintf ppf ";@ " ;
            Format.fprintf ppf "@[<hv 2>%s:@ %a@]" s pp_raw c)
          (String_map.bindings m) ;
        Format.fprintf ppf "}@]"

  let pp ppf tree = pp_raw ppf (raw_of tree)

  let encode_raw (raw : raw) =
    let rec go buf (raw : raw) =
      match raw with
      | `Value v ->
          Buffer.add_uint8 buf 1 ;
          add_dynamic buf v
      | `Tree m ->
          Buffer.add_uint8 buf 0 ;
          let entries = Buffer.create 64 in
          String_map.iter
            (fun s r ->
              add_dynamic entries (Bytes.unsafe_of_string s) ;
              go entries r)
            m ;
          add_size buf (Buffer.length entries) ;
          Buffer.add_buffer buf entries
    in
    let buf = Buffer.create 256 in
    go buf raw ;
    Buffer.to_bytes buf

  let decode_raw b : raw =
    let r = Reader.v "raw tree" b in
    let rec go () : raw =
      match Reader.u8 r with
      | 1 -> `Value (Reader.dynamic r)
      | 0 ->
          let size = Reader.size r in
          let stop = r.Reader.at + size in
          Reader.need r size ;
          let rec entries m =
            if r.Reader.at >= stop then m
            else
              let s = Bytes.to_string (Reader.dynamic r) in
              let sub = go () in
              entries (String_map.add s sub m)
          in
          let m = entries String_map.empty in
          if r.Reader.at <> stop then Reader.bad r "directory size" ;
          `Tree m
      | _ -> Reader.bad r "unknown tag"
    in
    let raw = go () in
    Reader.finish r ;
    raw

  let raw_encoding = (encode_raw, decode_raw)

  let to_raw tree = lwt1 raw_of tree

  let of_raw raw =
    let rec build (raw : raw) =
      match raw with
      | `Value v -> Pando.tree_add (Pando.empty_tree ()) [] v
      | `Tree m ->
          String_map.fold (fun s r acc -> Pando.tree_add_tree acc [s] (build r)) m (Pando.empty_tree ())
    in
    fresh (build raw)

  let unshallow tree =
    match Pando.make_tree_walker (pando_of tree) None [] Pando.Undefined with
    | walker ->
        let rec force () =
          match Pando.tree_walker_next walker with
          | None -> ()
          | Some (_, p) ->
              (match Pando.tree_kind p with
              | Pando.Value -> ignore (Pando.tree_to_value p)
              | Pando.Tree -> ()) ;
              force ()
        in
        (match force () with () -> Lwt.return tree | exception e -> Lwt.fail e)
    | exception e -> Lwt.fail e

  let is_shallow _ = false

  let kinded_key tree : kinded_key option =
    match tree with
    | S {p; in_store = true} -> (
        let h = Pando.tree_hash p in
        match Pando.tree_kind p with Pando.Value -> Some (`Value h) | Pando.Tree -> Some (`Node h))
    | S _ | Q _ -> None
end

(* --------------------------------------------------- predefined fields *)

let protocol_key = ["protocol"]

let test_chain_key = ["test_chain"]

let predecessor_block_metadata_hash_key = ["predecessor_block_metadata_hash"]

let predecessor_ops_metadata_hash_key = ["predecessor_ops_metadata_hash"]

let raw_add t key v =
  match Pando.add t.ctx key v with
  | ctx -> Lwt.return (changed t ctx)
  | exception e -> Lwt.fail e

let get_protocol t =
  match Pando.find t.ctx protocol_key with
  | Some v when Bytes.length v = 32 -> Lwt.return v
  | Some v -> Lwt.fail (Pando.Error (Printf.sprintf "the protocol hash has %d bytes, not 32" (Bytes.length v)))
  | None -> Lwt.fail (Pando.Error "no protocol in the context (key \"protocol\")")
  | exception e -> Lwt.fail e

let add_protocol t protocol =
  match check_len "protocol" 32 protocol with
  | () -> raw_add t protocol_key protocol
  | exception e -> Lwt.fail e

let set_protocol = add_protocol

let get_test_chain t =
  match Pando.find t.ctx test_chain_key with
  | Some v -> lwt1 Test_chain_status.of_bytes v
  | None -> Lwt.fail (Pando.Error "no test chain status in the context (key \"test_chain\")")
  | exception e -> Lwt.fail e

let add_test_chain t status =
  match Test_chain_status.to_bytes status with
  | v -> raw_add t test_chain_key v
  | exception e -> Lwt.fail e

let fork_test_chain t ~protocol ~expiration =
  add_test_chain t (Test_chain_status.Forking {protocol; expiration})

let add_hash_at what key t h =
  match check_len what 32 h with () -> raw_add t key h | exception e -> Lwt.fail e

let add_predecessor_block_metadata_hash =
  add_hash_at "block metadata hash" predecessor_block_metadata_hash_key

let add_predecessor_ops_metadata_hash =
  add_hash_at "operations metadata hash" predecessor_ops_metadata_hash_key

let find_hash_at key t =
  match Pando.find t.ctx key with
  | Some v when Bytes.length v = 32 -> Lwt.return_some v
  | Some v ->
      Lwt.fail
        (Pando.Error
           (Printf.sprintf "%s: %d bytes, not a 32-byte hash" (String.concat "/" key)
              (Bytes.length v)))
  | None -> Lwt.return_none
  | exception e -> Lwt.fail e

let find_predecessor_block_metadata_hash = find_hash_at predecessor_block_metadata_hash_key

let find_predecessor_ops_metadata_hash = find_hash_at predecessor_ops_metadata_hash_key

let compute_testchain_genesis block = Pando.blake2b 32 block

(* Octez's [Chain_id.of_block_hash]: the first 4 bytes of the Blake2b of
   the block hash (mainnet's chain id, NetXdQprcVkpaWU, is that of its
   genesis block). *)
let chain_id_of_block_hash block = Bytes.sub (Pando.blake2b 32 block) 0 4

let compute_testchain_chain_id block =
  chain_id_of_block_hash (compute_testchain_genesis block)

(* Octez's [Operation_list_list_hash.empty]: the hash of no bytes. *)
let empty_operations_hash = Pando.blake2b 32 Bytes.empty

(* Octez's [get_branch]: the chain id in base58check ([Chain_id.pp]). *)
let branch_of_chain_id chain_id =
  check_len "chain_id" 4 chain_id ;
  Pando.b58check_encode "\087\082\000" chain_id

let commit_test_chain_genesis t (forked : Block_header.t) =
  let message = Printf.sprintf "Forking testchain at level %ld." forked.shell.level in
  Lwt.bind (commit ~time:forked.shell.timestamp ~message t) (fun context ->
      match Block_header.hash forked with
      | forked_block ->
          let genesis = compute_testchain_genesis forked_block in
          (* Octez names the branch after [compute_testchain_chain_id] of
             the genesis hash (which hashes it once more). *)
          Pando.set_branch t.index.pando (branch_of_chain_id (compute_testchain_chain_id genesis)) context ;
          Lwt.return
            {
              Block_header.shell =
                {
                  forked.shell with
                  proto_level = succ forked.shell.proto_level;
                  predecessor = genesis;
                  validation_passes = 0;
                  operations_hash = empty_operations_hash;
                  context;
                };
              protocol_data = Bytes.empty;
            }
      | exception e -> Lwt.fail e)

let commit_genesis index ~chain_id ~time ~protocol =
  let ( let* ) = Lwt.bind in
  Lwt.catch
    (fun () ->
      let branch = branch_of_chain_id chain_id in
      let ctx = empty index in
      let* patched =
        match index.patch_context with
        | None -> Lwt.return (Ok ctx)
        | Some patch -> patch ctx
      in
      match patched with
      | Error _ as e -> Lwt.return e
      | Ok ctx ->
          let* ctx = add_protocol ctx protocol in
          let* ctx = add_test_chain ctx Test_chain_status.Not_running in
          let* h = commit ~time ~message:"Genesis" ctx in
          Pando.set_branch index.pando branch h ;
          Lwt.return (Ok h))
    (function Pando.Error msg -> Lwt.return (Error (`Pando_error msg)) | e -> Lwt.fail e)

(* -------------------------------------------------------- hash version *)

let get_hash_version _ = 0

let set_hash_version t v =
  if v = 0 then Lwt.return (Ok t) else Lwt.return (Error (`Unsupported_context_hash_version v))

(* -------------------------------------------------------------- proofs *)

type proof_error =
  [`Proof_mismatch of string | `Stream_too_long of string | `Stream_too_short of string]

let contains ~sub msg =
  let n = String.length sub and m = String.length msg in
  let rec at i = i + n <= m && (String.sub msg i n = sub || at (i + 1)) in
  at 0

(* Octez's error for the binding's message: the stream verifier's "the
   stream ends where the reads need ..." and "N stream elements are left
   after the reads" are its two stream errors; everything else (a
   malformed proof, a hash that differs, a blinded read) is a mismatch. *)
let proof_error msg : proof_error =
  if contains ~sub:"the stream ends where" msg then `Stream_too_short msg
  else if contains ~sub:"stream elements are left" msg then `Stream_too_long msg
  else `Proof_mismatch msg

(* Runs [f] on the proof's tree, then [finish] (what checks the proof
   once [f] is done), and checks the tree [f] returns against the proof's
   [after], kind and hash. *)
let run_on_proof (after_kind, after) tree ~finish f =
  let kind_name k = if k = Pando.Value then "value" else "directory" in
  Lwt.catch
    (fun () ->
      Lwt.bind (f tree) (fun (tree, result) ->
          finish () ;
          let h = Tree.hash tree in
          let k = match Tree.kind tree with `Value -> Pando.Value | `Tree -> Pando.Tree in
          if Bytes.equal h after && k = after_kind then Lwt.return (Ok (tree, result))
          else
            Lwt.return
              (Error
                 (`Proof_mismatch
                   (Printf.sprintf "the computation ends on the %s %s, not on the proof's after %s %s"
                      (kind_name k) (Pando.Hash.to_b58check h) (kind_name after_kind)
                      (Pando.Hash.to_b58check after))))))
    (function Pando.Error msg -> Lwt.return (Error (proof_error msg)) | e -> Lwt.fail e)

let verify_tree_proof ?(encoding = Proof.V1) proof f =
  match
    let (_, before), after = Pando.tree_proof_hashes encoding proof in
    (Pando.verify_tree_proof encoding proof before, after)
  with
  | exception Pando.Error msg -> Lwt.return (Error (`Proof_mismatch msg))
  | p, after -> run_on_proof after (S {p; in_store = false}) ~finish:ignore f

let verify_stream_proof ?(encoding = Proof.V1) proof f =
  match Stream.make encoding proof with
  | exception Pando.Error msg -> Lwt.return (Error (`Proof_mismatch msg))
  | st ->
      let _, after = Pando.stream_proof_hashes encoding proof in
      run_on_proof after (Q {st; prefix = []}) ~finish:(fun () -> ignore (Stream.finish st)) f

let merkle_hash p : Proof.merkle_node =
  let kind = match Pando.tree_kind p with Pando.Value -> Proof.Contents | Pando.Tree -> Proof.Node in
  Hash (kind, Pando.Hash.to_b58check (Pando.tree_hash p))

let rec raw_context p : Proof.raw_context =
  match Pando.tree_kind p with
  | Pando.Value -> Key (Option.value (Pando.tree_to_value p) ~default:Bytes.empty)
  | Pando.Tree ->
      Dir
        (Array.fold_left
           (fun m (s, c) -> String_map.add s (raw_context c) m)
           String_map.empty
           (Pando.tree_list p None None []))

let merkle_tree t leaf_kind key =
  let key_string = String.concat ";" key in
  let rec go p target : Proof.merkle_tree =
    let children () = Pando.tree_list p None None [] in
    match target with
    | [] -> invalid_arg (Printf.sprintf "Reached end of key (top-level key was: %s)" key_string)
    | [hd] ->
        Array.fold_left
          (fun m (s, c) ->
            let node =
              if s <> hd then merkle_hash c
              else
                match (leaf_kind : Proof.merkle_leaf_kind) with
                | Hole -> merkle_hash c
                | Raw_context -> Proof.Data (raw_context c)
            in
            String_map.add s node m)
          String_map.empty (children ())
    | hd :: tl -> (
        match Pando.tree_kind p with
        | Pando.Value ->
            invalid_arg
              (Printf.sprintf "found a value whereas key %s (top-level key: %s) was not fully consumed"
                 (String.concat ";" target) key_string)
        | Pando.Tree ->
            Array.fold_left
              (fun m (s, c) ->
                String_map.add s (if s = hd then Proof.Continue (go c tl) else merkle_hash c) m)
              String_map.empty (children ()))
  in
  match Pando.find_tree t.ctx ["data"] with
  | None -> Lwt.return String_map.empty
  | Some data -> lwt1 (go data) key
  | exception e -> Lwt.fail e

let merkle_tree_v2 ?(encoding = Proof.V2) t leaf_kind key =
  match t.stored with
  | None -> Lwt.fail (Invalid_argument "On-disk context.tree has no kinded_key")
  | Some commit -> (
      let paths () =
        match (leaf_kind : Proof.merkle_leaf_kind) with
        | Hole -> [key]
        | Raw_context -> (
            match Pando.find_tree t.ctx key with
            | None -> [key]
            | Some p when Pando.tree_kind p = Pando.Value -> [key]
            | Some p ->
                let walker = Pando.make_tree_walker p None [] Pando.Sorted in
                let rec values acc =
                  match Pando.tree_walker_next walker with
                  | None -> List.rev acc
                  | Some (path, c) when Pando.tree_kind c = Pando.Value ->
                      values ((key @ Array.to_list path) :: acc)
                  | Some _ -> values acc
                in
                key :: values [])
      in
      match Pando.produce_tree_proof t.index.pando commit (paths ()) encoding with
      | proof -> Lwt.return proof
      | exception e -> Lwt.fail e)

(* ------------------------------------------ collections and snapshots *)

let gc index h = match Pando.gc index.pando h with () -> Lwt.return_unit | exception e -> Lwt.fail e

let wait_gc_completion index = lwt1 Pando.wait_gc_completion index.pando

let is_gc_allowed index = (not index.closed) && Pando.is_gc_allowed index.pando

let split _ = Lwt.return_unit

let export_snapshot index h ~path =
  match Pando.export_snapshot index.pando h path with
  | () -> Lwt.return_unit
  | exception e -> Lwt.fail e

let import_snapshot index ~path = lwt1 (Pando.import_snapshot index.pando) path
