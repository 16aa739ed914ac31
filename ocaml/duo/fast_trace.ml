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

(* The file is read in large chunks into [buf], whose bytes [0, fill) are
   read; rows are decoded in place: the current row is [start, len) and
   [pos] the next byte to decode (the channel is not touched per byte,
   whose lock and calls cost more than the decoding). *)
type reader = {
  chan : in_channel;
  mutable buf : Bytes.t;
  mutable start : int;
  mutable pos : int;
  mutable len : int;
  mutable fill : int;
}

let fail r what =
  failwith
    (Printf.sprintf "trace: %s at byte %d of a %d-byte row" what (r.pos - r.start)
       (r.len - r.start))

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

let chunk = 1 lsl 20

(* At least [n] bytes from [r.pos] in the buffer, reading more when
   needed (what is left moves to the front); fewer only at the end of
   the file. *)
let ensure r n =
  if r.fill - r.pos < n then begin
    let left = r.fill - r.pos in
    let size = max (Bytes.length r.buf) (n + chunk) in
    let buf = if size > Bytes.length r.buf then Bytes.create size else r.buf in
    Bytes.blit r.buf r.pos buf 0 left;
    r.buf <- buf;
    r.pos <- 0;
    r.fill <- left;
    let rec more () =
      if r.fill < n then
        let got = input r.chan r.buf r.fill (Bytes.length r.buf - r.fill) in
        if got > 0 then begin
          r.fill <- r.fill + got;
          more ()
        end
    in
    more ()
  end;
  r.fill - r.pos >= n

(* The row's length, a varint; None at the end of the file before its
   first byte. *)
let row_length r truncated =
  ignore (ensure r 10);
  if r.pos >= r.fill then None
  else
    let rec go acc shift =
      if r.pos >= r.fill then truncated ();
      if shift > 56 then failwith "trace: a row's length is too long a varint";
      let b = Char.code (Bytes.unsafe_get r.buf r.pos) in
      r.pos <- r.pos + 1;
      let acc = acc lor ((b land 0x7f) lsl shift) in
      if b land 0x80 = 0 then acc else go acc (shift + 7)
    in
    Some (go 0 0)

(* The rows of the trace at [path], one per call, None after the last. *)
let open_reader path =
  let chan = open_in_bin path in
  let magic = really_input_string chan 8 in
  if magic <> "IrmRepBT" then failwith (path ^ ": not an IrmRepBT trace");
  let version = Bytes.get_int32_be (Bytes.of_string (really_input_string chan 4)) 0 in
  if version <> 0l then failwith (Printf.sprintf "%s: trace version %ld (only 0)" path version);
  let r = { chan; buf = Bytes.create chunk; start = 0; pos = 0; len = 0; fill = 0 } in
  let truncated () = failwith (path ^ ": the trace ends inside a row") in
  (match row_length r truncated with
  | Some 0 -> ()
  | _ -> failwith (path ^ ": a header that is not empty"));
  fun () ->
    match row_length r truncated with
    | None -> None
    | Some len ->
        if not (ensure r len) then truncated ();
        r.start <- r.pos;
        r.len <- r.pos + len;
        let row = row r in
        if r.pos <> r.len then fail r "bytes left after the row";
        Some row
