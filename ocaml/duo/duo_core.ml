(* The duo's replay machinery: an IrmRepBT trace replayed on two stores at
   once, every result compared (Duo), or on one store alone, timed (Solo).

   A store is anything that meets STORE below; Irmin_store (irmin-pack
   3.7.2, Octez's configuration) and Pando_store (pando through
   Pando_context) are the two the duo runs, and the self-test runs irmin
   against a second irmin.

   Replay semantics are those of irmin 3.7.2's bench/irmin-pack/
   trace_replay.ml, as in bench/irmin/driver/bench.ml:
   context id 0 is the empty tree; a [Forget] context id or commit hash is
   dropped after its use; Copy is find_tree + add_tree; a block is every row
   up to and including a Commit. A Copy from a missing path leaves its
   output context equal to its input one, as Octez's Context.copy answers
   None and its caller goes on with the context it had (irmin's
   trace_replay.ml stops there instead).

   What is compared, in Duo mode (each comparison counts as one result):
   - every Find (the value, not only whether it is found), Mem and Mem_tree
     row of the trace, on both stores;
   - at every Copy, the hash of the tree find_tree returns at the source;
   - every commit hash;
   - for the first [--extra] distinct parent directories a block reads
     (default 8): [length]; if it has at most 256 entries, [list] (names
     and kinds, sorted) and the hash of [find_tree]; if at most 32, also
     [list ~offset:1 ~length:2] (the order) and [fold ~depth:(`Le 1)
     ~order:`Sorted] (paths, kinds and values);
   - proofs: for the first [--proofs] paths a block reads (default 2),
     each store proves them in the commit and the other verifies the proof
     against its own commit's tree hash and reads them in the tree proved
     (Octez's V1 Tree32 encoding between them; see PROOFS below); a
     proof that cannot be encoded (a step of 256 bytes or more, longer
     than the encoding's one-byte length) must be refused by both sides,
     which counts as one result agreed on.
   The trace's own find/mem/mem_tree booleans are checked too; a store that
   disagrees with the trace is counted apart ("trace mismatches"). *)

open Lwt.Syntax
module Def = Trace_definitions.Replayable_trace
module TSeq = Trace_common.Seq

type kind = [ `Value | `Tree ]
type depth = [ `Eq of int | `Le of int | `Lt of int | `Ge of int | `Gt of int ]

module type STORE = sig
  val name : string

  type repo
  type ctx
  type commit

  val open_repo : string -> repo Lwt.t
  (** A fresh store in this directory (wiped first). *)

  val empty : repo -> ctx
  val checkout : repo -> commit -> ctx Lwt.t
  val add : ctx -> string list -> string -> ctx Lwt.t
  val remove : ctx -> string list -> ctx Lwt.t

  val copy : ctx -> src:string list -> dst:string list -> ctx option Lwt.t
  (** find_tree [src] then add_tree at [dst]; None if [src] is absent. *)

  val find : ctx -> string list -> string option Lwt.t
  val mem : ctx -> string list -> bool Lwt.t
  val mem_tree : ctx -> string list -> bool Lwt.t

  val find_tree_hash : ctx -> string list -> string option Lwt.t
  (** The 32-byte hash of the tree find_tree returns. *)

  val length : ctx -> string list -> int Lwt.t

  val list :
    ctx -> ?offset:int -> ?length:int -> string list -> (string * kind) list Lwt.t

  val fold :
    ctx -> string list -> depth:depth -> (string list * kind * string) list Lwt.t
  (** Octez's fold ~order:`Sorted: each visited path, its kind, and its
      value (empty for a directory), in visiting order. *)

  val commit :
    repo ->
    ctx ->
    parents:commit list ->
    date:int64 ->
    message:string ->
    (commit * string) Lwt.t
  (** The commit and its 32-byte hash. *)

  val gc : repo -> commit -> bool Lwt.t
  (** Start a collection keeping this commit and later ones; false if it
      was not started (one is running). *)

  val wait_gc : repo -> unit Lwt.t
  val close : repo -> unit Lwt.t
end

(* Proofs by the other side: a store that can produce a proof of some
   paths of one of its commits, and check a proof the other one produced,
   in Octez's V1 Tree32 binary encoding. *)
module type PROOFS = sig
  type repo
  type commit

  val produce :
    repo -> commit -> string list list -> (string, string) result Lwt.t
  (** The encoded tree proof of these paths in this commit's tree, or why
      it cannot be encoded (a step longer than the encoding's one-byte
      length carries). *)

  val verify :
    repo ->
    commit ->
    string ->
    string list list ->
    ((string list * string option) list, string) result Lwt.t
  (** Check an encoded proof against this commit's tree hash and return
      what each path holds in the tree proved (find), or why it fails. *)

  val can_verify : bool
  (** Whether [verify] exists: when not, the other store's proofs are not
      produced, and the summary says so. *)

  val produce_stream :
    repo -> commit -> string list list -> (string, string) result Lwt.t
  (** The encoded stream proof (V1 Tree32) of reading these paths, in
      order, in this commit's tree, or why it cannot be encoded. *)

  val verify_stream :
    repo ->
    commit ->
    string ->
    string list list ->
    ((string list * string option) list, string) result Lwt.t
  (** Check an encoded stream proof of reading these paths against this
      commit's tree hash, and return what they hold. *)

  val can_stream : bool
end

module No_proofs (S : STORE) = struct
  type repo = S.repo
  type commit = S.commit

  let produce _ _ _ = Lwt.return (Ok "")
  let verify _ _ _ _ = Lwt.return (Error "no proofs")
  let can_verify = false
  let produce_stream _ _ _ = Lwt.return (Ok "")
  let verify_stream _ _ _ _ = Lwt.return (Error "no proofs")
  let can_stream = false
end

(* ---------------------------------------------------------------- options *)

let trace_path = ref ""
let work_dir = ref ""
let keep_dir = ref false
let max_blocks = ref max_int
let gc_every = ref 0
let gc_keep = ref 0
let only = ref ""
let json_path = ref ""
let extra = ref 8
let proofs = ref 2
let max_printed = ref 1000
let progress_every = ref 0
(* The trace's recorded answers name paths below data/ (edge_trace.ml's
   default), not from the root (irmin's replay, Octez's own traces). *)
let trace_under_data = ref false

(* Pando's sync policy (Pando.index_init_with): every commit on disk
   before it returns (the binding's default), its sync while the next
   block runs, or none (irmin-pack's in Octez, and the duo's irmin). *)
let sync = ref "every"

let sync_policy () : Pando.sync_policy =
  match !sync with
  | "pipelined" -> Pando.Pipelined
  | "never" -> Pando.No_sync
  | _ -> Pando.Every_commit

let spec =
  Arg.align
    [
      ("--max-blocks", Arg.Set_int max_blocks, "N stop after N commits");
      ("--gc-every", Arg.Set_int gc_every, "N collect every N commits (0: none)");
      ("--gc-keep", Arg.Set_int gc_keep, "K keep the last K commits at each collection");
      ("--only", Arg.Set_string only, "STORE replay one store alone (irmin|pando|null), timed");
      ("--json", Arg.Set_string json_path, "FILE write a JSON summary");
      ("--dir", Arg.Set_string work_dir, "DIR where the stores go (default: a temporary dir)");
      ("--keep", Arg.Set keep_dir, " keep the stores at the end");
      ("--extra", Arg.Set_int extra, "N parent directories per block given list/length/fold (default 8)");
      ("--proofs", Arg.Set_int proofs, "N paths per block proved by each side and checked by the other (default 2)");
      ("--max-printed", Arg.Set_int max_printed, "N divergences printed in full (default 1000)");
      ("--progress", Arg.Set_int progress_every, "N a progress line on stderr every N blocks");
      ( "--sync",
        Arg.Symbol ([ "every"; "pipelined"; "never" ], fun s -> sync := s),
        " pando's sync policy (default every: each commit on disk before it returns)" );
      ( "--trace-under-data",
        Arg.Set trace_under_data,
        " the trace's paths are relative to data/ (it was recorded through a context that puts \
         them there), so that --api context checks its recorded answers at the empty path too" );
    ]

let usage = "duo TRACE [options]"

let parse_args ?(extra = []) () =
  let spec = Arg.align (spec @ extra) in
  Arg.parse spec
    (fun a ->
      if !trace_path = "" then trace_path := a
      else raise (Arg.Bad ("unexpected argument " ^ a)))
    usage;
  if !trace_path = "" then (
    Arg.usage spec usage;
    exit 2);
  if !gc_every > 0 && !gc_keep < 1 then (
    prerr_endline "duo: --gc-every needs --gc-keep K >= 1";
    exit 2)

(* ---------------------------------------------------------------- helpers *)

(* Octez's contexts keep their data under [data/] (lib_context's
   [data_key]); with [prefix := ["data"]] a store puts every path of the
   trace there, as when Octez calls Context.add/find/... *)
let prefix : string list ref = ref []
let k p = match !prefix with [] -> p | pre -> pre @ p

(* A proof refused because its encoding cannot carry it ("cannot encode:
   ...", irmin_proof.ml's and pando-core's words), not for another error. *)
let unencodable e =
  let needle = "cannot encode" in
  let n = String.length needle and m = String.length e in
  let rec at i = i + n <= m && (String.sub e i n = needle || at (i + 1)) in
  at 0

let now () = Mtime_clock.now_ns ()
let secs a b = Int64.to_float (Int64.sub b a) *. 1e-9

let rec rm_rf path =
  match Unix.lstat path with
  | exception Unix.Unix_error (Unix.ENOENT, _, _) -> ()
  | { Unix.st_kind = Unix.S_DIR; _ } ->
      Array.iter (fun f -> rm_rf (Filename.concat path f)) (Sys.readdir path);
      Unix.rmdir path
  | _ -> Unix.unlink path

let read_lines path =
  match open_in path with
  | exception Sys_error _ -> []
  | ic ->
      let rec go acc =
        match input_line ic with
        | l -> go (l :: acc)
        | exception End_of_file ->
            close_in ic;
            List.rev acc
      in
      go []

(* /proc/self/status VmHWM, kB *)
let vm_hwm_kb () =
  List.fold_left
    (fun acc l ->
      match String.split_on_char ':' l with
      | [ "VmHWM"; v ] -> (
          match
            String.split_on_char ' ' (String.trim v) |> List.filter (( <> ) "")
          with
          | n :: _ -> int_of_string n
          | [] -> acc)
      | _ -> acc)
    (-1) (read_lines "/proc/self/status")

let hex s =
  String.concat ""
    (List.init (String.length s) (fun i -> Printf.sprintf "%02x" (Char.code s.[i])))

let path_s k = "/" ^ String.concat "/" k

(* a value as printed in a divergence: quoted, cut at 64 bytes *)
let show_value s =
  if String.length s <= 64 then Printf.sprintf "%S" s
  else Printf.sprintf "%S...(%d bytes)" (String.sub s 0 64) (String.length s)

let show_opt f = function None -> "none" | Some v -> f v
let show_kind = function `Value -> "value" | `Tree -> "tree"

let show_entries l =
  "["
  ^ String.concat ", " (List.map (fun (n, k) -> n ^ ":" ^ show_kind k) l)
  ^ "]"

let show_fold l =
  "["
  ^ String.concat ", "
      (List.map
         (fun (p, k, v) ->
           path_s p ^ ":"
           ^ match k with `Tree -> "tree" | `Value -> show_value v)
         l)
  ^ "]"

exception Replay_error of string

let fail_at block fmt =
  Printf.ksprintf
    (fun s -> raise (Replay_error (Printf.sprintf "block %d: %s" block s)))
    fmt

let unscope = function Def.Forget v -> v | Def.Keep v -> v

(* The trace's contexts and commits by their ids, as both modes keep
   them: the empty context is id 0, and an id in a Forget scope is dropped
   once taken or put (the trace uses it no more). *)
module Ids = struct
  (* The contexts by id: a table of int64 keys, not the polymorphic
     Hashtbl, whose generic hash and compare cost a row twice what the
     lookup does. *)
  module Ctx = Hashtbl.Make (struct
    type t = int64

    let equal = Int64.equal
    let hash x = Int64.to_int x land max_int
  end)

  type ('c, 'k) t = { contexts : 'c Ctx.t; hashes : (string, 'k) Hashtbl.t }

  let create empty =
    let t = { contexts = Ctx.create 16; hashes = Hashtbl.create 16 } in
    Ctx.add t.contexts 0L empty;
    t

  let forget tbl = function
    | Def.Forget k -> Hashtbl.remove tbl k
    | Def.Keep _ -> ()

  let find ~block tbl what show id =
    match Hashtbl.find_opt tbl (unscope id) with
    | Some v -> v
    | None -> fail_at block "unknown %s %s" what (show (unscope id))

  let take_ctx ~block t c =
    let id = unscope c in
    match Ctx.find_opt t.contexts id with
    | None -> fail_at block "unknown context id %Ld" id
    | Some v ->
        (match c with Def.Forget _ -> Ctx.remove t.contexts id | Def.Keep _ -> ());
        v

  let put_ctx t c v =
    match c with
    | Def.Forget _ -> ()
    | Def.Keep id -> Ctx.add t.contexts id v

  (* all found before any is forgotten: a commit may name a parent twice *)
  let take_hashes ~block t hs =
    let ks = List.map (find ~block t.hashes "commit hash" Fun.id) hs in
    List.iter (forget t.hashes) hs;
    ks

  let take_hash ~block t h = List.hd (take_hashes ~block t [ h ])

  let put_hash t h k =
    Hashtbl.replace t.hashes (unscope h) k;
    forget t.hashes h
end

(* the trace, a row at a time (Fast_trace): what a store alone replays,
   so that the driver holds no block whole (a genesis block is hundreds
   of MB) *)
let row_reader = Fast_trace.open_reader

(* the trace, a block at a time *)
let block_reader path =
  let next_row = row_reader path in
  fun () ->
    let rec go acc =
      match next_row () with
      | None -> None
      | Some (Def.Commit _ as row) -> Some (List.rev (row :: acc))
      | Some row -> go (row :: acc)
    in
    go []

(* Both readers, irmin's (Repr) and Fast_trace, over the whole trace:
   0 if every row is the same. *)
let check_reader () =
  let _header, rows = Def.open_reader !trace_path in
  let fast = Fast_trace.open_reader !trace_path in
  let rec go n rows =
    match (rows (), fast ()) with
    | TSeq.Nil, None ->
        Printf.printf "reader: %d rows, both readers agree\n%!" n;
        0
    | TSeq.Cons (a, rest), Some b when a = b -> go (n + 1) rest
    | _ ->
        Printf.printf "reader: the readers differ at row %d\n%!" n;
        1
  in
  go 0 rows

let parent k = match List.rev k with [] -> None | _ :: r -> Some (List.rev r)

(* GC schedule, as bench.ml: after commit n (from 1), if n mod N = 0 and
   n >= K, collect keeping commit n-K+1 and later ones. *)
let gc_target n =
  if !gc_every > 0 && n mod !gc_every = 0 && n >= !gc_keep then
    Some (n - !gc_keep + 1)
  else None

let store_dir name =
  if !work_dir = "" then
    work_dir :=
      Filename.concat
        (Filename.get_temp_dir_name ())
        (Printf.sprintf "duo.%d" (Unix.getpid ()));
  (try Unix.mkdir !work_dir 0o755 with Unix.Unix_error (Unix.EEXIST, _, _) -> ());
  Filename.concat !work_dir name

let cleanup () = if (not !keep_dir) && !work_dir <> "" then rm_rf !work_dir

let row_name = function
  | Def.Checkout _ -> "checkout"
  | Def.Add { key; _ } -> "add " ^ path_s key
  | Def.Remove (key, _, _) -> "remove " ^ path_s key
  | Def.Copy { key_src; key_dst; _ } -> "copy " ^ path_s key_src ^ " to " ^ path_s key_dst
  | Def.Find (key, _, _) -> "find " ^ path_s key
  | Def.Mem (key, _, _) -> "mem " ^ path_s key
  | Def.Mem_tree (key, _, _) -> "mem_tree " ^ path_s key
  | Def.Commit _ -> "commit"

(* an exception of a store names the row it came from *)
let in_context ~block ~op row f =
  Lwt.catch f (function
    | Replay_error _ as e -> Lwt.fail e
    | e ->
        Lwt.fail
          (Replay_error
             (Printf.sprintf "block %d op %d (%s): %s" block op (row_name row)
                (Printexc.to_string e))))

(* ------------------------------------------------------------------- duo *)

module Duo
    (A : STORE)
    (PA : PROOFS with type repo = A.repo and type commit = A.commit)
    (B : STORE)
    (PB : PROOFS with type repo = B.repo and type commit = B.commit) =
struct
  let compared = ref 0
  let divergences = ref 0
  let trace_mismatches = ref 0

  (* recorded answers at the empty path not checked under [prefix]: the
     trace's empty path is the root, the stores' is data/ *)
  let root_unchecked = ref 0
  let proofs_checked = ref 0

  (* DUO_INJECT=N: store B is given a different value at the Nth Add of
     the trace (from 1), to show that the duo catches it. *)
  let inject_at =
    match Sys.getenv_opt "DUO_INJECT" with
    | Some s -> ( try int_of_string s with _ -> 0)
    | None -> 0

  (* DUO_INJECT_PROOF=1: every proof has one byte of its last hash or
     value changed before the other side checks it. *)
  let inject_proof = Sys.getenv_opt "DUO_INJECT_PROOF" = Some "1"

  let corrupt p =
    if p = "" then p
    else
      let b = Bytes.of_string p in
      let i = Bytes.length b - 1 in
      Bytes.set b i (Char.chr (Char.code (Bytes.get b i) lxor 1));
      Bytes.to_string b

  let by_kind : (string, int) Hashtbl.t = Hashtbl.create 8

  (* collections started, and not started because one was running *)
  let gcs_a = (ref 0, ref 0)
  let gcs_b = (ref 0, ref 0)

  let diverge ~block ~op ~what ~path a b =
    incr divergences;
    Hashtbl.replace by_kind what
      (1 + Option.value ~default:0 (Hashtbl.find_opt by_kind what));
    if !divergences <= !max_printed then
      Printf.printf "DIVERGENCE block %d op %d %s %s: %s %s, %s %s\n%!" block
        op what (path_s path) A.name a B.name b
    else if !divergences = !max_printed + 1 then
      Printf.printf "(further divergences counted, not printed)\n%!"

  let compared_by_kind : (string, int) Hashtbl.t = Hashtbl.create 16

  let check ~block ~op ~what ~path show a b =
    incr compared;
    Hashtbl.replace compared_by_kind what
      (1 + Option.value ~default:0 (Hashtbl.find_opt compared_by_kind what));
    if a <> b then diverge ~block ~op ~what ~path (show a) (show b)

  let run () =
    let next_block = block_reader !trace_path in
    let dir_a = store_dir ("a-" ^ A.name) and dir_b = store_dir ("b-" ^ B.name) in
    let n_adds = ref 0 in
    let blocks_done = ref 0 in
    let t_start = now () in
    let main () =
      let* ra = A.open_repo dir_a in
      let* rb = B.open_repo dir_b in
      let ids = Ids.create (A.empty ra, B.empty rb) in
      let by_n : (int, A.commit * B.commit) Hashtbl.t = Hashtbl.create 16 in
      let rec loop block =
        if block >= !max_blocks then Lwt.return block
        else
          match next_block () with
          | None -> Lwt.return block
          | Some rows ->
              let take_ctx = Ids.take_ctx ~block ids and put_ctx = Ids.put_ctx ids in
              let seen_dirs = Hashtbl.create 8 in
              let read_paths = ref [] in
              let vs_trace what key expected a b =
                (* A trace's paths are irmin's, from the root; under
                   [prefix] every path moves below data/, which changes
                   no answer but the empty path's (the root is a
                   directory even when empty, data/ only when it holds
                   something). The two stores are still compared there. *)
                if key = [] && !prefix <> [] && not !trace_under_data then incr root_unchecked
                else if a <> expected || b <> expected then (
                  incr trace_mismatches;
                  if !trace_mismatches <= 10 then
                    Printf.printf
                      "trace mismatch block %d %s %s: trace %b, %s %b, %s %b\n%!"
                      block what (path_s key) expected A.name a B.name b)
              in
              (* list/length/fold/find_tree of the parent of a path read *)
              let extras op (ca, cb) key =
                match parent key with
                | None -> Lwt.return_unit
                | Some p when Hashtbl.mem seen_dirs p
                              || Hashtbl.length seen_dirs >= !extra ->
                    Lwt.return_unit
                | Some p ->
                    Hashtbl.add seen_dirs p ();
                    let* la = A.length ca p in
                    let* lb = B.length cb p in
                    check ~block ~op ~what:"length" ~path:p string_of_int la lb;
                    let* () =
                      if la > 256 || lb > 256 then Lwt.return_unit
                      else
                        let* ea = A.list ca p in
                        let* eb = B.list cb p in
                        let sort = List.sort compare in
                        check ~block ~op ~what:"list" ~path:p show_entries
                          (sort ea) (sort eb);
                        let* ha = A.find_tree_hash ca p in
                        let* hb = B.find_tree_hash cb p in
                        check ~block ~op ~what:"find_tree-hash" ~path:p
                          (show_opt hex) ha hb;
                        Lwt.return_unit
                    in
                    if la > 32 || lb > 32 then Lwt.return_unit
                    else
                      let* ea = A.list ca ~offset:1 ~length:2 p in
                      let* eb = B.list cb ~offset:1 ~length:2 p in
                      check ~block ~op ~what:"list-offset-1-length-2" ~path:p
                        show_entries ea eb;
                      let* fa = A.fold ca p ~depth:(`Le 1) in
                      let* fb = B.fold cb p ~depth:(`Le 1) in
                      check ~block ~op ~what:"fold-le-1" ~path:p show_fold fa fb;
                      Lwt.return_unit
              in
              let note_read key =
                if List.length !read_paths < !proofs && not (List.mem key !read_paths)
                then read_paths := key :: !read_paths
              in
              let exec op = function
                | Def.Checkout (h, out) ->
                    let ka, kb = Ids.take_hash ~block ids h in
                    let* ca = A.checkout ra ka in
                    let* cb = B.checkout rb kb in
                    put_ctx out (ca, cb);
                    Lwt.return_unit
                | Def.Add { key; value; in_ctx_id; out_ctx_id } ->
                    let ca, cb = take_ctx in_ctx_id in
                    incr n_adds;
                    let vb = if !n_adds = inject_at then value ^ "!" else value in
                    let* ca = A.add ca key value in
                    let* cb = B.add cb key vb in
                    put_ctx out_ctx_id (ca, cb);
                    Lwt.return_unit
                | Def.Remove (key, in_ctx_id, out_ctx_id) ->
                    let ca, cb = take_ctx in_ctx_id in
                    let* ca = A.remove ca key in
                    let* cb = B.remove cb key in
                    put_ctx out_ctx_id (ca, cb);
                    Lwt.return_unit
                | Def.Copy { key_src; key_dst; in_ctx_id; out_ctx_id } -> (
                    let ca, cb = take_ctx in_ctx_id in
                    let* ha = A.find_tree_hash ca key_src in
                    let* hb = B.find_tree_hash cb key_src in
                    check ~block ~op ~what:"copy-find_tree-hash" ~path:key_src
                      (show_opt hex) ha hb;
                    let* ca' = A.copy ca ~src:key_src ~dst:key_dst in
                    let* cb' = B.copy cb ~src:key_src ~dst:key_dst in
                    match (ca', cb') with
                    | Some ca, Some cb ->
                        put_ctx out_ctx_id (ca, cb);
                        Lwt.return_unit
                    | None, None ->
                        (* from a missing path: the context goes on as it was *)
                        put_ctx out_ctx_id (ca, cb);
                        Lwt.return_unit
                    | _ ->
                        (* counted above: one side found a tree *)
                        fail_at block "copy: a tree at %s on one side only" (path_s key_src))
                | Def.Find (key, expected, in_ctx_id) ->
                    let ((ca, cb) as c) = take_ctx in_ctx_id in
                    let* a = A.find ca key in
                    let* b = B.find cb key in
                    check ~block ~op ~what:"find" ~path:key (show_opt show_value) a b;
                    vs_trace "find" key expected (Option.is_some a) (Option.is_some b);
                    note_read key;
                    extras op c key
                | Def.Mem (key, expected, in_ctx_id) ->
                    let ((ca, cb) as c) = take_ctx in_ctx_id in
                    let* a = A.mem ca key in
                    let* b = B.mem cb key in
                    check ~block ~op ~what:"mem" ~path:key string_of_bool a b;
                    vs_trace "mem" key expected a b;
                    note_read key;
                    extras op c key
                | Def.Mem_tree (key, expected, in_ctx_id) ->
                    let ((ca, cb) as c) = take_ctx in_ctx_id in
                    let* a = A.mem_tree ca key in
                    let* b = B.mem_tree cb key in
                    check ~block ~op ~what:"mem_tree" ~path:key string_of_bool a b;
                    vs_trace "mem_tree" key expected a b;
                    note_read key;
                    extras op c key
                | Def.Commit { hash; date; message; parents; in_ctx_id } ->
                    let pk = Ids.take_hashes ~block ids parents in
                    let ca, cb = take_ctx in_ctx_id in
                    let* ka, ha =
                      A.commit ra ca ~parents:(List.map fst pk) ~date ~message
                    in
                    let* kb, hb =
                      B.commit rb cb ~parents:(List.map snd pk) ~date ~message
                    in
                    check ~block ~op ~what:"commit-hash" ~path:[] hex ha hb;
                    Ids.put_hash ids hash (ka, kb);
                    Hashtbl.replace by_n (block + 1) (ka, kb);
                    if !proofs > 0 && !read_paths <> [] then
                      prove_both ~block ~op ra rb ka kb (List.rev !read_paths)
                    else Lwt.return_unit
              in
              let rec exec_all op = function
                | [] -> Lwt.return_unit
                | r :: rest ->
                    let* () = in_context ~block ~op r (fun () -> exec op r) in
                    exec_all (op + 1) rest
              in
              let* () = exec_all 0 rows in
              let n = block + 1 in
              let* () =
                match gc_target n with
                | None ->
                    if !gc_every = 0 then Hashtbl.remove by_n n;
                    Lwt.return_unit
                | Some target ->
                    let ka, kb = Hashtbl.find by_n target in
                    let* sa = A.gc ra ka in
                    let+ sb = B.gc rb kb in
                    let count (started, skipped) s =
                      if s then incr started else incr skipped
                    in
                    count gcs_a sa;
                    count gcs_b sb;
                    Hashtbl.filter_map_inplace
                      (fun i v -> if i < target then None else Some v)
                      by_n
              in
              blocks_done := n;
              if !progress_every > 0 && n mod !progress_every = 0 then
                Printf.eprintf "%d blocks, %.1f s, %d results, %d divergences\n%!"
                  n (secs t_start (now ())) !compared !divergences;
              loop n
      and prove_both ~block ~op ra rb ka kb paths =
        (* a proof by each side, checked by the other; the values the
           verifier reads in the tree proved must be the writer's *)
        (* [proof] is the producer's, [other] the other side's same
           proof, each made once for both directions: when the producer
           cannot encode it (a step too long for the encoding), the
           other must refuse it too, and that agreement counts as one
           result *)
        let one ~what ~a_proves proof ~other verify ~producer_reads =
          match proof with
          | Error e -> (
              incr compared;
              let what = what ^ "-refused" in
              Hashtbl.replace compared_by_kind what
                (1 + Option.value ~default:0 (Hashtbl.find_opt compared_by_kind what));
              (* both refuse, and both because the encoding cannot
                 carry the proof: any other error is a divergence *)
              let said e = "refused: " ^ e in
              let ours, theirs =
                match other with Error e' -> (said e, said e') | Ok _ -> (said e, "produced")
              in
              match other with
              | Error e' when unencodable e && unencodable e' -> Lwt.return_unit
              | _ ->
                  let a, b = if a_proves then (ours, theirs) else (theirs, ours) in
                  diverge ~block ~op ~what ~path:(List.hd paths) a b;
                  Lwt.return_unit)
          | Ok proof ->
              let proof = if inject_proof then corrupt proof else proof in
              let* r = verify proof in
              incr compared;
              incr proofs_checked;
              Hashtbl.replace compared_by_kind what
                (1 + Option.value ~default:0 (Hashtbl.find_opt compared_by_kind what));
              match r with
              | Error e ->
                  diverge ~block ~op ~what ~path:(List.hd paths) "proof"
                    ("rejected: " ^ e);
                  Lwt.return_unit
              | Ok reads ->
                  let* own = producer_reads () in
                  (* each store's column shows what that store read: its own
                     commit for the producer, the tree proved for the other *)
                  List.iter2
                    (fun (p, in_proof) (_, own) ->
                      let a, b = if a_proves then (own, in_proof) else (in_proof, own) in
                      check ~block ~op ~what:(what ^ "-read") ~path:p
                        (show_opt show_value) a b)
                    reads own;
                  Lwt.return_unit
        in
        let reads_a () =
          let* c = A.checkout ra ka in
          Lwt_list.map_s (fun p -> let+ v = A.find c p in (p, v)) paths
        in
        let reads_b () =
          let* c = B.checkout rb kb in
          Lwt_list.map_s (fun p -> let+ v = B.find c p in (p, v)) paths
        in
        let* () =
          if PA.can_verify || PB.can_verify then
            let* pa = PA.produce ra ka paths in
            let* pb = PB.produce rb kb paths in
            let* () =
              if PB.can_verify then
                one ~what:(A.name ^ "-proof-in-" ^ B.name) ~a_proves:true pa ~other:pb
                  (fun pr -> PB.verify rb kb pr paths)
                  ~producer_reads:reads_a
              else Lwt.return_unit
            in
            if PA.can_verify then
              one ~what:(B.name ^ "-proof-in-" ^ A.name) ~a_proves:false pb ~other:pa
                (fun pr -> PA.verify ra ka pr paths)
                ~producer_reads:reads_b
            else Lwt.return_unit
          else Lwt.return_unit
        in
        if PA.can_stream && PB.can_stream then
          let* sa = PA.produce_stream ra ka paths in
          let* sb = PB.produce_stream rb kb paths in
          let* () =
            one ~what:(A.name ^ "-stream-in-" ^ B.name) ~a_proves:true sa ~other:sb
              (fun pr -> PB.verify_stream rb kb pr paths)
              ~producer_reads:reads_a
          in
          one ~what:(B.name ^ "-stream-in-" ^ A.name) ~a_proves:false sb ~other:sa
            (fun pr -> PA.verify_stream ra ka pr paths)
            ~producer_reads:reads_b
        else Lwt.return_unit
      in
      let* blocks = loop 0 in
      let* () = A.wait_gc ra in
      let* () = B.wait_gc rb in
      let* () = A.close ra in
      let+ () = B.close rb in
      blocks
    in
    let blocks, failed =
      try (Lwt_main.run (main ()), false)
      with e ->
        (* an error of either store is a divergence: the replay stops *)
        let s = match e with Replay_error s -> s | e -> Printexc.to_string e in
        incr divergences;
        Printf.printf "DIVERGENCE (replay stopped) %s\n%!" s;
        (!blocks_done, true)
    in
    cleanup ();
    let wall = secs t_start (now ()) in
    Printf.printf "trace %s\n" !trace_path;
    Printf.printf "stores %s and %s, gc every %d keep %d\n" A.name B.name
      !gc_every !gc_keep;
    if !gc_every > 0 then
      Printf.printf
        "collections started: %s %d (%d skipped, one running), %s %d (%d skipped)\n"
        A.name !(fst gcs_a) !(snd gcs_a) B.name !(fst gcs_b) !(snd gcs_b);
    Printf.printf "proofs checked %d (%s's in %s: %s, %s's in %s: %s), trace mismatches %d\n"
      !proofs_checked A.name B.name
      (if !proofs = 0 then "off" else if PB.can_verify then "yes" else "no verifier")
      B.name A.name
      (if !proofs = 0 then "off" else if PA.can_verify then "yes" else "no verifier")
      !trace_mismatches;
    if !root_unchecked > 0 then
      Printf.printf
        "note: %d recorded answers at the empty path not checked against the trace: under \
         --api context the empty path is data/, not the root (--api raw checks them)\n"
        !root_unchecked;
    Printf.printf "wall %.1f s, peak RSS %d kB\n" wall (vm_hwm_kb ());
    Printf.printf "results compared by kind: %s\n"
      (String.concat ", "
         (List.map
            (fun (w, n) -> Printf.sprintf "%s %d" w n)
            (List.sort compare
               (Hashtbl.fold (fun w n l -> (w, n) :: l) compared_by_kind []))));
    List.iter
      (fun (w, n) -> Printf.printf "divergences of %s: %d\n" w n)
      (List.sort compare (Hashtbl.fold (fun w n l -> (w, n) :: l) by_kind []));
    Printf.printf "duo: %d blocks, %d results compared, %d divergences\n%!"
      blocks !compared !divergences;
    if failed then 2 else if !divergences > 0 then 1 else 0
end

(* ------------------------------------------------------------------ solo *)

(* One store alone, doing exactly what the trace says (as bench.ml), timed.
   Rows are replayed as they are read (rows after the last commit too). *)
module Solo (S : STORE) = struct
  let run () =
    let next_row = row_reader !trace_path in
    let dir = store_dir S.name in
    let ops = ref 0 and mismatches = ref 0 in
    let block_s = ref [] in
    let t_start = now () in
    let main () =
      let* repo = S.open_repo dir in
      let ids = Ids.create (S.empty repo) in
      let by_n : (int, S.commit) Hashtbl.t = Hashtbl.create 16 in
      let rec loop block =
        if block >= !max_blocks then Lwt.return block
        else
          let t0 = now () in
          let rec replay_block op exec =
            match next_row () with
            | None -> Lwt.return false
            | Some r -> (
                let* () = in_context ~block ~op r (fun () -> exec r) in
                match r with
                | Def.Commit _ -> Lwt.return true
                | _ -> replay_block (op + 1) exec)
          in
          let take_ctx = Ids.take_ctx ~block ids and put_ctx = Ids.put_ctx ids in
          let read b r = if b <> r then incr mismatches in
          let exec = function
            | Def.Checkout (h, out) ->
                let k = Ids.take_hash ~block ids h in
                let+ c = S.checkout repo k in
                put_ctx out c
            | Def.Add { key; value; in_ctx_id; out_ctx_id } ->
                incr ops;
                let+ c = S.add (take_ctx in_ctx_id) key value in
                put_ctx out_ctx_id c
            | Def.Remove (key, in_ctx_id, out_ctx_id) ->
                incr ops;
                let+ c = S.remove (take_ctx in_ctx_id) key in
                put_ctx out_ctx_id c
            | Def.Copy { key_src; key_dst; in_ctx_id; out_ctx_id } -> (
                incr ops;
                let c = take_ctx in_ctx_id in
                let+ c' = S.copy c ~src:key_src ~dst:key_dst in
                put_ctx out_ctx_id (Option.value c' ~default:c))
            | Def.Find (key, b, c) ->
                incr ops;
                let+ r = S.find (take_ctx c) key in
                read b (Option.is_some r)
            | Def.Mem (key, b, c) ->
                incr ops;
                let+ r = S.mem (take_ctx c) key in
                read b r
            | Def.Mem_tree (key, b, c) ->
                incr ops;
                let+ r = S.mem_tree (take_ctx c) key in
                read b r
            | Def.Commit { hash; date; message; parents; in_ctx_id } ->
                let pk = Ids.take_hashes ~block ids parents in
                let c = take_ctx in_ctx_id in
                let+ k, _ = S.commit repo c ~parents:pk ~date ~message in
                Ids.put_hash ids hash k;
                Hashtbl.replace by_n (block + 1) k
          in
          let* committed = replay_block 0 exec in
          if not committed then Lwt.return block
          else
            let n = block + 1 in
          let* () =
            match gc_target n with
            | None ->
                if !gc_every = 0 then Hashtbl.remove by_n n;
                Lwt.return_unit
            | Some target ->
                let+ _ = S.gc repo (Hashtbl.find by_n target) in
                Hashtbl.filter_map_inplace
                  (fun i v -> if i < target then None else Some v)
                  by_n
          in
          block_s := secs t0 (now ()) :: !block_s;
          if !progress_every > 0 && n mod !progress_every = 0 then
            Printf.eprintf "%d blocks, %.1f s\n%!" n (secs t_start (now ()));
          loop n
      in
      let* blocks = loop 0 in
      let* () = S.wait_gc repo in
      let+ () = S.close repo in
      blocks
    in
    let blocks =
      try Lwt_main.run (main ())
      with Replay_error s ->
        Printf.printf "duo: error: %s\n%!" s;
        cleanup ();
        exit 2
    in
    let wall = secs t_start (now ()) in
    cleanup ();
    let hwm = vm_hwm_kb () in
    let bps = float blocks /. wall in
    let a = Array.of_list !block_s in
    Array.sort compare a;
    let pct p =
      let n = Array.length a in
      if n = 0 then nan
      else a.(max 0 (min (n - 1) (int_of_float (ceil (p *. float n)) - 1)))
    in
    let fields =
      [
        ("store", Printf.sprintf "%S" (S.name ^ " (duo --only)"));
        ("trace", Printf.sprintf "%S" !trace_path);
        ("blocks", string_of_int blocks);
        ("ops", string_of_int !ops);
        ("read_mismatches", string_of_int !mismatches);
        ("gc_every", string_of_int !gc_every);
        ("gc_keep", string_of_int !gc_keep);
        ("total_wall_s", Printf.sprintf "%.6f" wall);
        ("blocks_per_s", Printf.sprintf "%.3f" bps);
        ("block_p50_ms", Printf.sprintf "%.4f" (1000. *. pct 0.5));
        ("block_p99_ms", Printf.sprintf "%.4f" (1000. *. pct 0.99));
        ("block_max_ms", Printf.sprintf "%.4f" (1000. *. pct 1.0));
        ("max_rss_vmhwm_kb", string_of_int hwm);
      ]
    in
    List.iter (fun (k, v) -> Printf.printf "%-18s %s\n" k v) fields;
    if !json_path <> "" then (
      let oc = open_out !json_path in
      output_string oc "{\n";
      List.iteri
        (fun i (k, v) ->
          Printf.fprintf oc "  %S: %s%s\n" k v
            (if i = List.length fields - 1 then "" else ","))
        fields;
      output_string oc "}\n";
      close_out oc);
    Printf.printf "%s alone: %.1f blocks/s, peak RSS %d kB\n" S.name bps hwm;
    Printf.printf "duo: %d blocks, 0 results compared, 0 divergences\n%!" blocks;
    if !mismatches > 0 then 1 else 0
end
