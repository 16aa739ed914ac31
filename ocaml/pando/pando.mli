(** pando's context store, called from OCaml.

    The first part has the names, argument order and meaning of Octez's
    TezEdge binding ([rust_tezedge_gen.mli] in Octez's
    [src/rust_deps/rust_tezos_context/ocaml-api/]), with its ['a] made
    concrete: values are [bytes], and commit and tree hashes are their 32
    raw bytes. Octez's [lib_context_tezedge/context.ml] runs on this module
    by changing the module it binds. The second part is what that binding
    leaves out: proofs, collections, sync, close, snapshots, commit
    metadata, read-only indexes and base58check hashes.

    Every function raises {!Error} with a message naming the cause (the
    corrupt file and offset, the I/O error with its errno, the unknown
    commit); a Rust panic becomes that exception too, and nothing aborts
    the process. Values are immutable: [add] and [remove] return a new
    context or tree and leave their argument as it was. Indexes, contexts,
    trees and walkers are freed by the OCaml GC. Every function may be
    called from several domains at once; [commit], [gc], [sync],
    [export_snapshot] and [import_snapshot] release the domain's runtime
    lock while they work. *)

exception Error of string
(** A failure of the store or of its arguments, with its cause. *)

(** {1 The TezEdge binding's functions} *)

type index
(** An open store: a directory, opened by {!index_init} (read and write)
    or {!index_open_readonly}. *)

type context
(** A tree with the commit it was checked out from (its parent when it is
    committed), and its index. *)

type tree
(** A tree or a value, in memory or in the store. *)

type o_caml_tree_walker
(** The iterator of a fold (see {!make_tree_walker}). *)

type o_caml_depth = Eq of int | Le of int | Lt of int | Ge of int | Gt of int
(** Which depths a fold visits, counted from the folded tree (0). *)

type o_caml_order = Sorted | Undefined
(** The order of a fold: by name, or the store's order. *)

type kind = Value | Tree
(** What a tree is. *)

val index_init : string -> index
(** [index_init dir] opens the store in [dir] for reading and writing,
    creating it if [dir] is missing or empty. *)

val index : context -> index
(** The index a context belongs to. *)

val context_init : index -> context
(** An empty context with no parent (for a genesis commit). *)

val commit : context -> int64 -> string -> string -> bytes
(** [commit ctx time author message] writes the context's tree as a commit
    whose parent is the commit [ctx] was checked out from (none for
    {!context_init}), dated [time] (seconds since the epoch), and returns
    its hash. *)

val hash : context -> int64 -> string -> string -> bytes
(** The hash {!commit} would return, without writing anything. *)

val exists : index -> bytes -> bool
(** Whether the store holds the commit of this hash. *)

val checkout : index -> bytes -> context option
(** The context of a commit; [None] if the store does not hold it. *)

val find : context -> string list -> bytes option
(** The value at a path; [None] if there is none (or a directory). *)

val remove : context -> string list -> context
(** The context without the value or directory at the path. *)

val add : context -> string list -> bytes -> context
(** The context with the value at the path (directories made as needed,
    a value or directory there replaced). *)

val mem_tree : context -> string list -> bool
(** Whether a value or a directory is at the path. The empty path is the
    root, there even in an empty tree: [mem_tree ctx []] is [true], as
    irmin answers. *)

val mem : context -> string list -> bool
(** Whether a value is at the path. *)

val find_tree : context -> string list -> tree option
(** The tree (directory or value) at the path; at the empty path, the
    whole tree (empty or not). *)

val list : context -> int option -> int option -> string list -> (string * tree) array
(** [list ctx offset length path]: the entries of the directory at [path],
    sorted by name, from [offset] (default 0), at most [length] (default
    all); empty if [path] is not a directory. *)

val length : context -> string list -> int
(** The number of entries of the directory at [path] (0 if none). *)

val add_tree : context -> string list -> tree -> context
(** The context with the tree at the path; an empty tree removes it. A
    tree of another index or of a proof is added as a copy in memory,
    read whole (a part a proof blinds raises {!Error}). *)

val make_tree_walker : tree -> o_caml_depth option -> string list -> o_caml_order -> o_caml_tree_walker
(** [make_tree_walker tree depth path order] iterates over the subtrees
    of the tree at [path] (that tree itself included, at depth 0, when
    [depth] allows), as irmin's [Tree.fold ~uniq:`False] visits them: each
    with its path relative to the tree at [path]. *)

val tree_walker_next : o_caml_tree_walker -> (string array * tree) option
(** The next subtree and its path; [None] at the end. *)

val get_tree : context -> tree
(** The context's whole tree. *)

val tree_kind : tree -> kind
(** Whether the tree is a value or a directory. *)

val tree_mem : tree -> string list -> bool
(** {!mem} on a tree. *)

val tree_mem_tree : tree -> string list -> bool
(** {!mem_tree} on a tree. *)

val tree_find : tree -> string list -> bytes option
(** {!find} on a tree. *)

val tree_find_tree : tree -> string list -> tree option
(** {!find_tree} on a tree. *)

val tree_list : tree -> int option -> int option -> string list -> (string * tree) array
(** {!list} on a tree. *)

val tree_length : tree -> string list -> int
(** {!length} on a tree. *)

val tree_add : tree -> string list -> bytes -> tree
(** {!add} on a tree. *)

val tree_add_tree : tree -> string list -> tree -> tree
(** {!add_tree} on a tree. *)

val tree_remove : tree -> string list -> tree
(** {!remove} on a tree. *)

val tree_is_empty : tree -> bool
(** Whether the tree is an empty directory. *)

val tree_empty : context -> tree
(** An empty tree. The context is not read. *)

val tree_to_value : tree -> bytes option
(** The value, if the tree is one. *)

val tree_of_value : context -> bytes -> tree
(** A tree that is the value. The context is not read. *)

val tree_hash : tree -> bytes
(** The tree's hash: Octez's context hash of a tree, or of a value. *)

val tree_equal : tree -> tree -> bool
(** Whether two trees have the same hash. *)

(** {1 Beyond the TezEdge binding} *)

val index_open_readonly : string -> index
(** [index_open_readonly dir] opens the store in [dir] for reading only,
    beside a writer in another process: a checkout of a commit the writer
    made since is found. Writing through it raises {!Error}. *)

type sync_policy =
  | Every_commit  (** a commit returns once it is on disk (the default) *)
  | Pipelined
      (** a commit's sync runs while the next block is applied; a crash
          loses at most the last commit *)
  | No_sync  (** the store never syncs (what irmin-pack does in Octez) *)

val index_init_with : sync_policy -> string -> index
(** {!index_init} with a sync policy. *)

type layout =
  | Tezos  (** an L1 node's context (Octez's [Context]) *)
  | Tezos_binary
      (** a smart rollup node's or Etherlink's context (Octez's
          [Context_binary]: inodes of 2 entries); its proofs and snapshots
          are refused for now *)

val index_init_layout : layout -> sync_policy -> string -> index
(** {!index_init_with} of a store of [layout]: one created with it, or
    one it was created with. A store of the other layout raises {!Error},
    naming both, and is left as it was. {!index_init} opens a store of
    either. *)

val close : index -> unit
(** Waits for a running collection, makes everything durable and closes
    the store. Any later use of the index, or of a context or tree read
    from it, raises {!Error}. *)

val sync : index -> unit
(** Octez's [sync]: makes every commit made so far durable
    ([Store::flush]); on a read-only index, takes in what the writer
    committed since ([Store::refresh]). *)

val tree_clear : int option -> tree -> unit
(** [tree_clear depth tree] is irmin's [Tree.clear]: it frees what [tree]
    holds of what it read from the store. A pando tree holds none of it
    (its stored parts are read through the store's cache, whose size is
    bounded, and the rest are its own updates), so this only checks that
    the index is open. The contents and hash do not change. *)

val gc : index -> bytes -> unit
(** [gc index commit] starts a collection that keeps [commit], the
    commits after it, and their trees, and returns at once; the writer
    goes on while it runs. Raises {!Error} if the commit is unknown. *)

val wait_gc_completion : index -> unit
(** Returns when no collection is running; raises {!Error} if the last
    one failed. *)

val is_gc_allowed : index -> bool
(** Whether {!gc} may be called: a writable index. *)

val export_snapshot : index -> bytes -> string -> unit
(** [export_snapshot index commit file] writes the tree of [commit] to
    [file] (created; an existing file is refused), whole or not at all. *)

val import_snapshot : index -> string -> bytes
(** [import_snapshot index file] checks the snapshot in [file] and makes
    its commit this empty store's first commit; returns its hash. *)

type commit_info = {
  date : int64;  (** seconds since the epoch *)
  author : string;
  message : string;
  parents : bytes list;
}

val commit_info : index -> bytes -> commit_info option
(** The metadata of a commit; [None] if the store does not hold it. *)

(** {2 Proofs}

    Octez's proofs, in its binary encodings of [Proof.tree Proof.t] and
    [Proof.stream Proof.t]: [Merkle_proof_encoding.V1.Tree32] or
    [V2.Tree32] (light mode's [merkle_tree_v2]). *)

type proof_encoding = V1 | V2

val produce_tree_proof : index -> bytes -> string list list -> proof_encoding -> bytes
(** [produce_tree_proof index commit paths encoding]: the encoded tree
    proof of reading each of [paths] in the tree of [commit] (irmin's
    [Tree.find]: the directories on the way and the value at the end are
    revealed; a directory at the end shows only its hash). Both encodings
    write a step's length on one byte: a proof that would show a step of
    256 bytes or more raises {!Error} ("cannot encode ..."), as Octez's
    encoder refuses it. *)

val verify_tree_proof : proof_encoding -> bytes -> bytes -> tree
(** [verify_tree_proof encoding proof root] decodes [proof], checks that
    its tree hashes to [root] (the hash of a commit's tree, as
    {!tree_hash} gives it, not the commit hash) and returns that tree.
    Reading a part the proof blinds raises {!Error} naming it; the tree
    can be updated in memory but not added to a store's tree. *)

val produce_stream_proof : index -> bytes -> string list list -> proof_encoding -> bytes
(** The encoded stream proof of reading each of [paths] (as
    {!produce_tree_proof}) in the tree of [commit]: what the reads visit,
    in irmin's order. *)

val verify_stream_proof : proof_encoding -> bytes -> bytes -> string list list -> tree
(** [verify_stream_proof encoding proof root paths] replays the reads of
    [paths] on the stream, checking each element against the hash it
    must have from [root], and returns the tree of what they read. A
    missing, extra or altered element raises {!Error}. *)

val verify_stream_proof_reads : proof_encoding -> bytes -> bytes -> string list list -> tree * int
(** {!verify_stream_proof} of the reads made so far: the first elements
    of the stream are checked against the reads of [paths], the rest are
    left; returns the tree of what was read and how many elements are
    left. A caller that learns its reads one at a time answers each from
    this tree and, at the end, checks with {!verify_stream_proof} that
    the whole stream was read. *)

val tree_proof_hashes : proof_encoding -> bytes -> (kind * bytes) * (kind * bytes)
(** The [before] and [after] an encoded tree proof states, each a kind
    and a hash (what Octez's [verify_tree_proof] checks its tree and its
    computation's result against), without checking them. *)

val stream_proof_hashes : proof_encoding -> bytes -> (kind * bytes) * (kind * bytes)
(** The same of an encoded stream proof. *)

(** {2 Other} *)

val empty_tree : unit -> tree
(** An empty tree, belonging to no index. *)

val disable_transparent_huge_pages : unit -> bool
(** Turns transparent huge pages off for the whole process (all of it: the
    OCaml heap too), as the [pando] command does for itself: the trees grow
    by many small allocations, and with huge pages each first touch of
    one zeroes 2 MiB. The duo replaying [small] alone on pando peaked at
    about 210 MB with them off against 235 with them on. For a host whose
    memory is mostly pando's; [false] if the kernel refused. *)

val set_branch : index -> string -> bytes -> unit
(** [set_branch index name commit] points the branch [name] at [commit]
    (durable when it returns). *)

(** {2 Hashes} *)

val blake2b : int -> bytes -> bytes
(** [blake2b size data]: the BLAKE2b digest of [data], [size] bytes long
    (1 to 64), as Octez's hashes use it (block hashes, chain ids). *)

val b58check_encode : string -> bytes -> string
(** [b58check_encode prefix payload]: base58check of [prefix ^ payload],
    as Octez prints its hashes ([prefix] is the version bytes, e.g.
    ["\087\082\000"] for a chain id). *)

module Hash : sig
  val to_b58check : bytes -> string
  (** The [Co...] form of a 32-byte context hash. *)

  val of_b58check : string -> bytes
  (** The 32 bytes of a [Co...] hash; raises {!Error} if it is not one. *)
end

(** {2 For the binding's own benchmark} *)

module Internal : sig
  val find_in_rust : context -> string list -> int -> float
  (** [find_in_rust ctx path n] makes [n] calls of {!find}'s Rust
      function from Rust and returns the seconds they took: the same work
      without the binding, for [ocaml/bench]. *)
end
