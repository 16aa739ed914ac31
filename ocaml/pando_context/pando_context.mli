(** pando as an Octez context backend.

    This module has the names, labels and argument order of [module type
    CONTEXT] in Octez's
    [src/lib_protocol_environment/duo_context_lib/duo_context_sig.ml],
    with plain types in place of Octez's:

    - [Context_hash.t] is its 32 raw bytes ([bytes]); so are
      [Protocol_hash.t], [Block_hash.t], [Block_metadata_hash.t] and
      [Operation_metadata_list_list_hash.t]; [Chain_id.t] is its 4 bytes;
    - [Time.Protocol.t] is an [int64] of seconds since the epoch;
    - [Proof.tree Proof.t] and [Proof.stream Proof.t] are their binary
      encodings ([Merkle_proof_encoding.V1.Tree32] or [V2.Tree32]);
    - [Context_hash.Version.t] is an [int];
    - [Test_chain_status.t], [Block_header.t] and [Config.t] are the
      records of the same name below, with Octez's binary encodings.

    {2 Keys}

    As in Octez's disk context, the functions on a context ([find], [add],
    [list], [fold], ...) put ["data"] in front of their key themselves:
    [find ctxt ["contracts"; "index"]] reads [data/contracts/index]. The
    functions on a {!Tree} take their key relative to that tree, with
    nothing added. The predefined fields are at the root, beside ["data"]:
    ["protocol"], ["test_chain"], ["predecessor_block_metadata_hash"] and
    ["predecessor_ops_metadata_hash"]. {!merkle_tree_v2} takes a key from
    the root (as Octez's does); {!merkle_tree} one below ["data"].

    {2 Errors}

    A function returning a promise fails that promise (it never raises)
    with {!Pando.Error} naming the cause when the store fails (an I/O
    error, a corrupt file, a closed index). {!checkout_exn} fails with
    [Not_found] on an unknown commit, as irmin's does. The synchronous
    functions ({!Tree.hash}, {!hash}, ...) raise {!Pando.Error}.

    The two functions that return [tzresult] in Octez, {!commit_genesis}
    and {!set_hash_version}, return a [result] with {!error} instead: an
    Octez developer wraps this module in a [lib_context_pando] whose
    functions must return [tzresult], and a [result] maps onto it with one
    [Result.map_error] at the same place, with the failure (an unsupported
    hash version, a store error during genesis) in the value where Octez
    expects it, instead of an exception the shell's error monad would not
    see. The proof verifiers return Octez's own [result] type.

    Values are immutable: [add] and [remove] return a new context or tree.
    Reads are synchronous underneath: a promise is already resolved when
    returned. *)

(** {1 Types} *)

