(* With OCaml 4's threads, a long call (a commit of 200,000 new values)
   releases the runtime lock: another thread runs OCaml meanwhile. The
   check counts the other thread's steps during the commit; holding the
   lock, it could make none until the commit returned. *)

open Common

let () =
  let dir = temp_dir () in
  let index = Pando.index_init dir in
  let ctx = ref (Pando.context_init index) in
  for i = 0 to 199_999 do
    let k = string_of_int i in
    ctx := Pando.add !ctx [ "big"; k ] (Bytes.of_string k)
  done;
  let committing = Atomic.make true and steps = ref 0 in
  let steps_during = ref 0 in
  let other =
    Thread.create
      (fun () ->
        while Atomic.get committing do
          incr steps;
          Thread.yield ()
        done)
      ()
  in
  let before = !steps in
  let started = Sys.time () in
  let commit = Pando.commit !ctx 0L "" "" in
  steps_during := !steps - before;
  Atomic.set committing false;
  Thread.join other;
  Printf.printf "commit: %.2f s of CPU, the other thread made %d steps meanwhile\n"
    (Sys.time () -. started) !steps_during;
  check "another thread ran during the commit" (!steps_during > 0);
  check_eq "value" show_opt (Some (Bytes.of_string "4242"))
    (Pando.find (Option.get (Pando.checkout index commit)) [ "big"; "4242" ]);
  Pando.close index;
  remove_dir dir;
  finish "test_threads"
