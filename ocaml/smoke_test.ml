(* The lock under OCaml's threads: run by ocaml/test.sh under each preset
   (OCAML_RUST_GIL), native and bytecode. Each check prints "ok NAME" or
   exits non-zero naming what failed. Nothing here times anything: a lock
   that never switches makes a check wait forever, and the watchdog turns
   that into a failure naming the check. *)

let check_name = ref "start"

let watchdog seconds =
  ignore
    (Thread.create
       (fun () ->
         Unix.sleepf seconds;
         Printf.printf "FAILED %s: no progress in %.0f s\n%!" !check_name seconds;
         exit 3)
       ())

let ok () = Printf.printf "ok %s\n%!" !check_name

(* A CPU-bound thread beside one doing I/O (a pipe ping-pong with a third
   thread): the I/O thread finishes all its round trips while the CPU
   thread still runs, so the CPU thread did not keep the lock to itself. *)
let cpu_beside_io () =
  check_name := "cpu_beside_io";
  let stop = Atomic.make false in
  let cpu =
    Thread.create
      (fun () ->
        while not (Atomic.get stop) do
          ignore (Sys.opaque_identity (List.init 50 (fun i -> i)))
        done)
      ()
  in
  let to_echo_r, to_echo_w = Unix.pipe () in
  let from_echo_r, from_echo_w = Unix.pipe () in
  let rounds = 200 in
  let echo =
    Thread.create
      (fun () ->
        let b = Bytes.create 1 in
        for _ = 1 to rounds do
          ignore (Unix.read to_echo_r b 0 1);
          ignore (Unix.write from_echo_w b 0 1)
        done)
      ()
  in
  let b = Bytes.of_string "x" in
  for _ = 1 to rounds do
    ignore (Unix.write to_echo_w b 0 1);
    ignore (Unix.read from_echo_r b 0 1)
  done;
  Thread.join echo;
  let still_running = not (Atomic.get stop) in
  Atomic.set stop true;
  Thread.join cpu;
  if not still_running then (print_endline "FAILED cpu_beside_io"; exit 1);
  (* The join above returned, so the CPU thread ran (it had to see [stop]);
     under the priority policy it may not have run before that: the I/O
     threads go first, and 200 round trips take less than the CPU class's
     starvation bound. *)
  List.iter Unix.close [ to_echo_r; to_echo_w; from_echo_r; from_echo_w ];
  ok ()

(* Two CPU-bound threads, neither of which blocks: each spins until it has
   seen the other make progress, which only a forced switch allows. *)
let two_cpu_threads_switch () =
  check_name := "two_cpu_threads_switch";
  let counts = [| Atomic.make 0; Atomic.make 0 |] in
  let finished = [| Atomic.make false; Atomic.make false |] in
  let worker me =
    let other = 1 - me in
    let seen_at_start = Atomic.get counts.(other) in
    (* Spin until the other has moved on twice since this thread started
       (or has finished: then it did, while this one was switched out). *)
    while Atomic.get counts.(other) < seen_at_start + 2 && not (Atomic.get finished.(other)) do
      Atomic.incr counts.(me);
      ignore (Sys.opaque_identity (List.init 20 (fun i -> i)))
    done;
    Atomic.set finished.(me) true
  in
  let a = Thread.create worker 0 in
  let b = Thread.create worker 1 in
  Thread.join a;
  Thread.join b;
  ok ()

(* Thread.yield hands the lock over: two threads that only yield take
   turns (each sees the other move between two of its own turns). *)
let yield_takes_turns () =
  check_name := "yield_takes_turns";
  let turn = Atomic.make 0 in
  let bad = Atomic.make 0 in
  let ready = Atomic.make 0 in
  let worker () =
    (* Both in the lock's line first: a yield with nobody waiting keeps
       the lock, and a thread can start well after the other. *)
    Atomic.incr ready;
    while Atomic.get ready < 2 do Thread.yield () done;
    for _ = 1 to 50 do
      let before = Atomic.get turn in
      Atomic.incr turn;
      Thread.yield ();
      if Atomic.get turn = before + 1 then Atomic.incr bad
    done
  in
  let a = Thread.create worker () in
  let b = Thread.create worker () in
  Thread.join a;
  Thread.join b;
  (* The last turn of whichever finishes second has nobody to yield to. *)
  if Atomic.get bad > 5 then (
    Printf.printf "FAILED yield_takes_turns: %d yields took no turn\n" (Atomic.get bad);
    exit 1);
  ok ()

(* A fork child's threads are switched too (stock 5.3's child has no tick
   thread once the parent started one). *)
let fork_child_switches () =
  check_name := "fork_child_switches";
  match Unix.fork () with
  | 0 ->
      two_cpu_threads_switch ();
      exit 0
  | pid -> (
      match Unix.waitpid [] pid with
      | _, Unix.WEXITED 0 -> ok ()
      | _ -> print_endline "FAILED fork_child_switches"; exit 1)

let () =
  watchdog 120.;
  cpu_beside_io ();
  two_cpu_threads_switch ();
  yield_takes_turns ();
  fork_child_switches ();
  print_endline "all passed"