type index
(** An open store (Octez's [index]). *)

type t
(** A context: a tree, the commit it was checked out from (the parent of
    the next commit), and its index. *)

type key = string list
(** A path of steps. *)

type value = bytes
(** The contents of a leaf. *)

type tree
(** A tree or a value: of the store (in memory or read from it), the
    tree of a verified proof given to {!verify_tree_proof}'s callback
    (reading a part the proof blinds fails with {!Pando.Error}), or the
    tree of a stream proof given to {!verify_stream_proof}'s callback (see
    there what it answers). A proof's tree added into a store's (a
    proof's subtree into a context), or the reverse, is added as a copy in
    memory, read whole: the binding keeps a proof's blinded parts out of
    the store. *)

type node_key = bytes
(** The 32-byte hash of a directory stored in the index. *)

type value_key = bytes
(** The 32-byte hash of a value stored in the index. *)

type kinded_key = [`Node of node_key | `Value of value_key]
(** Where a stored tree is, with its kind. *)

type depth = [`Eq of int | `Le of int | `Lt of int | `Ge of int | `Gt of int]
(** Which depths a fold visits, counted from the folded tree (0):
    [`Eq d] exactly [d], [`Lt d] less than [d], and so on. *)

module String_map : Map.S with type key = string
(** Maps from steps, for {!Tree.raw} and {!Proof.merkle_tree}. *)

(** The hash configuration of a context (Octez's
    [Tezos_context_sigs.Config]). *)
module Config : sig
  type inode_child_order =
    [`Seeded_hash | `Hash_bits | `Custom of depth:int -> bytes -> int]
  (** How a large directory's entries are split into an inode's children. *)

  type t = {
    entries : int;  (** children of an inode *)
    stable_hash : int;  (** entries below which a directory is hashed flat *)
    inode_child_order : inode_child_order;
  }
  (** A configuration. *)

  val equal : t -> t -> bool
  (** Whether two configurations are the same ([`Custom] ones when they are
      the same function). *)

  val v : entries:int -> stable_hash:int -> inode_child_order:inode_child_order -> t
  (** A configuration. *)
end

(** Why {!commit_genesis} or {!set_hash_version} failed. *)
type error =
  [ `Pando_error of string
    (** the store failed; the message of {!Pando.Error} *)
  | `Unsupported_context_hash_version of int
    (** {!set_hash_version} was given a version pando does not compute *)
  | `Patch_context of string
    (** the [patch_context] given to {!init} failed (a caller's error) *) ]

(** The test chain's status, stored under ["test_chain"] in Octez's
    binary encoding of [Test_chain_status.t]. *)
module Test_chain_status : sig
  type t =
    | Not_running
    | Forking of {protocol : bytes;  (** 32 bytes *) expiration : int64}
    | Running of {
        chain_id : bytes;  (** 4 bytes *)
        genesis : bytes;  (** 32 bytes *)
        protocol : bytes;  (** 32 bytes *)
        expiration : int64;
      }  (** Octez's constructors, with plain types. *)

  val to_bytes : t -> bytes
  (** Octez's binary encoding: tag 0, 1 or 2, then the fields. *)

  val of_bytes : bytes -> t
  (** The inverse of {!to_bytes}; raises {!Pando.Error} on any other
      bytes. *)
end

(** Octez's block headers, as far as {!commit_test_chain_genesis} needs
    them. *)
module Block_header : sig
  type shell_header = {
    level : int32;
    proto_level : int;  (** 0 to 255 *)
    predecessor : bytes;  (** 32-byte block hash *)
    timestamp : int64;  (** seconds since the epoch *)
    validation_passes : int;  (** 0 to 255 *)
    operations_hash : bytes;  (** 32 bytes *)
    fitness : bytes list;
    context : bytes;  (** 32-byte context hash *)
  }
  (** Octez's [Block_header.shell_header]. *)

  type t = {shell : shell_header; protocol_data : bytes}
  (** Octez's [Block_header.t]. *)

  val to_bytes : t -> bytes
  (** Octez's binary encoding of a block header. *)

  val hash : t -> bytes
  (** Octez's [Block_header.hash]: the 32-byte Blake2b of {!to_bytes}. *)
end

(** Octez's [Proof_types], with proofs as their binary encoding. *)
module Proof : sig
  type encoding = Pando.proof_encoding = V1 | V2
  (** [Merkle_proof_encoding.V1.Tree32] or [V2.Tree32]. The bytes do not
      say which: both start with the version and the two hashes (V1:
      [int16] version, then each hash tagged [00] value or [01] node; V2:
      one byte whose bits 0 and 1 say whether [before] and [after] are
      nodes, then the version and the bare hashes); nothing in them names
      the encoding. Octez never guesses either: its [CONTEXT] passes
      a decoded [Proof.t], and the encoding is chosen by the code that
      decoded it (a protocol's [Context.Proof_encoding.V1] or [V2], light
      mode's RPC [V2]). Here the caller says it with [?encoding]; the
      bytes are [Data_encoding.Binary.to_bytes] of Octez's value in that
      encoding's [tree_proof_encoding] or [stream_proof_encoding]. *)

  type tree
  (** Marks a tree proof. *)

  type stream
  (** Marks a stream proof. *)

  type 'a t = bytes
  (** A proof in its binary encoding: [tree t] a tree proof, [stream t]
      a stream proof. *)

  type merkle_leaf_kind = Hole | Raw_context
  (** What {!merkle_tree} and {!merkle_tree_v2} show at the key: its hash,
      or all of it. *)

  (** A subtree, as {!merkle_tree} shows it. *)
  type raw_context =
    | Key of bytes  (** a value *)
    | Dir of raw_context String_map.t  (** a directory *)
    | Cut  (** omitted (never produced by pando) *)

  type merkle_hash_kind = Contents | Node
  (** The kind of a hashed part of a {!merkle_tree}. *)

  (** A node of the light mode's Merkle tree. *)
  type merkle_node =
    | Hash of (merkle_hash_kind * string)  (** a hash, in [Co...] form *)
    | Data of raw_context  (** the data at the key *)
    | Continue of merkle_tree  (** a step on the way to the key *)

  and merkle_tree = merkle_node String_map.t
  (** The light mode's Merkle tree ([Proof_types.merkle_tree]). *)
end

(** {1 Opening} *)

val name : string
(** ["pando"]. *)

val init :
  ?patch_context:(t -> (t, error) result Lwt.t) ->
  ?readonly:bool ->
  ?index_log_size:int ->
  ?sync_policy:Pando.sync_policy ->
  string ->
  index Lwt.t
(** [init dir] opens the store in [dir], creating it if [dir] is missing or
    empty. With [~readonly:true] it opens it for reading only, beside a
    writer in another process, and fails if there is no store. The
    [patch_context] runs on the genesis context in {!commit_genesis}.
    [index_log_size] is accepted for Octez's signature and ignored: pando
    has no index log. [sync_policy] (a writer's) says when commits reach
    the disk: {!Pando.Every_commit} by default; {!Pando.No_sync} is what
    irmin-pack does in Octez. *)

val index : t -> index
(** The index a context belongs to. *)

val pando_index : index -> Pando.index
(** The binding's index, for what {!Pando} offers beyond [CONTEXT]
    (producing proofs, base58 hashes). *)

val close : index -> unit Lwt.t
(** Waits for a running collection, makes everything durable and closes
    the store. Closing a closed index does nothing. Later uses of the
    index, or of contexts and trees read from it, fail with
    {!Pando.Error}. *)

val sync : index -> unit Lwt.t
(** Makes every commit made so far durable; on a read-only index, reads
    what the writer committed since. *)

val empty : index -> t
(** An empty context with no parent (Octez's [TEZOS_CONTEXT.empty]). *)

(** {1 Commits} *)

val exists : index -> bytes -> bool Lwt.t
(** Whether the store holds the commit of this 32-byte hash. *)

val checkout : index -> bytes -> t option Lwt.t
(** The context of a commit; [None] if the store does not hold it (never
    held, or collected). *)

val checkout_exn : index -> bytes -> t Lwt.t
(** Like {!checkout}; fails with [Not_found] if the store does not hold
    the commit. *)

val hash : time:int64 -> ?message:string -> t -> bytes
(** The hash {!commit} would return (author ["Tezos"], [message] by
    default [""]), without writing anything. *)

val commit : time:int64 -> ?message:string -> t -> bytes Lwt.t
(** Writes the context as a commit whose parent is the commit it was
    checked out from (none for {!empty}), by ["Tezos"], dated [time], and
    returns its hash. *)

val commit_genesis :
  index -> chain_id:bytes -> time:int64 -> protocol:bytes -> (bytes, error) result Lwt.t
(** The genesis commit, as Octez makes it: an empty context, then
    [patch_context] if {!init} had one, then ["protocol"] set to [protocol]
    and ["test_chain"] to [Not_running], committed at [time] with message
    ["Genesis"]; then, as Octez, points the branch named after [chain_id]
    (4 bytes; the branch is its base58check, [NetXdQprcVkpaWU] for
    mainnet's) at the commit. *)

val commit_info : index -> bytes -> Pando.commit_info option Lwt.t
(** The date, author, message and parents of a commit; [None] if the store
    does not hold it. Not in [CONTEXT]. *)

(** {1 Reading and writing under [data/]} *)

val mem : t -> key -> bool Lwt.t
(** Whether [data/key] is a value. *)

val mem_tree : t -> key -> bool Lwt.t
(** Whether [data/key] is a value or a directory: of the empty key,
    whether [data/] holds anything (false in an empty context, as in
    Octez), where {!Tree.mem_tree} of a tree's empty path is always
    true (its root). *)

val find : t -> key -> value option Lwt.t
(** The value at [data/key]; [None] if there is none (nothing there, a
    directory, or a path through a value). *)

val find_tree : t -> key -> tree option Lwt.t
(** The tree at [data/key] (a value or a directory). *)

val list : t -> ?offset:int -> ?length:int -> key -> (string * tree) list Lwt.t
(** The entries of the directory [data/key], sorted by name, from
    [offset] (default 0), at most [length] (default all); empty if it is
    not a directory. *)

val length : t -> key -> int Lwt.t
(** The number of entries of the directory [data/key] (0 if none), in
    constant time. *)

val add : t -> key -> value -> t Lwt.t
(** The context with [value] at [data/key]. *)

val add_tree : t -> key -> tree -> t Lwt.t
(** The context with [tree] at [data/key]; an empty tree removes it. *)

val remove : t -> key -> t Lwt.t
(** The context without [data/key]. *)

val fold :
  ?depth:depth ->
  t ->
  key ->
  order:[`Sorted | `Undefined] ->
  init:'a ->
  f:(key -> tree -> 'a -> 'a Lwt.t) ->
  'a Lwt.t
(** {!Tree.fold} over the tree at [data/key]. *)

val config : t -> Config.t
(** The hash configuration: Octez's ([entries = 32], [stable_hash = 256],
    [`Seeded_hash]), the only one pando computes. *)

val equal_config : Config.t -> Config.t -> bool
(** {!Config.equal}. *)

(** {1 Trees} *)

module Tree : sig
  val mem : tree -> key -> bool Lwt.t
  (** Whether [key] is a value of the tree. *)

  val mem_tree : tree -> key -> bool Lwt.t
  (** Whether [key] is a value or a directory of the tree. *)

  val find : tree -> key -> value option Lwt.t
  (** The value at [key] ([find v []] is [v]'s contents). *)

  val find_tree : tree -> key -> tree option Lwt.t
  (** The subtree at [key] ([find_tree t []] is [t]). *)

  val list : tree -> ?offset:int -> ?length:int -> key -> (string * tree) list Lwt.t
  (** The entries of the directory at [key], as {!val-list}. *)

  val length : tree -> key -> int Lwt.t
  (** The number of entries of the directory at [key] (0 if none). *)

  val add : tree -> key -> value -> tree Lwt.t
  (** The tree with [value] at [key] ([add t [] v] is the value [v]). *)

  val add_tree : tree -> key -> tree -> tree Lwt.t
  (** The tree with a subtree at [key]. *)

  val remove : tree -> key -> tree Lwt.t
  (** The tree without [key]. *)

  val fold :
    ?depth:depth ->
    tree ->
    key ->
    order:[`Sorted | `Undefined] ->
    init:'a ->
    f:(key -> tree -> 'a -> 'a Lwt.t) ->
    'a Lwt.t
  (** [fold ?depth t key ~order ~init ~f] calls [f] on every subtree of
      the tree at [key] (that tree itself included, with the key [[]], at
      depth 0), with its key relative to [key], as irmin's
      [Tree.fold ~uniq:`False]: a directory before its entries. [f] is
      never called with [[]] on a value, so folding over a value or over
      nothing returns [init]. [depth] keeps the subtrees at those depths
      only (all by default). With [`Sorted] entries come by name; with
      [`Undefined] in the store's order, which needs less memory for large
      directories. *)

  val config : tree -> Config.t
  (** As {!val-config}. *)

  val empty : t -> tree
  (** An empty tree ({!Pando.empty_tree}: the context is not used). *)

  val is_empty : tree -> bool
  (** Whether the tree is the empty directory. *)

  val kind : tree -> [`Value | `Tree]
  (** A value or a directory. *)

  val to_value : tree -> value option Lwt.t
  (** The contents, if the tree is a value. *)

  val of_value : t -> value -> tree Lwt.t
  (** The tree of a value. *)

  val hash : tree -> bytes
  (** The tree's Octez hash (of a directory, or of a value). *)

  val equal : tree -> tree -> bool
  (** Whether two trees have the same hash. *)

  val clear : ?depth:int -> tree -> unit
  (** irmin's cache clearing: a pando tree keeps nothing of what it read
      (its reads go through the store's bounded cache), so this only checks
      that the index is open ({!Pando.Error} otherwise); contents and hash
      do not change. Nothing for a tree of no index (a proof's, or
      made in memory). *)

  val pp : Format.formatter -> tree -> unit
  (** Prints the whole tree, reading it from the store: directories as
      [{name: ...; ...}] sorted by name, values in hexadecimal. *)

  type raw = [`Tree of raw String_map.t | `Value of value]
  (** A tree wholly in memory. *)

  val raw_encoding : (raw -> bytes) * (bytes -> raw)
  (** Octez's [Tree.raw_encoding] in binary ([Data_encoding.Binary]):
      the encoder, and the decoder, which raises {!Pando.Error} on bytes
      that are not a raw tree. *)

  val to_raw : tree -> raw Lwt.t
  (** The whole tree, read from the store. *)

  val of_raw : raw -> tree
  (** The tree of a raw tree, in memory (no index needed). *)

  val unshallow : tree -> tree Lwt.t
  (** Reads every part of the tree from the store and returns it: later
      reads need neither the store nor the cache. *)

  val is_shallow : tree -> bool
  (** Always [false]: a pando tree is never a bare hash; its unread parts
      are read from the store when needed (irmin answers [true] for a
      tree not yet read). *)

  val kinded_key : tree -> kinded_key option
  (** [Some] key (the tree's hash) if the tree is known to be stored in
      the index: read from a checked-out or committed context and not
      changed since; [None] otherwise. *)
end

(** {1 Predefined fields (raw keys at the root)} *)

val get_protocol : t -> bytes Lwt.t
(** The 32 bytes at ["protocol"]; fails with {!Pando.Error} if there are
    none. *)

val add_protocol : t -> bytes -> t Lwt.t
(** The context with the protocol hash at ["protocol"]. *)

val set_protocol : t -> bytes -> t Lwt.t
(** {!add_protocol}. *)

val get_test_chain : t -> Test_chain_status.t Lwt.t
(** The status at ["test_chain"]; fails with {!Pando.Error} if there is
    none or it does not decode. *)

val add_test_chain : t -> Test_chain_status.t -> t Lwt.t
(** The context with the encoded status at ["test_chain"]. *)

val fork_test_chain : t -> protocol:bytes -> expiration:int64 -> t Lwt.t
(** [add_test_chain] of [Forking {protocol; expiration}]. *)

val add_predecessor_block_metadata_hash : t -> bytes -> t Lwt.t
(** The context with the 32-byte hash at
    ["predecessor_block_metadata_hash"]. *)

val add_predecessor_ops_metadata_hash : t -> bytes -> t Lwt.t
(** The context with the 32-byte hash at
    ["predecessor_ops_metadata_hash"]. *)

val find_predecessor_block_metadata_hash : t -> bytes option Lwt.t
(** The hash at ["predecessor_block_metadata_hash"], if any. Not in
    [CONTEXT] (it is in Octez's [TEZOS_CONTEXT]). *)

val find_predecessor_ops_metadata_hash : t -> bytes option Lwt.t
(** The hash at ["predecessor_ops_metadata_hash"], if any. *)

val compute_testchain_chain_id : bytes -> bytes
(** The 4-byte chain id of the test chain forked at this block:
    [Chain_id.of_block_hash] of {!compute_testchain_genesis}, as Octez's
    contexts compute it ([Chain_id.of_block_hash b] is the first 4 bytes
    of the Blake2b of [b]: mainnet's NetXdQprcVkpaWU is that of its
    genesis block). *)

val compute_testchain_genesis : bytes -> bytes
(** The test chain's genesis block hash: the Blake2b (32 bytes) of the
    forked block's hash. *)

val commit_test_chain_genesis : t -> Block_header.t -> Block_header.t Lwt.t
(** Commits the context dated at the forked block's timestamp with the
    message ["Forking testchain at level L."], and returns the test
    chain's genesis header as Octez builds it: the forked header with
    [proto_level + 1], the genesis hash as predecessor, no validation
    pass, the empty operations hash, the new commit as context, and no
    protocol data; then, as Octez, points the branch named after the test
    chain's id ({!compute_testchain_chain_id} of the genesis hash, in
    base58check) at the commit. *)

(** {1 Hash versions} *)

val get_hash_version : t -> int
(** [0]: pando computes Octez's context hash, version 0, only. *)

val set_hash_version : t -> int -> (t, error) result Lwt.t
(** [Ok t] for version 0; [Error (`Unsupported_context_hash_version v)]
    for any other, as irmin's context answers. *)

(** {1 Proofs} *)

val verify_tree_proof :
  ?encoding:Proof.encoding ->
  Proof.tree Proof.t ->
  (tree -> (tree * 'a) Lwt.t) ->
  ( tree * 'a,
    [ `Proof_mismatch of string
    | `Stream_too_long of string
    | `Stream_too_short of string ] )
  result
  Lwt.t
(** [verify_tree_proof proof f] checks the tree proof [proof] in
    [encoding] (default [V1]; see {!Proof.encoding}) with the binding's
    verifier ({!Pando.verify_tree_proof}): that it is a tree proof of the
    32-ary context (version 0) whose tree hashes, with its kind, to the
    proof's [before]. It runs [f] on that tree and checks that the tree [f]
    returns has the proof's [after] kind and hash. The tree given to [f]
    answers every {!Tree} function, writes included (in inodes too);
    reading a part the proof blinds fails with {!Pando.Error}, which
    [verify_tree_proof] turns into [Error (`Proof_mismatch msg)]. [Error
    (`Proof_mismatch msg)] too when the proof does not decode or a hash
    differs; other exceptions of [f] fail the promise. *)

val verify_stream_proof :
  ?encoding:Proof.encoding ->
  Proof.stream Proof.t ->
  (tree -> (tree * 'a) Lwt.t) ->
  ( tree * 'a,
    [ `Proof_mismatch of string
    | `Stream_too_long of string
    | `Stream_too_short of string ] )
  result
  Lwt.t
(** [verify_stream_proof proof f] checks the stream proof [proof] in
    [encoding] (default [V1]; see {!Proof.encoding}) against the reads of
    [f], answering each from the stream as it is checked, then checks that
    [f] read the whole stream and that the tree it returns has the proof's
    [after] kind and hash.

    Each read of [f] is answered by {!Pando.verify_stream_proof_reads} of
    the paths read so far, this one last: every element they take is
    checked, in order, against the hash it must have from [before], and
    the answer is read from the tree those elements make. When [f]'s
    promise resolves, its reads are replayed on the whole stream
    ({!Pando.verify_stream_proof}), and elements left are refused. No
    answer comes from anything but checked elements.

    What [f] can do with the tree it is given (and its subtrees) while the
    proof is checked: {!Tree.find}, {!Tree.find_tree}, {!Tree.mem},
    {!Tree.mem_tree} and {!Tree.to_value}, each replayed as irmin's [find]
    of its path (so a [mem], [mem_tree] or [find_tree] of a value loads the
    value, as [find] does: a stream produced by irmin's [mem] of a value,
    which does not, is refused); {!Tree.kind}, {!Tree.hash},
    {!Tree.equal} and {!Tree.is_empty}, which read nothing more. Anything
    else ([list], [length], [fold], writes, [to_raw], adding it to another
    tree) fails with {!Pando.Error}, which becomes [Error]: the binding's
    verifier replays [find]s only. It also checks that the proof's [after]
    is its [before] (a proof of reads); a stream proof of a computation
    that writes is refused. Once checked, the returned tree answers every
    {!Tree} function from the whole stream (parts it does not show fail
    with {!Pando.Error}).

    [Error (`Stream_too_short msg)] when the stream ends before [f]'s reads
    do, [Error (`Stream_too_long msg)] when elements are left after them,
    [Error (`Proof_mismatch msg)] for anything else (a malformed proof, an
    element whose hash differs, an unsupported operation, a result other
    than [after]); other exceptions of [f] fail the promise. Each read
    replays all reads before it: [r] reads take [r + 1] replays. *)

val merkle_tree : t -> Proof.merkle_leaf_kind -> key -> Proof.merkle_tree Lwt.t
(** The light mode's Merkle tree of [data/key], as Octez's disk context
    builds it: at each directory on the way, the hash of every sibling and
    [Continue] into the next step; at the key, its hash ([Hole]) or all
    its data ([Raw_context]). An empty map if there is no [data]. Fails
    with [Invalid_argument] if [key] is empty or goes through a value. *)

val merkle_tree_v2 :
  ?encoding:Proof.encoding ->
  t ->
  Proof.merkle_leaf_kind ->
  key ->
  Proof.tree Proof.t Lwt.t
(** The tree proof (by default in [V2], the encoding of Octez's
    [merkle_tree_v2] RPC; [V1] on request) of the raw [key] in the commit
    the context was checked out as: with [Raw_context], of every value under
    [key] (its whole subtree); with [Hole], of [key] itself. Fails with
    [Invalid_argument] if the context was changed since its checkout or
    commit (Octez's: "context.tree has no kinded_key"). *)

(** {1 Collections and snapshots} *)

val gc : index -> bytes -> unit Lwt.t
(** [gc index commit] starts a collection keeping [commit], the commits
    after it and their trees, and resolves at once; older commits then
    check out as [None]. Fails with {!Pando.Error} if the commit is
    unknown or the index read-only. *)

val wait_gc_completion : index -> unit Lwt.t
(** Resolves when no collection is running; fails with {!Pando.Error} if
    the last one failed. *)

val is_gc_allowed : index -> bool
(** Whether {!gc} may be called: the index is writable. *)

val split : index -> unit Lwt.t
(** Does nothing: pando's collection does not need chunk boundaries (it
    copies what it keeps and drops the rest whatever the files). *)

val export_snapshot : index -> bytes -> path:string -> unit Lwt.t
(** Writes the tree of the commit to the file [path] (created; an existing
    file is refused), whole or not at all. Octez's irmin writes a
    directory; pando writes one file, which {!import_snapshot} reads. *)

val import_snapshot : index -> path:string -> bytes Lwt.t
(** Checks the snapshot in [path] and makes its commit this empty store's
    first commit; resolves to its hash. Not in [CONTEXT] (Octez copies
    irmin's exported directory instead). *)
