(* Trees proved by a tree proof (Octez's Proof_types.tree), decoded from
   Merkle_proof_encoding.V1.Tree32 and hashed as Tezos hashes them, for
   verify_tree_proof: the binding has no verifier. Reads reaching a blinded
   part raise Pando.Error; writes are supported in flat directories (at most
   256 entries, no inode), where the hash of the result can be computed. *)

type hash = bytes

type tree =
  | Value of bytes
  | Blinded_value of hash
  | Node of (string * tree) list
  | Blinded_node of hash
  | Inode of inode_tree inode
  | Extender of inode_tree extender

and inode_tree =
  | Blinded_inode of hash
  | Inode_values of (string * tree) list
  | Inode_tree of inode_tree inode
  | Inode_extender of inode_tree extender

and 'a inode = {length : int; proofs : (int * 'a) list}

and 'a extender = {elength : int; segment : int list; proof : 'a}

let blinded path = raise (Pando.Error ("the proof blinds " ^ String.concat "/" path ^ ", which the computation needs"))

let bad why = raise (Pando.Error ("malformed proof: " ^ why))

(* ------------------------------------------------------------ decoding *)

module R = struct
  type t = {b : bytes; mutable at : int}

  let need r n =
    if n < 0 || r.at + n > Bytes.length r.b then
      raise (Pando.Error (Printf.sprintf "proof truncated at byte %d" r.at))

  let u8 r =
    need r 1 ;
    let c = Bytes.get_uint8 r.b r.at in
    r.at <- r.at + 1 ;
    c

  let fixed r n =
    need r n ;
    let x = Bytes.sub r.b r.at n in
    r.at <- r.at + n ;
    x

  let size r =
    need r 4 ;
    let n = Int32.to_int (Bytes.get_int32_be r.b r.at) in
    r.at <- r.at + 4 ;
    if n < 0 || n >= 1 lsl 30 then bad "size" ;
    n

  let int64 r =
    need r 8 ;
    let x = Bytes.get_int64_be r.b r.at in
    r.at <- r.at + 8 ;
    if Int64.compare x 0L < 0 || Int64.compare x (Int64.of_int max_int) > 0 then bad "length" ;
    Int64.to_int x
end

let unpack_segment b =
  let n = Bytes.length b in
  if n = 0 then bad "empty segment" ;
  let last = Bytes.get_uint8 b (n - 1) in
  if last = 0 then bad "segment" ;
  let rec trailing i = if last land (1 lsl i) <> 0 then i else trailing (i + 1) in
  let bits = (n * 8) - (trailing 0 + 1) in
  if bits mod 5 <> 0 then bad "segment length" ;
  List.init (bits / 5) (fun k ->
      let v = ref 0 in
      for j = 0 to 4 do
        let bit = (5 * k) + j in
        let byte = Bytes.get_uint8 b (bit / 8) in
        v := (!v lsl 1) lor ((byte lsr (7 - (bit mod 8))) land 1)
      done ;
      !v)

let max_depth = 512

let rec tree r depth : tree =
  if depth > max_depth then bad "too deep" ;
  match R.u8 r with
  | 0 -> Value (R.fixed r (R.size r))
  | 1 -> Blinded_value (R.fixed r 32)
  | 2 -> Node (steps r depth)
  | 3 -> Blinded_node (R.fixed r 32)
  | 4 -> Inode (inode r depth)
  | 5 -> Extender (extender r depth)
  | t -> bad (Printf.sprintf "tree tag %d" t)

and steps r depth =
  let size = R.size r in
  let stop = r.R.at + size in
  R.need r size ;
  let rec go acc =
    if r.R.at >= stop then List.rev acc
    else
      let step = Bytes.to_string (R.fixed r (R.u8 r)) in
      let t = tree r (depth + 1) in
      go ((step, t) :: acc)
  in
  let l = go [] in
  if r.R.at <> stop then bad "list size" ;
  l

and inode_tree r depth : inode_tree option =
  if depth > max_depth then bad "too deep" ;
  match R.u8 r with
  | 0 -> Some (Blinded_inode (R.fixed r 32))
  | 1 -> Some (Inode_values (steps r depth))
  | 2 -> Some (Inode_tree (inode r depth))
  | 3 -> Some (Inode_extender (extender r depth))
  | 4 -> None
  | t -> bad (Printf.sprintf "inode tree tag %d" t)

