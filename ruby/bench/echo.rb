# An echo thread beside CPU-bound threads: the convoy measured where it
# happens. A client process talks to the echo thread over TCP (loopback,
# TCP_NODELAY) while N other threads of the echo's process spin in Ruby
# code (a loop reaches the VM's interrupt checks, as Ruby code does).
#
#   ruby echo.rb bulk CPU_THREADS MBYTES      time to send MBYTES in 16 KiB
#                                             messages and read them back
#   ruby echo.rb pingpong CPU_THREADS ROUNDS  64-byte round trips: p50, p99,
#                                             p99.9, max, and their sum
#   ruby echo.rb spin                         spins until killed (the CPU
#                                             work as a separate process)
#
# Prints one line: the mode, the CPU threads, then the figures. The policy
# is the process's (RUBY_RUST_GIL on the lock build).
require "socket"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def spin(stop)
  n = 0
  n += 1 until stop[0]
  n
end

def read_exactly(sock, len)
  buf = +""
  while buf.bytesize < len
    buf << sock.readpartial(len - buf.bytesize)
  end
  buf
end

# The client is a separate, single-threaded process, forked before any
# thread exists, as a network peer is: only the echo thread and the
# spinners share the lock. It waits for a go byte, so that the spinners
# run first, measures, prints its line and closes; the echo thread sees
# end of file and the server process stops.
def with_setup(cpu)
  server = TCPServer.new("127.0.0.1", 0)
  port = server.addr[1]
  client = fork do
    server.close
    sock = TCPSocket.new("127.0.0.1", port)
    sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    read_exactly(sock, 1)
    yield sock
    sock.close_write
    exit!(0)
  end
  conn = server.accept
  conn.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
  stop = [false]
  spinners = cpu.times.map { Thread.new { spin(stop) } }
  sleep 0.05 # let the spinners start
  conn.write("g")
  echo = Thread.new do
    loop do
      data = conn.readpartial(65536)
      conn.write(data)
    rescue EOFError
      break
    end
  end
  echo.join
  stop[0] = true
  spinners.each(&:join)
  conn.close
  Process.wait(client)
  raise "echo: the client failed" unless $?.success?
end

def bulk(cpu, mbytes)
  chunk = 16384
  total = mbytes * 1024 * 1024
  out = "x" * chunk
  with_setup(cpu) do |sock|
    t0 = now
    sent = 0
    while sent < total
      sock.write(out)
      read_exactly(sock, chunk)
      sent += chunk
    end
    printf("bulk cpu=%d mbytes=%d seconds=%.4f\n", cpu, mbytes, now - t0)
    $stdout.flush
  end
end

def pingpong(cpu, rounds)
  msg = "p" * 64
  with_setup(cpu) do |sock|
    times = Array.new(rounds) do
      t0 = now
      sock.write(msg)
      read_exactly(sock, 64)
      now - t0
    end
    times.sort!
    q = ->(p) { times[[rounds - 1, (p * rounds).to_i].min] * 1e6 }
    printf("pingpong cpu=%d rounds=%d p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f seconds=%.4f\n",
           cpu, rounds, q.(0.50), q.(0.99), q.(0.999), times[-1] * 1e6, times.sum)
    $stdout.flush
  end
end

case ARGV
in ["bulk", cpu, mb] then bulk(Integer(cpu), Integer(mb))
in ["pingpong", cpu, n] then pingpong(Integer(cpu), Integer(n))
in ["spin"] then spin([false])
else
  warn "usage: ruby echo.rb bulk CPU_THREADS MBYTES | pingpong CPU_THREADS ROUNDS | spin"
  exit 2
end
