(* The externals of crates/pando-ocaml; pando.mli documents them. Each C
   symbol is the OCaml name with a [pando_] prefix. *)

exception Error of string

let () = Callback.register_exception "pando.error" (Error "")

type index
type context
type tree
type o_caml_tree_walker
type o_caml_depth = Eq of int | Le of int | Lt of int | Ge of int | Gt of int
type o_caml_order = Sorted | Undefined
type kind = Value | Tree

external index_init : string -> index = "pando_index_init"
external index : context -> index = "pando_index"
external context_init : index -> context = "pando_context_init"
external commit : context -> int64 -> string -> string -> bytes = "pando_commit"
external hash : context -> int64 -> string -> string -> bytes = "pando_hash"
external exists : index -> bytes -> bool = "pando_exists"
external checkout : index -> bytes -> context option = "pando_checkout"
external find : context -> string list -> bytes option = "pando_find"
external remove : context -> string list -> context = "pando_remove"
external add : context -> string list -> bytes -> context = "pando_add"
external mem_tree : context -> string list -> bool = "pando_mem_tree"
external mem : context -> string list -> bool = "pando_mem"
external find_tree : context -> string list -> tree option = "pando_find_tree"

external list :
  context -> int option -> int option -> string list -> (string * tree) array
  = "pando_list"

external length : context -> string list -> int = "pando_length"
external add_tree : context -> string list -> tree -> context = "pando_add_tree"

external make_tree_walker :
  tree -> o_caml_depth option -> string list -> o_caml_order -> o_caml_tree_walker
  = "pando_make_tree_walker"

external tree_walker_next : o_caml_tree_walker -> (string array * tree) option
  = "pando_tree_walker_next"

external get_tree : context -> tree = "pando_get_tree"
external tree_kind : tree -> kind = "pando_tree_kind"
external tree_mem : tree -> string list -> bool = "pando_tree_mem"
external tree_mem_tree : tree -> string list -> bool = "pando_tree_mem_tree"
external tree_find : tree -> string list -> bytes option = "pando_tree_find"
external tree_find_tree : tree -> string list -> tree option = "pando_tree_find_tree"

external tree_list :
  tree -> int option -> int option -> string list -> (string * tree) array
  = "pando_tree_list"

external tree_length : tree -> string list -> int = "pando_tree_length"
external tree_add : tree -> string list -> bytes -> tree = "pando_tree_add"
external tree_add_tree : tree -> string list -> tree -> tree = "pando_tree_add_tree"
external tree_remove : tree -> string list -> tree = "pando_tree_remove"
external tree_is_empty : tree -> bool = "pando_tree_is_empty"
external tree_empty : context -> tree = "pando_tree_empty"
external tree_to_value : tree -> bytes option = "pando_tree_to_value"
external tree_of_value : context -> bytes -> tree = "pando_tree_of_value"
external tree_hash : tree -> bytes = "pando_tree_hash"
external tree_equal : tree -> tree -> bool = "pando_tree_equal"
external index_open_readonly : string -> index = "pando_index_open_readonly"

type sync_policy = Every_commit | Pipelined | No_sync

external index_init_with : sync_policy -> string -> index = "pando_index_init_with"

type layout = Tezos | Tezos_binary

external index_init_layout : layout -> sync_policy -> string -> index = "pando_index_init_layout"
external close : index -> unit = "pando_close"
external sync : index -> unit = "pando_sync"
external tree_clear : int option -> tree -> unit = "pando_tree_clear"
external gc : index -> bytes -> unit = "pando_gc"
external wait_gc_completion : index -> unit = "pando_wait_gc_completion"
external is_gc_allowed : index -> bool = "pando_is_gc_allowed"
external export_snapshot : index -> bytes -> string -> unit = "pando_export_snapshot"
external import_snapshot : index -> string -> bytes = "pando_import_snapshot"

type commit_info = {
  date : int64;
  author : string;
  message : string;
  parents : bytes list;
}

external commit_info : index -> bytes -> commit_info option = "pando_commit_info"

type proof_encoding = V1 | V2

external produce_tree_proof :
  index -> bytes -> string list list -> proof_encoding -> bytes
  = "pando_produce_tree_proof"

external verify_tree_proof : proof_encoding -> bytes -> bytes -> tree
  = "pando_verify_tree_proof"

external produce_stream_proof :
  index -> bytes -> string list list -> proof_encoding -> bytes
  = "pando_produce_stream_proof"

external verify_stream_proof :
  proof_encoding -> bytes -> bytes -> string list list -> tree
  = "pando_verify_stream_proof"

external verify_stream_proof_reads :
  proof_encoding -> bytes -> bytes -> string list list -> tree * int
  = "pando_verify_stream_proof_reads"

external proof_hashes_raw :
  proof_encoding -> bool -> bytes -> (kind * bytes) * (kind * bytes)
  = "pando_proof_hashes"

let tree_proof_hashes encoding proof = proof_hashes_raw encoding false proof
let stream_proof_hashes encoding proof = proof_hashes_raw encoding true proof

external empty_tree : unit -> tree = "pando_empty_tree"
external disable_transparent_huge_pages : unit -> bool = "pando_disable_transparent_huge_pages"
external set_branch : index -> string -> bytes -> unit = "pando_set_branch"

external blake2b : int -> bytes -> bytes = "pando_blake2b"
external b58check_encode : string -> bytes -> string = "pando_b58check_encode"

module Hash = struct
  external to_b58check : bytes -> string = "pando_hash_to_b58check"
  external of_b58check : string -> bytes = "pando_hash_of_b58check"
end

module Internal = struct
  external find_in_rust : context -> string list -> int -> float
    = "pando_find_in_rust"
end