and required r depth = match inode_tree r depth with Some t -> t | None -> bad "missing inode"

and inode r depth =
  let length = R.int64 r in
  match R.u8 r with
  | 0 ->
      let size = R.size r in
      let stop = r.R.at + size in
      R.need r size ;
      let rec go acc =
        if r.R.at >= stop then List.rev acc
        else
          let i = R.u8 r in
          go ((i, required r (depth + 1)) :: acc)
      in
      let proofs = go [] in
      if r.R.at <> stop then bad "inode size" ;
      {length; proofs}
  | 1 ->
      let proofs =
        List.concat
          (List.init 32 (fun i -> match inode_tree r (depth + 1) with Some t -> [(i, t)] | None -> []))
      in
      {length; proofs}
  | t -> bad (Printf.sprintf "inode proofs tag %d" t)

and extender r depth =
  let elength = R.int64 r in
  let segment = unpack_segment (R.fixed r (R.u8 r)) in
  {elength; segment; proof = required r (depth + 1)}

type proof = {version : int; before : int * hash; after : int * hash; state : tree}

let decode b =
  let r = {R.b; at = 0} in
  R.need r 2 ;
  let version = Bytes.get_uint16_be b 0 in
  r.R.at <- 2 ;
  let kinded () =
    let k = R.u8 r in
    if k > 1 then bad "kinded hash tag" ;
    (k, R.fixed r 32)
  in
  let before = kinded () in
  let after = kinded () in
  let state = tree r 0 in
  if r.R.at <> Bytes.length b then
    raise (Pando.Error (Printf.sprintf "%d bytes after the end of the proof" (Bytes.length b - r.R.at))) ;
  {version; before; after; state}

(* ------------------------------------------------------------- hashing *)

let b2b = Blake2b.digest ~size:32

let be64 buf n =
  let b = Bytes.create 8 in
  Bytes.set_int64_be b 0 (Int64.of_int n) ;
  Buffer.add_bytes buf b

let rec leb buf n =
  if n < 0x80 then Buffer.add_uint8 buf n
  else (
    Buffer.add_uint8 buf (n land 0x7f lor 0x80) ;
    leb buf (n lsr 7))

let is_contents = function Value _ | Blinded_value _ -> true | _ -> false

let contents_hash v =
  let buf = Buffer.create (Bytes.length v + 8) in
  be64 buf (Bytes.length v) ;
  Buffer.add_bytes buf v ;
  b2b (Buffer.to_bytes buf)

let sort_entries l = List.sort (fun (a, _) (b, _) -> String.compare a b) l

let rec hash = function
  | Value v -> contents_hash v
  | Blinded_value h | Blinded_node h -> h
  | Node entries ->
      let entries = sort_entries entries in
      let buf = Buffer.create 256 in
      be64 buf (List.length entries) ;
      List.iter
        (fun (name, t) ->
          Buffer.add_string buf (if is_contents t then "\255\000\000\000\000\000\000\000" else "\000\000\000\000\000\000\000\000") ;
          leb buf (String.length name) ;
          Buffer.add_string buf name ;
          be64 buf 32 ;
          Buffer.add_bytes buf (hash t))
        entries ;
      b2b (Buffer.to_bytes buf)
  | Inode i -> inode_hash 0 (Inode_tree i)
  | Extender e -> inode_hash 0 (Inode_extender e)

and inode_hash depth = function
  | Blinded_inode h -> h
  | Inode_values entries ->
      let entries = sort_entries entries in
      let buf = Buffer.create 256 in
      Buffer.add_uint8 buf 0 ;
      leb buf (List.length entries) ;
      List.iter
        (fun (name, t) ->
          leb buf (String.length name) ;
          Buffer.add_string buf name ;
          Buffer.add_uint8 buf (if is_contents t then 1 else 0) ;
          Buffer.add_bytes buf (hash t))
        entries ;
      b2b (Buffer.to_bytes buf)
  | Inode_tree {length; proofs} ->
      tree_inode_hash depth length (List.map (fun (i, c) -> (i, inode_hash (depth + 1) c)) proofs)
  | Inode_extender {elength; segment; proof} ->
      let rec go depth = function
        | [] -> inode_hash depth proof
        | i :: rest -> tree_inode_hash depth elength [(i, go (depth + 1) rest)]
      in
      go depth segment

