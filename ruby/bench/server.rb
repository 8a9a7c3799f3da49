# An HTTP/1.1 server (stdlib TCPServer, keep-alive, TCP_NODELAY), with
# CPU-bound Ruby threads beside it in the same process: the shape of a
# threaded app server (Puma) doing background work.
#
#   ruby server.rb SPINNERS [WORKERS]
#
# WORKERS 0 (the default): a thread per connection. Each request (any GET;
# ruby/bench/server.py sends about 100 bytes) gets a little Ruby work (its
# header lines parsed into a Hash, a body built from them) and a 1 KiB
# response with Content-Length.
#
# WORKERS N: a fixed pool of N worker threads, in the design of gunicorn's
# gthread worker (cpython/bench/server.py --pool, the same on CPython): a
# dispatcher thread waits in IO.select on the listening socket and every
# idle keep-alive connection and pushes a readable connection onto a Queue
# that the workers pop; a worker reads one request, answers it and hands the
# connection back to the dispatcher (a Queue and a pipe that wakes it). So
# more connections than workers are served in turn, one request per turn,
# and an idle connection holds no worker. Each request gets CPython's
# --pool work: its header lines parsed into a Hash, a JSON document of
# ITEMS records generated (about 1.3 KB, the response's body; about 60 us
# of CPU on the lock's Ruby here, 80 us on CPython).
#
# SPINNERS threads run a loop of Ruby code and count their laps. The policy
# is the process's (RUBY_RUST_GIL on the lock build).
#
# Prints "port=N" on stdout, then answers each line read on stdin with one
# line: "t=SECONDS served=REQUESTS handlers=CONNECTIONS spin=LAPS
# errors=N req_bytes=BYTES" (handlers: connections taken up; req_bytes: the
# last request's size). It exits at the end of stdin.
require "json"
require "socket"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

spinners = Integer(ARGV.fetch(0) { abort "usage: ruby server.rb SPINNERS [WORKERS]" })
workers = Integer(ARGV.fetch(1, "0"))
abort "server.rb: WORKERS must be 0 or more, got #{workers}" if workers.negative?

# Counters that one thread each writes (no lock needed to read a sum).
SPIN = Array.new(spinners, 0)
SERVED = []   # one slot per connection (per worker in a pool)
STARTED = []  # a connection's thread appends its slot when it starts (a pool: its accept time)
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

# ---- the thread pool --------------------------------------------------------

ITEMS = 20

# The per-request work of the pool, as CPython's: the header lines parsed
# into a Hash, a JSON document built from them and ITEMS records.
def respond_json(head)
  lines = head.split("\r\n")
  method, path, = lines.shift.split(" ", 3)
  headers = lines.to_h { |l| l.split(": ", 2) }
  doc = { "method" => method, "path" => path,
          "headers" => headers.to_h { |k, v| [k.downcase, v.bytesize] },
          "items" => Array.new(ITEMS) do |i|
            { "id" => i, "name" => "item-#{i}", "price" => i * 0.25, "tags" => ["a", "b", (i % 7).to_s] }
          end }
  body = JSON.generate(doc)
  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}"
end

Conn = Struct.new(:io, :buf)

# A worker's turn: one request of CONN. True if CONN stays open.
def serve_one(conn, slot)
  until (i = conn.buf.index("\r\n\r\n"))
    conn.buf << conn.io.readpartial(16384)
  end
  head = conn.buf.slice!(0, i + 4)
  LAST_REQ[0] = head.bytesize
  conn.io.write(respond_json(head))
  SERVED[slot] += 1
  true
rescue EOFError, Errno::ECONNRESET, Errno::EPIPE
  conn.io.close
  false
rescue StandardError => e
  ERRORS[0] += 1
  warn "server.rb: #{e.class}: #{e.message}"
  conn.io.close
  false
end

def serve_pool(server, workers)
  jobs = Queue.new   # readable connections, for the workers
  back = Queue.new   # connections a worker is done with, for the dispatcher
  wake_r, wake_w = IO.pipe
  workers.times do
    slot = SERVED.size
    SERVED << 0
    Thread.new do
      while (conn = jobs.pop)
        next unless serve_one(conn, slot)
        back << conn
        wake_w.write_nonblock("x", exception: false)
      end
    end
  end
  idle = {}          # IO => Conn: the connections waiting for a request
  loop do
    ready, = IO.select([server, wake_r, *idle.keys])
    ready.each do |io|
      if io.equal?(server)
        sock = server.accept_nonblock(exception: false)
        next if sock == :wait_readable
        sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
        STARTED << now
        idle[sock] = Conn.new(sock, +"")
      elsif io.equal?(wake_r)
        wake_r.read_nonblock(4096, exception: false)
        until back.empty?
          conn = back.pop
          idle[conn.io] = conn
        end
      else
        jobs << idle.delete(io)
      end
    end
  end
end

server = TCPServer.new("127.0.0.1", 0)
server.listen(1024)
if workers.positive?
  Thread.new { serve_pool(server, workers) }
else
  Thread.new do
    loop do
      conn = server.accept
      slot = SERVED.size
      SERVED << 0
      Thread.new { serve(conn, slot) }
    end
  end
end

$stdout.sync = true
puts "port=#{server.addr[1]}"
while $stdin.gets
  printf("t=%.6f served=%d handlers=%d spin=%d errors=%d req_bytes=%d\n",
         now, SERVED.sum, STARTED.size, SPIN.sum, ERRORS[0], LAST_REQ[0])
end
