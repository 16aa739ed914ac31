(* Octez's binary encoding of tree proofs, Merkle_proof_encoding.V1.Tree32
   (src/lib_context/merkle_proof_encoding/ in Octez), to and from irmin
   3.7.2's [Tree.Proof.t] for Irmin_tezos: irmin has the type but no binary
   codec, and Octez's codec is built on Data_encoding, which the duo does
   not link. Layout (big-endian; u30 = a 4-byte size of what follows):

     proof      = int16 version (0) | kinded before | kinded after | tree
     kinded     = 00 hash (contents) | 01 hash (node)
     tree       = 00 u30 bytes            Contents
                | 01 hash                 Blinded_contents
                | 02 u30 (step tree)*     Node
                | 03 hash                 Blinded_node
                | 04 inode                Inode
                | 05 extender             Extender
     inode_tree = 00 hash | 01 u30 (step tree)* | 02 inode | 03 extender
     inode      = int64 length | 00 u30 (u8 index inode_tree)*   (< 16 children)
                               | 01 32 x (inode_tree | 04)         (>= 16)
     extender   = int64 length | u8 n | n bytes of 5-bit indices, then a
                  1 bit and zero padding | inode_tree
     step       = u8 n | n bytes

   Then the two checks of the duo: irmin verifying a proof pando made, and
   irmin producing one for pando to verify (Irmin_store's PROOFS). *)

open Lwt.Syntax
module Store = Irmin_tezos.Store
module P = Store.Tree.Proof

exception Bad of string

let bad pos fmt = Printf.ksprintf (fun s -> raise (Bad (Printf.sprintf "byte %d: %s" pos s))) fmt

(* ---------------------------------------------------------------- decode *)

type reader = { s : string; mutable pos : int }

let take r n =
  if n < 0 || r.pos + n > String.length r.s then bad r.pos "truncated (%d bytes wanted)" n;
  let v = String.sub r.s r.pos n in
  r.pos <- r.pos + n;
  v

let byte r = Char.code (take r 1).[0]
let be r n =
  let s = take r n in
  let v = ref 0 in
  String.iter (fun c -> v := (!v lsl 8) lor Char.code c) s;
  !v

let hash r = Store.Hash.unsafe_of_raw_string (take r 32)

let kinded r =
  match byte r with
  | 0 -> `Contents (hash r, ())
  | 1 -> `Node (hash r)
  | t -> bad (r.pos - 1) "kinded hash tag %d" t

let unpack_segment pos s =
  let n = String.length s in
  if n = 0 then bad pos "empty segment";
  let last = Char.code s.[n - 1] in
  if last = 0 then bad pos "segment without its closing bit";
  let rec tz i = if last land (1 lsl i) <> 0 then i else tz (i + 1) in
  let bits = (n * 8) - (tz 0 + 1) in
  if bits mod 5 <> 0 then bad pos "segment of %d bits" bits;
  List.init (bits / 5) (fun k ->
      let v = ref 0 in
      for b = k * 5 to (k * 5) + 4 do
        v := (!v lsl 1) lor ((Char.code s.[b / 8] lsr (7 - (b mod 8))) land 1)
      done;
      !v)

let rec tree r : P.tree =
  let at = r.pos in
  match byte r with
  | 0 ->
      let n = be r 4 in
      P.Contents (Bytes.of_string (take r n), ())
  | 1 -> P.Blinded_contents (hash r, ())
  | 2 -> P.Node (steps r)
  | 3 -> P.Blinded_node (hash r)
  | 4 -> P.Inode (inode r)
  | 5 -> P.Extender (extender r)
  | t -> bad at "tree tag %d" t

and steps r =
  let n = be r 4 in
  let stop = r.pos + n in
  let rec go acc =
    if r.pos >= stop then (
      if r.pos > stop then bad r.pos "entries overrun their size";
      List.rev acc)
    else
      let step = take r (byte r) in
      let t = tree r in
      go ((step, t) :: acc)
  in
  go []

and inode_tree r : P.inode_tree =
  let at = r.pos in
  match byte r with
  | 0 -> P.Blinded_inode (hash r)
  | 1 -> P.Inode_values (steps r)
  | 2 -> P.Inode_tree (inode r)
  | 3 -> P.Inode_extender (extender r)
  | t -> bad at "inode tree tag %d" t

and inode r : P.inode_tree P.inode =
  let length = be r 8 in
  let at = r.pos in
  match byte r with
  | 0 ->
      let n = be r 4 in
      let stop = r.pos + n in
      let rec go acc =
        if r.pos >= stop then List.rev acc
        else
          let i = byte r in
          let t = inode_tree r in
          go ((i, t) :: acc)
      in
      { length; proofs = go [] }
  | 1 ->
      let proofs = ref [] in
      for i = 0 to 31 do
        if r.s.[r.pos] = '\004' then r.pos <- r.pos + 1
        else proofs := (i, inode_tree r) :: !proofs
      done;
      { length; proofs = List.rev !proofs }
  | t -> bad at "inode proofs tag %d" t

and extender r : P.inode_tree P.inode_extender =
  let length = be r 8 in
  let at = r.pos in
  let segments = unpack_segment at (take r (byte r)) in
  let proof = inode_tree r in
  { length; segments; proof }

let decode s : P.tree P.t =
  let r = { s; pos = 0 } in
  try
    let version = be r 2 in
    if version <> 0 then bad 0 "version %d (a Tree32 tree proof is 0)" version;
    let before = kinded r in
    let after = kinded r in
    let state = tree r in
    if r.pos <> String.length s then bad r.pos "%d trailing bytes" (String.length s - r.pos);
    P.v ~before ~after state
  with Invalid_argument _ -> bad r.pos "truncated"

(* ---------------------------------------------------------------- encode *)

(* A proof the encoding cannot carry: a step (or segment) is written after
   a one-byte length, so one of 256 bytes or more has no encoding; it is
   refused with this error, as pando's encoder refuses it. *)
exception Unencodable of string

let short b s =
  let n = String.length s in
  if n > 255 then
    raise (Unencodable (Printf.sprintf "a step of %d bytes (at most 255)" n));
  Buffer.add_char b (Char.chr n);
  Buffer.add_string b s

let pack_segment l =
  let out = Buffer.create 8 in
  let acc = ref 0 and bits = ref 0 in
  List.iter
    (fun i ->
      acc := (!acc lsl 5) lor (i land 31);
      bits := !bits + 5;
      if !bits >= 8 then (
        bits := !bits - 8;
        Buffer.add_char out (Char.chr ((!acc lsr !bits) land 255));
        acc := !acc land ((1 lsl !bits) - 1)))
    l;
  acc := (!acc lsl 1) lor 1;
  incr bits;
  Buffer.add_char out (Char.chr ((!acc lsl (8 - !bits)) land 255));
  Buffer.contents out

let encode (p : P.tree P.t) =
  let u8 b v = Buffer.add_char b (Char.chr v) in
  let be b n v = for i = n - 1 downto 0 do u8 b ((v lsr (8 * i)) land 255) done in
  let hash b h = Buffer.add_string b (Store.Hash.to_raw_string h) in
  (* what [f] writes, after its size on 4 bytes *)
  let sized b f =
    let sub = Buffer.create 256 in
    f sub;
    be b 4 (Buffer.length sub);
    Buffer.add_buffer b sub
  in
  let short b s = short b s in
  let kinded b = function
    | `Contents (h, ()) -> u8 b 0; hash b h
    | `Node h -> u8 b 1; hash b h
  in
  let rec tree b : P.tree -> unit = function
    | Contents (v, ()) -> u8 b 0; sized b (fun b -> Buffer.add_bytes b v)
    | Blinded_contents (h, ()) -> u8 b 1; hash b h
    | Node l -> u8 b 2; sized b (fun b -> steps b l)
    | Blinded_node h -> u8 b 3; hash b h
    | Inode i -> u8 b 4; inode b i
    | Extender e -> u8 b 5; extender b e
  and steps b l = List.iter (fun (s, t) -> short b s; tree b t) l
  and inode_tree b : P.inode_tree -> unit = function
    | Blinded_inode h -> u8 b 0; hash b h
    | Inode_values l -> u8 b 1; sized b (fun b -> steps b l)
    | Inode_tree i -> u8 b 2; inode b i
    | Inode_extender e -> u8 b 3; extender b e
  and inode b (i : P.inode_tree P.inode) =
    be b 8 i.length;
    if List.length i.proofs < 16 then (
      u8 b 0;
      sized b (fun b -> List.iter (fun (k, t) -> u8 b k; inode_tree b t) i.proofs))
    else (
      u8 b 1;
      for k = 0 to 31 do
        match List.assoc_opt k i.proofs with
        | Some t -> inode_tree b t
        | None -> u8 b 4
      done)
  and extender b (e : P.inode_tree P.inode_extender) =
    be b 8 e.length;
    short b (pack_segment e.segments);
    inode_tree b e.proof
  in
  let b = Buffer.create 4096 in
  be b 2 0;
  kinded b (P.before p);
  kinded b (P.after p);
  tree b (P.state p);
  Buffer.contents b

(* ---------------------------------------------------------- streams *)

(* Stream proofs, V1 Tree32 (version 1):
     proof = int16 version | kinded before | kinded after | u30 (elt)*
     elt   = 00 u30 bytes                                   Contents
           | 01 u30 (step kinded)*                          Node
           | 02 int64 length | 00 u30 (u8 index 01 hash)*  (< 16 children)
                             | 01 32 x (00 | 01 hash)      Inode
           | 03 int64 length | u8 n segment | hash        Inode_extender *)

let decode_stream s : P.stream P.t =
  let r = { s; pos = 0 } in
  try
    let version = be r 2 in
    if version <> 1 then bad 0 "version %d (a Tree32 stream proof is 1)" version;
    let before = kinded r in
    let after = kinded r in
    let n = be r 4 in
    let stop = r.pos + n in
    let elt () : P.elt =
      let at = r.pos in
      match byte r with
      | 0 ->
          let n = be r 4 in
          P.Contents (Bytes.of_string (take r n))
      | 1 ->
          let n = be r 4 in
          let stop = r.pos + n in
          let rec go acc =
            if r.pos >= stop then List.rev acc
            else
              let step = take r (byte r) in
              let k = kinded r in
              go ((step, k) :: acc)
          in
          P.Node (go [])
      | 2 -> (
          let length = be r 8 in
          let at = r.pos in
          let some () =
            match byte r with
            | 1 -> hash r
            | t -> bad (r.pos - 1) "option tag %d in a sparse inode" t
          in
          match byte r with
          | 0 ->
              let n = be r 4 in
              let stop = r.pos + n in
              let rec go acc =
                if r.pos >= stop then List.rev acc
                else
                  let i = byte r in
                  let h = some () in
                  go ((i, h) :: acc)
              in
              P.Inode { length; proofs = go [] }
          | 1 ->
              let proofs = ref [] in
              for i = 0 to 31 do
                match byte r with
                | 0 -> ()
                | 1 -> proofs := (i, hash r) :: !proofs
                | t -> bad (r.pos - 1) "option tag %d in a dense inode" t
              done;
              P.Inode { length; proofs = List.rev !proofs }
          | t -> bad at "inode proofs tag %d" t)
      | 3 ->
          let length = be r 8 in
          let at = r.pos in
          let segments = unpack_segment at (take r (byte r)) in
          let proof = hash r in
          P.Inode_extender { length; segments; proof }
      | t -> bad at "stream element tag %d" t
    in
    let rec go acc = if r.pos >= stop then List.rev acc else go (elt () :: acc) in
    let elts = go [] in
    if r.pos <> String.length s then bad r.pos "%d trailing bytes" (String.length s - r.pos);
    P.v ~before ~after (List.to_seq elts)
  with Invalid_argument _ -> bad r.pos "truncated"

let encode_stream (p : P.stream P.t) =
  let u8 b v = Buffer.add_char b (Char.chr v) in
  let be b n v = for i = n - 1 downto 0 do u8 b ((v lsr (8 * i)) land 255) done in
  let hash b h = Buffer.add_string b (Store.Hash.to_raw_string h) in
  let sized b f =
    let sub = Buffer.create 256 in
    f sub;
    be b 4 (Buffer.length sub);
    Buffer.add_buffer b sub
  in
  let short b s = short b s in
  let kinded b = function
    | `Contents (h, ()) -> u8 b 0; hash b h
    | `Node h -> u8 b 1; hash b h
  in
  let elt b : P.elt -> unit = function
    | Contents v -> u8 b 0; sized b (fun b -> Buffer.add_bytes b v)
    | Node l -> u8 b 1; sized b (fun b -> List.iter (fun (s, k) -> short b s; kinded b k) l)
    | Inode i ->
        u8 b 2;
        be b 8 i.length;
        if List.length i.proofs < 16 then (
          u8 b 0;
          sized b (fun b -> List.iter (fun (k, h) -> u8 b k; u8 b 1; hash b h) i.proofs))
        else (
          u8 b 1;
          for k = 0 to 31 do
            match List.assoc_opt k i.proofs with
            | Some h -> u8 b 1; hash b h
            | None -> u8 b 0
          done)
    | Inode_extender e ->
        u8 b 3;
        be b 8 e.length;
        short b (pack_segment e.segments);
        hash b e.proof
  in
  let b = Buffer.create 4096 in
  be b 2 1;
  kinded b (P.before p);
  kinded b (P.after p);
  sized b (fun b -> Seq.iter (elt b) (P.state p));
  Buffer.contents b

(* -------------------------------------------------- irmin's PROOFS side *)

type repo = Store.repo
type commit = Store.commit_key

let root repo key =
  let+ c = Store.Commit.of_key repo key in
  match c with
  | Some c -> Store.Commit.tree c
  | None -> failwith "irmin: proof of an unknown commit"

let reads paths t =
  Lwt_list.map_s
    (fun p ->
      let+ v = Store.Tree.find t (Irmin_store.k p) in
      (p, Option.map Bytes.to_string v))
    paths

(* The encoded proof [produce] makes of reading [paths] in commit [key]. *)
let produce_with produce encode repo key paths =
  let* t = root repo key in
  match Store.Tree.key t with
  | None -> failwith "irmin: a committed tree without a key"
  | Some k ->
      let+ proof, _ =
        produce repo k (fun t ->
            let+ r = reads paths t in
            (t, r))
      in
      match encode proof with
      | bytes -> Ok bytes
      | exception Unencodable e -> Error ("cannot encode: " ^ e)

let produce = produce_with Store.Tree.produce_proof encode

let check_before p expected k =
  match P.before p with
  | `Node h when Irmin.Type.(unstage (equal Store.Hash.t)) h expected -> k ()
  | _ -> Lwt.return (Error "its before hash is not the commit's tree hash")

(* The values of [paths] read in the proof [decode] gives, checked by
   [verify] against commit [key]'s tree hash. *)
let verify_with decode verify repo key proof paths =
  let* t = root repo key in
  let expected = Store.Tree.hash t in
  match decode proof with
  | exception Bad e -> Lwt.return (Error ("undecodable: " ^ e))
  | p ->
      check_before p expected (fun () ->
          let+ r =
            verify p (fun t ->
                let+ r = reads paths t in
                (t, r))
          in
          match r with
          | Ok (_, r) -> Ok r
          | Error (`Proof_mismatch e | `Stream_too_long e | `Stream_too_short e)
            ->
              Error e)

let verify repo key proof paths =
  verify_with decode Store.Tree.verify_proof repo key proof paths

let can_verify = true
let can_stream = true
let produce_stream = produce_with Store.Tree.produce_stream encode_stream

let verify_stream repo key proof paths =
  verify_with decode_stream Store.Tree.verify_stream repo key proof paths