and tree_inode_hash depth length pointers =
  let pointers = List.sort (fun (a, _) (b, _) -> compare a b) pointers in
  let buf = Buffer.create 256 in
  Buffer.add_uint8 buf 1 ;
  leb buf depth ;
  leb buf length ;
  Buffer.add_uint8 buf (List.length pointers) ;
  List.iter
    (fun (i, h) ->
      Buffer.add_uint8 buf i ;
      Buffer.add_bytes buf h)
    pointers ;
  b2b (Buffer.to_bytes buf)

let kind_code t = if is_contents t then 0 else 1

(* --------------------------------------------------------------- reads *)

let index depth step = Hashtbl.seeded_hash depth step mod 32

(* The entry [step] of the directory [t] ([path] for messages): [None] if
   absent or if [t] is a value. *)
let child path t step =
  let rec in_inode depth = function
    | Blinded_inode _ -> blinded (path @ [step])
    | Inode_values l -> List.assoc_opt step l
    | Inode_tree {proofs; _} -> (
        match List.assoc_opt (index depth step) proofs with
        | None -> None
        | Some c -> in_inode (depth + 1) c)
    | Inode_extender {segment; proof; _} ->
        let rec go depth = function
          | [] -> in_inode depth proof
          | i :: rest -> if index depth step = i then go (depth + 1) rest else None
        in
        go depth segment
  in
  match t with
  | Value _ | Blinded_value _ -> None
  | Blinded_node _ -> blinded path
  | Node l -> List.assoc_opt step l
  | Inode i -> in_inode 0 (Inode_tree i)
  | Extender e -> in_inode 0 (Inode_extender e)

let find_tree t key =
  let rec go path t = function
    | [] -> Some t
    | step :: rest -> (
        match child path t step with None -> None | Some c -> go (path @ [step]) c rest)
  in
  go [] t key

(* All entries of a directory, sorted by name. *)
let entries path t =
  let rec of_inode = function
    | Blinded_inode _ -> blinded path
    | Inode_values l -> l
    | Inode_tree {proofs; _} -> List.concat_map (fun (_, c) -> of_inode c) proofs
    | Inode_extender {proof; _} -> of_inode proof
  in
  match t with
  | Value _ | Blinded_value _ -> []
  | Blinded_node _ -> blinded path
  | Node l -> sort_entries l
  | Inode i -> sort_entries (of_inode (Inode_tree i))
  | Extender e -> sort_entries (of_inode (Inode_extender e))

let length path t =
  match t with
  | Value _ | Blinded_value _ -> 0
  | Blinded_node _ -> blinded path
  | Node l -> List.length l
  | Inode {length; _} -> length
  | Extender {elength; _} -> elength

let value path = function
  | Value v -> Some v
  | Blinded_value _ -> blinded path
  | _ -> None

(* -------------------------------------------------------------- writes *)

let unchangeable path =
  raise
    (Pando.Error
       ("pando cannot change the large directory " ^ String.concat "/" path
      ^ " of a proved tree (only directories of at most 256 entries)"))

(* [update t key f]: [t] with the subtree at [key] replaced by [f] of the
   one there ([None]: absent); [None] if the result is an empty directory,
   removed from its parent as irmin does. *)
let rec update path t key f =
  match key with
  | [] -> f (Some t)
  | step :: rest ->
      let entries =
        match t with
        | Node l -> l
        | Value _ | Blinded_value _ -> []
        | Blinded_node _ -> blinded path
        | Inode _ | Extender _ -> unchangeable path
      in
      let old = List.assoc_opt step entries in
      let sub =
        match old with
        | Some c -> update (path @ [step]) c rest f
        | None -> update (path @ [step]) (Node []) rest f
      in
      let others = List.remove_assoc step entries in
      let l = match sub with None -> others | Some c -> sort_entries ((step, c) :: others) in
      if List.length l > 256 then unchangeable path ;
      if l = [] && path <> [] then None else Some (Node l)

let add t key v = match update [] t key (fun _ -> Some v) with Some t -> t | None -> Node []

let remove t key = match update [] t key (fun _ -> None) with Some t -> t | None -> Node []
