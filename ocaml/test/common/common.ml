(* Helpers shared by the binding's tests: temporary stores and checks
   that print what they compared. *)

let failures = ref 0

let check name ok =
  if not ok then (
    incr failures;
    Printf.printf "FAIL %s\n%!" name)

let check_eq name show expected actual =
  if expected <> actual then (
    incr failures;
    Printf.printf "FAIL %s: expected %s, got %s\n%!" name (show expected)
      (show actual))

let hex b =
  String.concat ""
    (List.init (Bytes.length b) (fun i ->
         Printf.sprintf "%02x" (Char.code (Bytes.get b i))))

let show_opt = function None -> "None" | Some b -> Bytes.to_string b

(* [raises name pred f]: [f ()] raises [Pando.Error] with a message for
   which [pred] holds. *)
let raises name pred f =
  match f () with
  | _ -> check (name ^ ": no exception") false
  | exception Pando.Error message ->
      if not (pred message) then (
        incr failures;
        Printf.printf "FAIL %s: message %S\n%!" name message)

let contains ~sub s =
  let n = String.length sub and m = String.length s in
  let rec go i = i + n <= m && (String.sub s i n = sub || go (i + 1)) in
  go 0

let temp_dir () =
  let file = Filename.temp_file "pando-ocaml" "" in
  Sys.remove file;
  Sys.mkdir file 0o755;
  file

let remove_dir dir = ignore (Sys.command ("rm -rf " ^ Filename.quote dir))

let finish name =
  if !failures > 0 then (
    Printf.printf "%s: %d failures\n%!" name !failures;
    exit 1)
  else Printf.printf "%s: ok\n%!" name

(* The edge cases of the duo's edge-case traces, with irmin's answers
   (ocaml/edges). *)
module Edges = Edges
