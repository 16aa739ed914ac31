(* Base58check (Bitcoin's alphabet, checksum the first 4 bytes of a double
   SHA-256), for the branch Octez names after a chain id: its
   [Chain_id.to_b58check], prefix "Net". The binding's own base58 encodes
   context hashes only ([Pando.Hash]). *)

let k =
  [|
    0x428a2f98l; 0x71374491l; 0xb5c0fbcfl; 0xe9b5dba5l; 0x3956c25bl; 0x59f111f1l; 0x923f82a4l; 0xab1c5ed5l;
    0xd807aa98l; 0x12835b01l; 0x243185bel; 0x550c7dc3l; 0x72be5d74l; 0x80deb1fel; 0x9bdc06a7l; 0xc19bf174l;
    0xe49b69c1l; 0xefbe4786l; 0x0fc19dc6l; 0x240ca1ccl; 0x2de92c6fl; 0x4a7484aal; 0x5cb0a9dcl; 0x76f988dal;
    0x983e5152l; 0xa831c66dl; 0xb00327c8l; 0xbf597fc7l; 0xc6e00bf3l; 0xd5a79147l; 0x06ca6351l; 0x14292967l;
    0x27b70a85l; 0x2e1b2138l; 0x4d2c6dfcl; 0x53380d13l; 0x650a7354l; 0x766a0abbl; 0x81c2c92el; 0x92722c85l;
    0xa2bfe8a1l; 0xa81a664bl; 0xc24b8b70l; 0xc76c51a3l; 0xd192e819l; 0xd6990624l; 0xf40e3585l; 0x106aa070l;
    0x19a4c116l; 0x1e376c08l; 0x2748774cl; 0x34b0bcb5l; 0x391c0cb3l; 0x4ed8aa4al; 0x5b9cca4fl; 0x682e6ff3l;
    0x748f82eel; 0x78a5636fl; 0x84c87814l; 0x8cc70208l; 0x90befffal; 0xa4506cebl; 0xbef9a3f7l; 0xc67178f2l;
  |]

let sha256 msg =
  let open Int32 in
  let h =
    [|0x6a09e667l; 0xbb67ae85l; 0x3c6ef372l; 0xa54ff53al; 0x510e527fl; 0x9b05688cl; 0x1f83d9abl; 0x5be0cd19l|]
  in
  let len = Bytes.length msg in
  let padded = ((len + 8) / 64 + 1) * 64 in
  let b = Bytes.make padded '\000' in
  Bytes.blit msg 0 b 0 len ;
  Bytes.set_uint8 b len 0x80 ;
  Bytes.set_int64_be b (padded - 8) (Int64.of_int (len * 8)) ;
  let rotr x n = logor (shift_right_logical x n) (shift_left x (32 - n)) in
  let w = Array.make 64 0l in
  for block = 0 to (padded / 64) - 1 do
    for i = 0 to 15 do
      w.(i) <- Bytes.get_int32_be b ((block * 64) + (4 * i))
    done ;
    for i = 16 to 63 do
      let s0 = logxor (logxor (rotr w.(i - 15) 7) (rotr w.(i - 15) 18)) (shift_right_logical w.(i - 15) 3) in
      let s1 = logxor (logxor (rotr w.(i - 2) 17) (rotr w.(i - 2) 19)) (shift_right_logical w.(i - 2) 10) in
      w.(i) <- add (add w.(i - 16) s0) (add w.(i - 7) s1)
    done ;
    let v = Array.copy h in
    for i = 0 to 63 do
      let a = v.(0) and e = v.(4) in
      let s1 = logxor (logxor (rotr e 6) (rotr e 11)) (rotr e 25) in
      let ch = logxor (logand e v.(5)) (logand (lognot e) v.(6)) in
      let t1 = add (add (add v.(7) s1) (add ch k.(i))) w.(i) in
      let s0 = logxor (logxor (rotr a 2) (rotr a 13)) (rotr a 22) in
      let maj = logxor (logxor (logand a v.(1)) (logand a v.(2))) (logand v.(1) v.(2)) in
      let t2 = add s0 maj in
      v.(7) <- v.(6) ;
      v.(6) <- v.(5) ;
      v.(5) <- e ;
      v.(4) <- add v.(3) t1 ;
      v.(3) <- v.(2) ;
      v.(2) <- v.(1) ;
      v.(1) <- a ;
      v.(0) <- add t1 t2
    done ;
    Array.iteri (fun i x -> h.(i) <- add x v.(i)) h
  done ;
  let out = Bytes.create 32 in
  Array.iteri (fun i x -> Bytes.set_int32_be out (4 * i) x) h ;
  out

let alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

(* Base58 of [prefix ^ payload ^ checksum]. *)
let check_encode ~prefix payload =
  let body = Bytes.cat (Bytes.of_string prefix) payload in
  let data = Bytes.cat body (Bytes.sub (sha256 (sha256 body)) 0 4) in
  let digits = ref [] in
  (* Repeated division of the big-endian number by 58. *)
  let num = Array.init (Bytes.length data) (Bytes.get_uint8 data) in
  let rec divide () =
    if Array.exists (fun d -> d <> 0) num then (
      let rem = ref 0 in
      Array.iteri
        (fun i d ->
          let acc = (!rem * 256) + d in
          num.(i) <- acc / 58 ;
          rem := acc mod 58)
        num ;
      digits := alphabet.[!rem] :: !digits ;
      divide ())
  in
  divide () ;
  let zeros =
    let rec count i = if i < Bytes.length data && Bytes.get_uint8 data i = 0 then count (i + 1) else i in
    count 0
  in
  String.make zeros '1' ^ String.of_seq (List.to_seq !digits)

(* Octez's [Base58.Prefix.chain_id]. *)
let chain_id_prefix = "\087\082\000"

let chain_id c = check_encode ~prefix:chain_id_prefix c
