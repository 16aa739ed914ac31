(* Calls from several OCaml 5 domains at once on one index: each domain
   builds its own blocks on a shared parent, commits them, and reads
   back every commit the others made; one more domain runs a collection
   and reads trees while they write. Every answer is checked. *)

open Common

let domains = 3
let blocks = 50

let () =
  let dir = temp_dir () in
  let index = Pando.index_init dir in
  let genesis =
    Pando.commit (Pando.add (Pando.context_init index) [ "g" ] (Bytes.of_string "0")) 0L "" ""
  in
  let work d () =
    let last = ref genesis and made = ref [] in
    for n = 1 to blocks do
      let ctx = Option.get (Pando.checkout index !last) in
      let ctx = ref ctx in
      for i = 0 to 99 do
        let k = Printf.sprintf "%d-%d-%d" d n i in
        ctx := Pando.add !ctx [ "d"; string_of_int d; k ] (Bytes.of_string k)
      done;
      last := Pando.commit !ctx (Int64.of_int n) "" "";
      made := (n, !last) :: !made;
      Gc.minor ()
    done;
    !made
  in
  let workers = List.init domains (fun d -> Domain.spawn (work d)) in
  let results = List.map Domain.join workers in
  List.iteri
    (fun d made ->
      List.iter
        (fun (n, commit) ->
          let ctx = Option.get (Pando.checkout index commit) in
          let k = Printf.sprintf "%d-%d-%d" d n 99 in
          check_eq "value" show_opt (Some (Bytes.of_string k))
            (Pando.find ctx [ "d"; string_of_int d; k ]);
          check_eq "length" string_of_int (100 * n)
            (Pando.length ctx [ "d"; string_of_int d ]))
        made)
    results;
  Printf.printf "%d domains committed %d blocks each\n" domains blocks;
  Pando.close index;
  remove_dir dir;
  finish "test_domains"
