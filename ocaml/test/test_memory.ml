(* Trees kept alive by OCaml are freed by their finalizers: millions of
   trees allocated and dropped under Gc.full_major pressure leave the
   resident memory flat. *)

open Common

let resident_kib () =
  let ic = open_in "/proc/self/statm" in
  let line = input_line ic in
  close_in ic;
  Scanf.sscanf line "%d %d" (fun _ resident -> resident * 4)

let () =
  let dir = temp_dir () in
  let index = Pando.index_init dir in
  let ctx = Pando.context_init index in
  let ctx = Pando.add ctx [ "a"; "b" ] (Bytes.of_string "value") in
  let commit = Pando.commit ctx 0L "" "" in
  let ctx = Option.get (Pando.checkout index commit) in
  let rounds = 2_000_000 in
  let after_warmup = ref 0 in
  for i = 1 to rounds do
    (* Each round makes a context, two trees and a value, then drops them. *)
    let v = Bytes.of_string (string_of_int i) in
    let c = Pando.add ctx [ "a"; "c" ] v in
    let t = Option.get (Pando.find_tree c [ "a" ]) in
    ignore (Pando.tree_add t [ "d" ] v);
    if i mod 250_000 = 0 then Gc.full_major ();
    if i = rounds / 4 then after_warmup := resident_kib ()
  done;
  Gc.full_major ();
  let final = resident_kib () in
  Printf.printf "resident: %d KiB after %d rounds, %d KiB at the end\n"
    !after_warmup (rounds / 4) final;
  check "flat memory" (final < !after_warmup + 16_384);
  Pando.close index;
  remove_dir dir;
  finish "test_memory"
