(* What a call through the binding adds: a cached [find] of a 5-step path
   made from OCaml ([Pando.find]) against the same [find] made from Rust
   in a loop ([Pando.Internal.find_in_rust]), on the same tree, in one
   process. Prints the median of 7 interleaved rounds of each. *)

let rounds = 7
let calls = 1_000_000

let () =
  let dir = Filename.temp_file "pando-bench" "" in
  Sys.remove dir;
  let index = Pando.index_init dir in
  let ctx = ref (Pando.context_init index) in
  for i = 0 to 9_999 do
    let k = string_of_int i in
    ctx := Pando.add !ctx [ "contracts"; "index"; k; "balance"; "n" ] (Bytes.of_string k)
  done;
  let commit = Pando.commit !ctx 0L "" "" in
  let ctx = Option.get (Pando.checkout index commit) in
  let path = [ "contracts"; "index"; "4242"; "balance"; "n" ] in
  assert (Pando.find ctx path = Some (Bytes.of_string "4242"));
  let ocaml_times = Array.make rounds 0. and rust_times = Array.make rounds 0. in
  for r = 0 to rounds - 1 do
    let t0 = Sys.time () in
    for _ = 1 to calls do
      ignore (Sys.opaque_identity (Pando.find ctx path))
    done;
    ocaml_times.(r) <- Sys.time () -. t0;
    rust_times.(r) <- Pando.Internal.find_in_rust ctx path calls
  done;
  let median a =
    let a = Array.copy a in
    Array.sort compare a;
    a.(Array.length a / 2)
  in
  let ns t = t *. 1e9 /. float_of_int calls in
  let o = ns (median ocaml_times) and r = ns (median rust_times) in
  Printf.printf "find, 5 steps, cached: OCaml %.0f ns, Rust %.0f ns, binding adds %.0f ns\n"
    o r (o -. r);
  Pando.close index;
  ignore (Sys.command ("rm -rf " ^ Filename.quote dir))
