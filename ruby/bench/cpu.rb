# CPU-bound threads sharing the GVL: how much work they get done, and how
# evenly the lock shares it out.
#
#   ruby cpu.rb THREADS SECONDS
#
# Each thread runs the same loop of Ruby code (a method call and a small
# array each lap) for SECONDS and counts its laps. Prints one line: the
# threads, the total laps per second, the CPU time the process used (all
# its threads, seconds) and each thread's laps. The policy is the
# process's (RUBY_RUST_GIL on the lock build).
def work(i) = [i, i + 1, i + 2].sum

unless ARGV.size == 2
  warn "usage: ruby cpu.rb THREADS SECONDS"
  exit 2
end
n = Integer(ARGV[0])
seconds = Float(ARGV[1])
stop = false
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
threads = n.times.map do
  Thread.new do
    laps = 0
    until stop
      work(laps)
      laps += 1
    end
    laps
  end
end
sleep seconds
stop = true
laps = threads.map(&:value)
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c0
printf("cpu threads=%d laps_per_s=%.0f cpu_s=%.3f laps=%s\n", n, laps.sum / elapsed, cpu, laps.join(","))
