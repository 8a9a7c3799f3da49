(* An echo thread beside CPU-bound threads: the convoy measured where it
   happens. A client process talks to the echo thread over a socketpair
   while N other threads of the echo's process spin (allocating, so they
   reach the runtime's poll points, as OCaml code does).

     echo.exe bulk CPU_THREADS MBYTES      time to send MBYTES in 16 KiB
                                           messages and read them back
     echo.exe pingpong CPU_THREADS ROUNDS  100-byte round trips: p50, p99
     echo.exe spin                         spins until killed (the CPU
                                           work as a separate process)

   Prints one line: the mode, the CPU threads, then the figures. The
   policy is the process's (OCAML_RUST_GIL on the lock build). *)

let spin stop =
  while not (Atomic.get stop) do
    ignore (Sys.opaque_identity (List.init 30 (fun i -> i)))
  done

let rec really_write fd b off len =
  if len > 0 then
    let n = Unix.write fd b off len in
    really_write fd b (off + n) (len - n)

let rec really_read fd b off len =
  if len > 0 then (
    let n = Unix.read fd b off len in
    if n = 0 then failwith "echo: the peer closed";
    really_read fd b (off + n) (len - n))

(* The echo thread: reads whatever comes and sends it back, until EOF. *)
let echo fd =
  let b = Bytes.create 65536 in
  let rec loop () =
    let n = Unix.read fd b 0 (Bytes.length b) in
    if n > 0 then (
      really_write fd b 0 n;
      loop ())
  in
  loop ()

(* The client is a separate, single-threaded process (forked before any
   thread exists), as a network peer is: only the echo thread and the
   spinners share the lock. It waits for a go byte, so that the spinners
   are running first, measures, prints its line and closes its end; the
   echo thread sees end of file and the server process stops. *)
let with_setup cpu f =
  let mine, theirs = Unix.socketpair Unix.PF_UNIX Unix.SOCK_STREAM 0 in
  match Unix.fork () with
  | 0 ->
      Unix.close theirs;
      let go = Bytes.create 1 in
      really_read mine go 0 1;
      f mine;
      Unix.shutdown mine Unix.SHUTDOWN_SEND;
      exit 0
  | client ->
      Unix.close mine;
      let stop = Atomic.make false in
      let spinners = List.init cpu (fun _ -> Thread.create spin stop) in
      (* Let the spinners start. *)
      Unix.sleepf 0.05;
      really_write theirs (Bytes.of_string "g") 0 1;
      let echoer = Thread.create echo theirs in
      Thread.join echoer;
      Atomic.set stop true;
      List.iter Thread.join spinners;
      Unix.close theirs;
      match Unix.waitpid [] client with
      | _, Unix.WEXITED 0 -> ()
      | _ -> failwith "echo: the client failed"

let bulk cpu mbytes =
  let chunk = 16384 in
  let total = mbytes * 1024 * 1024 in
  let out = Bytes.make chunk 'x' and back = Bytes.create chunk in
  with_setup cpu (fun fd ->
      let t0 = Unix.gettimeofday () in
      let sent = ref 0 in
      while !sent < total do
        really_write fd out 0 chunk;
        really_read fd back 0 chunk;
        sent := !sent + chunk
      done;
      let seconds = Unix.gettimeofday () -. t0 in
      Printf.printf "bulk cpu=%d mbytes=%d seconds=%.4f\n%!" cpu mbytes seconds)

let pingpong cpu rounds =
  let msg = Bytes.make 100 'p' and back = Bytes.create 100 in
  with_setup cpu (fun fd ->
      let times =
        Array.init rounds (fun _ ->
            let t0 = Unix.gettimeofday () in
            really_write fd msg 0 100;
            really_read fd back 0 100;
            Unix.gettimeofday () -. t0)
      in
      Array.sort compare times;
      let q p = times.(min (rounds - 1) (int_of_float (p *. float_of_int rounds))) *. 1e6 in
      Printf.printf "pingpong cpu=%d rounds=%d p50_us=%.1f p99_us=%.1f max_us=%.1f\n%!" cpu
        rounds (q 0.50) (q 0.99) (times.(rounds - 1) *. 1e6))

let () =
  match Sys.argv with
  | [| _; "bulk"; cpu; mb |] -> bulk (int_of_string cpu) (int_of_string mb)
  | [| _; "pingpong"; cpu; n |] -> pingpong (int_of_string cpu) (int_of_string n)
  | [| _; "spin" |] -> spin (Atomic.make false)
  | _ ->
      prerr_endline "usage: echo.exe bulk CPU_THREADS MBYTES | pingpong CPU_THREADS ROUNDS | spin";
      exit 2
