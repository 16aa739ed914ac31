(* The edge cases of the duo's edge-case traces, with irmin 3.7.2's
   answers (Irmin_tezos.Store), as ocaml/duo/edge_answers.ml prints them
   for these [paths]; test_pando (through Common.Edges) and test_context
   assert them. Steps empty, of 255, 256 and 65,536 bytes, with
   NUL, '/' and a byte that is not UTF-8; values of 0 bytes, 1 MiB and
   3 MiB; a path 64 steps deep. *)
let s n c = String.make n c

(* a value of [n] bytes that is not one byte repeated *)
let value n = Bytes.init n (fun i -> Char.chr (((i * 7) + (i / 251)) land 255))
let deep n = List.init n (fun i -> Printf.sprintf "d%d" i)

let paths =
  [
    ([ "e"; "" ], Bytes.of_string "an empty step");
    ([ ""; "x" ], Bytes.of_string "under an empty step");
    ([ "max"; s 255 'a' ], Bytes.of_string "255");
    ([ "long"; s 256 'b' ], Bytes.of_string "256");
    ([ "long"; s 65536 'd' ], Bytes.of_string "65536");
    ([ "nul"; "a\000b" ], Bytes.of_string "nul");
    ([ "slash"; "a/b" ], Bytes.of_string "slash");
    ([ "utf"; "\xff" ], Bytes.of_string "not utf-8");
    ([ "v"; "empty" ], Bytes.empty);
    ([ "v"; "mib" ], value (1 lsl 20));
    ([ "v"; "3mib" ], value (3 lsl 20));
    (deep 64, Bytes.of_string "64 steps deep");
  ]

let parent k = List.rev (List.tl (List.rev k))

(* irmin's answers *)
let empty_tree_hash = "81e47a19e6b29b0a65b9591762ce5143ed30d0261e5d24a3201752506b20f15c"
let tree_hash = "61a7d3cf405e10a9716aaf7e3087f2ed31fd2832b6cc48df80558065bff0fb61"

(* list and fold ~depth:(`Le 1) of the root (fold first visits the
   root itself, then these), every one a directory *)
let top = [ ""; "d0"; "e"; "long"; "max"; "nul"; "slash"; "utf"; "v" ]

(* length of each path's parent directory *)
let parent_length k = match k with [ "long"; _ ] -> 2 | [ "v"; _ ] -> 3 | _ -> 1
let deep32_hash = "23296c8a3b57d371831301d1a6fd3014656f4fbe804fcdf52f295500132d60c6"

(* the tree with deep 32 copied to ["copy"] *)
let copied_hash = "03237fbdcd02f899eb7d42d49a0ac5b9aadc60a16b191282656ad94ace7a094e"

(* the tree committed at time 1 by "Tezos" with message "edges", no
   parent; then its tree again at time 2, "same tree", on it *)
let commit = "79654c97878bddf0c243f1856cd0feace6919333dcbba4e9681673a894a27eda"
let commit_again = "f440873d3377bae07adc3859bcc3cd73474ed310bc5f74fe6bc02dcf177cca43"

(* the same under data/, as Octez's contexts put it *)
let data_commit = "22d9a6638916b209f89e697e088fe9258173013265714a56f88363160da2c841"
let data_commit_again = "aa3d08b7445d069e6a5881de4d4ae2360c34e457ae14b408a46680d6b91df0f5"
