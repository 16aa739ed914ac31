(* An IrmRepBT trace's rows decoded by hand: the same rows as irmin's
   reader (Trace_definitions.Replayable_trace.open_reader, through Repr)
   gives, at a fraction of its cost, so that the driver's own time weighs
   less beside a store's. `duo --check-reader TRACE` reads a trace with
   both and compares every row (scripts/test.sh runs it on its traces).

   The format (Repr's binary encoding, as pando-core's trace.rs reads it
   too): after the magic "IrmRepBT", a 32-bit big-endian version (0) and
   the header (a varint length, 0, and nothing), each row is a varint
   length and the row: a varint tag, then its fields in order; strings
   and lists are a varint count and their items, a scope is a byte (0
   Forget, 1 Keep) and its value, an int64 is 8 bytes big-endian, a bool
   a byte (0 or 0xff). *)

module Def = Trace_definitions.Replayable_trace

type reader = { chan : in_channel; mutable buf : Bytes.t; mutable pos : int; mutable len : int }

let fail r what =
  failwith (Printf.sprintf "trace: %s at byte %d of a %d-byte row" what r.pos r.len)

let byte r =
  if r.pos >= r.len then fail r "truncated row";
  let b = Bytes.unsafe_get r.buf r.pos in
  r.pos <- r.pos + 1;
  Char.code b

let varint r =
  let rec go acc shift =
    if shift > 56 then fail r "varint too long";
    let b = byte r in
    let acc = acc lor ((b land 0x7f) lsl shift) in
    if b land 0x80 = 0 then acc else go acc (shift + 7)
  in
  go 0 0

let string r =
  let n = varint r in
  if n > r.len - r.pos then fail r "string past the row's end";
  let s = Bytes.sub_string r.buf r.pos n in
  r.pos <- r.pos + n;
  s

let list r item =
  let n = varint r in
  if n > r.len - r.pos then fail r "list past the row's end";
  List.init n (fun _ -> item r)

let int64 r =
  if r.len - r.pos < 8 then fail r "truncated int64";
  let v = Bytes.get_int64_be r.buf r.pos in
  r.pos <- r.pos + 8;
  v

let bool r =
  match byte r with 0 -> false | 0xff -> true | _ -> fail r "bad bool"

let scope r value : _ Def.scope =
  match byte r with
  | 0 -> Forget (value r)
  | 1 -> Keep (value r)
  | _ -> fail r "bad scope"

let key r = list r string

let row r : Def.row =
  match varint r with
  | 0 ->
      let h = scope r string in
      Checkout (h, scope r int64)
  | 1 ->
      let key = key r in
      let value = string r in
      let in_ctx_id = scope r int64 in
      Add { key; value; in_ctx_id; out_ctx_id = scope r int64 }
  | 2 ->
      let k = key r in
      let i = scope r int64 in
      Remove (k, i, scope r int64)
  | 3 ->
      let key_src = key r in
      let key_dst = key r in
      let in_ctx_id = scope r int64 in
      Copy { key_src; key_dst; in_ctx_id; out_ctx_id = scope r int64 }
  | (4 | 5 | 6) as tag -> (
      let k = key r in
      let b = bool r in
      let c = scope r int64 in
      match tag with 4 -> Find (k, b, c) | 5 -> Mem (k, b, c) | _ -> Mem_tree (k, b, c))
  | 7 ->
      let hash = scope r string in
      let date = int64 r in
      let message = string r in
      let parents = list r (fun r -> scope r string) in
      Commit { hash; date; message; parents; in_ctx_id = scope r int64 }
  | tag -> fail r (Printf.sprintf "unknown row tag %d" tag)

(* A varint read from the channel (the row's length); None at the end of
   the file before its first byte. *)
let chan_varint chan =
  let rec go acc shift =
    let b = input_byte chan in
    let acc = acc lor ((b land 0x7f) lsl shift) in
    if b land 0x80 = 0 then acc else go acc (shift + 7)
  in
  match input_byte chan with
  | exception End_of_file -> None
  | b when b land 0x80 = 0 -> Some b
  | b -> Some (go (b land 0x7f) 7)

(* The rows of the trace at [path], one per call, None after the last. *)
let open_reader path =
  let chan = open_in_bin path in
  let magic = really_input_string chan 8 in
  if magic <> "IrmRepBT" then failwith (path ^ ": not an IrmRepBT trace");
  let version = Bytes.get_int32_be (Bytes.of_string (really_input_string chan 4)) 0 in
  if version <> 0l then failwith (Printf.sprintf "%s: trace version %ld (only 0)" path version);
  (match chan_varint chan with
  | Some 0 -> ()
  | _ -> failwith (path ^ ": a header that is not empty"));
  let r = { chan; buf = Bytes.create 4096; pos = 0; len = 0 } in
  let truncated () = failwith (path ^ ": the trace ends inside a row") in
  fun () ->
    match chan_varint r.chan with
    | exception End_of_file -> truncated ()
    | None -> None
    | Some len ->
        if len > Bytes.length r.buf then r.buf <- Bytes.create (max len (2 * Bytes.length r.buf));
        (try really_input r.chan r.buf 0 len with End_of_file -> truncated ());
        r.pos <- 0;
        r.len <- len;
        let row = row r in
        if r.pos <> len then fail r "bytes left after the row";
        Some row
