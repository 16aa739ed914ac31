(* A store that keeps nothing and answers at once (duo --only null): the
   driver's own cost, reading the trace with irmin's reader and
   dispatching its rows, to subtract from a store's time and memory. *)

let name = "null"

type repo = unit
type ctx = unit
type commit = unit

let open_repo _ = Lwt.return_unit
let empty () = ()
let checkout () () = Lwt.return_unit
let add () _ _ = Lwt.return_unit
let remove () _ = Lwt.return_unit
let copy () ~src:_ ~dst:_ = Lwt.return_some ()
let find () _ = Lwt.return_none
let mem () _ = Lwt.return_false
let mem_tree () _ = Lwt.return_false
let find_tree_hash () _ = Lwt.return_none
let length () _ = Lwt.return 0
let list () ?offset:_ ?length:_ _ = Lwt.return []
let fold () _ ~depth:_ = Lwt.return []
let commit () () ~parents:_ ~date:_ ~message:_ = Lwt.return ((), "")
let gc () () = Lwt.return_true
let wait_gc () = Lwt.return_unit
let close () = Lwt.return_unit
