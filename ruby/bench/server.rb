# A thread-per-connection HTTP/1.1 server (stdlib TCPServer, keep-alive,
# TCP_NODELAY), with CPU-bound Ruby threads beside it in the same process:
# the shape of a threaded app server (Puma) doing background work.
#
#   ruby server.rb SPINNERS
#
# Each request (any GET; ruby/bench/server.py sends about 100 bytes) gets a
# little Ruby work (its header lines parsed into a Hash, a body built from
# them) and a 1 KiB response with Content-Length. SPINNERS threads run a
# loop of Ruby code and count their laps. The policy is the process's
# (RUBY_RUST_GIL on the lock build).
#
# Prints "port=N" on stdout, then answers each line read on stdin with one
# line: "t=SECONDS served=REQUESTS handlers=CONNECTIONS spin=LAPS
# errors=N req_bytes=BYTES" (req_bytes: the last request's size). It exits
# at the end of stdin.
require "socket"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

spinners = Integer(ARGV.fetch(0) { abort "usage: ruby server.rb SPINNERS" })

# Counters that one thread each writes (no lock needed to read a sum).
SPIN = Array.new(spinners, 0)
SERVED = []   # one slot per connection
STARTED = []  # a connection's thread appends its slot when it starts
ERRORS = [0]
LAST_REQ = [0]

spinners.times.map do |i|
  Thread.new do
    laps = 0
    loop do
      j = 0
      j += 1 while j < 1000
      laps += 1
      SPIN[i] = laps
    end
  end
end

BODY_SIZE = 1024

# The per-request work: parse the request's header lines, build a body from
# them, padded to 1 KiB.
def respond(head)
  lines = head.split("\r\n")
  method, path, = lines.shift.split(" ", 3)
  headers = lines.to_h { |l| l.split(": ", 2) }
  body = +"#{method} #{path}\n"
  headers.each { |k, v| body << "#{k.downcase}: #{v.bytesize}\n" }
  body << ("." * (BODY_SIZE - body.bytesize)) if body.bytesize < BODY_SIZE
  body = body.byteslice(0, BODY_SIZE)
  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: #{BODY_SIZE}\r\n\r\n#{body}"
end

def serve(conn, slot)
  STARTED << slot
  conn.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
  buf = +""
  loop do
    until (i = buf.index("\r\n\r\n"))
      buf << conn.readpartial(16384)
    end
    head = buf.slice!(0, i + 4)
    LAST_REQ[0] = head.bytesize
    conn.write(respond(head))
    SERVED[slot] += 1
  end
rescue EOFError, Errno::ECONNRESET, Errno::EPIPE
  # the client closed its connection
rescue StandardError => e
  ERRORS[0] += 1
  warn "server.rb: #{e.class}: #{e.message}"
ensure
  conn.close
end

server = TCPServer.new("127.0.0.1", 0)
server.listen(1024)
Thread.new do
  loop do
    conn = server.accept
    slot = SERVED.size
    SERVED << 0
    Thread.new { serve(conn, slot) }
  end
end

$stdout.sync = true
puts "port=#{server.addr[1]}"
while $stdin.gets
  printf("t=%.6f served=%d handlers=%d spin=%d errors=%d req_bytes=%d\n",
         now, SERVED.sum, STARTED.size, SPIN.sum, ERRORS[0], LAST_REQ[0])
end
