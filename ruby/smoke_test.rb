# ruby/smoke_test.rb: threads on the GVL, whichever lock it is. Each check
# asserts what it is named after; prints "all passed" at the end.
#
#   ruby ruby/smoke_test.rb
require "socket"

def check(name)
  ok = yield
  raise "FAILED: #{name}" unless ok
  puts "ok #{name}"
end

def spin_until(deadline)
  n = 0
  n += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  n
end

# Exclusion: threads incrementing a shared counter with a read-modify-write
# that spans method calls (interrupt checks) lose no update only under a
# Mutex; and every thread makes progress (nobody starves).
counter = 0
lock = Mutex.new
threads = 4.times.map do
  Thread.new do
    20_000.times { lock.synchronize { v = counter; counter = v + 1 } }
  end
end
threads.each(&:join)
check("4 threads x 20000 increments under a Mutex") { counter == 80_000 }

# Pre-emption: a CPU-bound thread does not keep the lock from another one
# that only spins either: both make progress within the same second.
stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1.0
counts = 2.times.map { Thread.new { spin_until(stop) } }.map(&:value)
check("two spinning threads both progress (#{counts.join(', ')})") { counts.all? { |c| c > 1000 } }

# A thread woken from a blocking read runs while another thread spins.
r, w = IO.pipe
spinning = true
spinner = Thread.new { n = 0; n += 1 while spinning; n }
reader = Thread.new { r.read(5) }
sleep 0.05
w.write("hello")
got = reader.value
spinning = false
check("a reader beside a spinner gets its bytes") { got == "hello" && spinner.value > 0 }

# Queues and condition variables hand work between threads.
q = Queue.new
out = Queue.new
workers = 3.times.map { Thread.new { while (x = q.pop) != :stop; out << x * 2; end } }
100.times { |i| q << i }
3.times { q << :stop }
workers.each(&:join)
sum = 0
sum += out.pop until out.empty?
check("a Queue feeds three workers") { sum == 2 * (0...100).sum }

m = Mutex.new
cv = ConditionVariable.new
ready = false
waiter = Thread.new { m.synchronize { cv.wait(m) until ready; :woken } }
sleep 0.02
m.synchronize { ready = true; cv.signal }
check("a ConditionVariable wakes its waiter") { waiter.value == :woken }

# Thread#kill and Thread#raise reach a thread blocked in sleep.
sleeper = Thread.new { sleep }
sleep 0.02 until sleeper.status == "sleep"
sleeper.raise(RuntimeError, "wake")
check("Thread#raise reaches a sleeper") do
  begin
    sleeper.join
    false
  rescue RuntimeError => e
    e.message == "wake"
  end
end

# fork from a thread while others run: the child's lock is its own.
bg = Thread.new { spin_until(Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.3) }
child_status = Thread.new do
  pid = fork do
    t = Thread.new { 21 * 2 }
    exit(t.value == 42 ? 0 : 1) # at_exit, and the lock's trace, run in the child too
  end
  Process.wait(pid)
  $?.exitstatus
end.value
bg.join
check("fork from a thread; the child runs a thread of its own") { child_status == 0 }

# A TCP echo thread beside a spinning thread answers.
server = TCPServer.new("127.0.0.1", 0)
echo = Thread.new do
  c = server.accept
  while (line = c.gets)
    c.write(line)
  end
  c.close
end
spinning = true
spinner = Thread.new { n = 0; n += 1 while spinning; n }
sock = TCPSocket.new("127.0.0.1", server.addr[1])
ok = 20.times.all? { |i| sock.write("ping #{i}\n"); sock.gets == "ping #{i}\n" }
sock.close
echo.join
spinning = false
spinner.join
check("20 TCP echo round trips beside a spinning thread") { ok }

# A Ractor runs on its own lock beside the main Ractor's threads.
Warning[:experimental] = false
ractor = Ractor.new { Thread.new { (1..1000).sum }.value }
check("a Ractor's thread runs") { ractor.take == 500_500 }

puts "all passed"
