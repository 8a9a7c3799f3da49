(* CPU-bound threads sharing one domain: how much work they get done, and
   how evenly the lock shares it out.

     cpu.exe THREADS SECONDS

   Each thread runs the same allocating loop (it reaches the runtime's
   poll points, as OCaml code does) for SECONDS and counts its laps.
   Prints one line: the threads, the total laps per second, and each
   thread's laps. The policy is the process's (OCAML_RUST_GIL on the lock
   build). *)

let work () = ignore (Sys.opaque_identity (List.init 30 (fun i -> i)))

let () =
  match Sys.argv with
  | [| _; n; s |] ->
      let n = int_of_string n and seconds = float_of_string s in
      let stop = Atomic.make false in
      let laps = Array.make n 0 in
      let run i =
        let count = ref 0 in
        while not (Atomic.get stop) do
          work ();
          incr count
        done;
        laps.(i) <- !count
      in
      let t0 = Unix.gettimeofday () in
      let threads = List.init n (fun i -> Thread.create run i) in
      Thread.delay seconds;
      Atomic.set stop true;
      List.iter Thread.join threads;
      let elapsed = Unix.gettimeofday () -. t0 in
      let total = Array.fold_left ( + ) 0 laps in
      Printf.printf "cpu threads=%d laps_per_s=%.0f laps=%s\n%!" n
        (float_of_int total /. elapsed)
        (String.concat "," (Array.to_list (Array.map string_of_int laps)))
  | _ ->
      prerr_endline "usage: cpu.exe THREADS SECONDS";
      exit 2
