#!/usr/bin/env bash
# A thread-per-connection or thread-pool Ruby server (ruby/bench/server.rb)
# beside 0-2 CPU-bound Ruby threads, loaded by wrk: stock Ruby 3.3, the
# lock's default (RUBY_RUST_GIL unset: priority) and other presets, side by
# side in one run, with the processes control (stock beside the same
# spinning work as processes). Prints a Markdown table (requests/s,
# p50/p90/p99/p99.9, each as a ratio to stock too, and the cells within
# p99 <= max(3 x p50, p50 + 2 ms)) on stdout.
#
#   ruby/bench/server.sh [--policies "classic ..."] [server.py options:
#                        --pool N --connections 10,50 --spinners 0,1,2
#                        --seconds 5 --rounds 3 --no-processes --json OUT.json]
#   ruby/bench/server.sh --pool 8 >OUT.md     # the thread pool (issue 56)
#
# A thread per connection by default: with the defaults (2 x 3 cells, 3
# Rubies and the processes control, 3 rounds of 5 s) it takes about 8
# minutes. --pool 8: 8 worker threads serving 16 connections in turn
# (gunicorn gthread's design, as cpython/bench/server.sh --pool 8); with
# the defaults (0-2 CPU threads, 9 Rubies and the processes control, 3
# rounds of 5 s) it takes about 9 minutes.
#
# --policies: the RUBY_RUST_GIL values run beside stock and the default
# (default: "classic"; with --pool, every other preset and priority,laps=3).
# Builds both Rubies first (ruby/build.sh --stock: about 20 minutes the
# first time, cached after) and installs wrk with apt-get if it is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
policies="classic"
for a in "$@"; do
    case "$a" in
        --pool|--pool=*)
            # The thread pool: every preset but the default's own, and issue 56's candidate.
            policies="classic lazy priority-lazy monitor priority-monitor priority-lazy-monitor priority,laps=3"
            break ;;
    esac
done
if [ "${1:-}" = --policies ]; then
    [ $# -ge 2 ] || { echo "server.sh: --policies needs a list" >&2; exit 2; }
    policies=$2
    shift 2
fi
case "${1:-}" in -h|--help) sed -n '2,25p' "$0"; exit 0 ;; esac

if ! command -v wrk >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "server.sh: installing wrk (apt-get install wrk)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
    else
        echo "server.sh: wrk not found; install it (Debian/Ubuntu: sudo apt-get install wrk)" >&2
        exit 1
    fi
fi

eval "$(bash "$repo/ruby/build.sh" --stock | grep -E '^RUBY_(STOCK|RUSTGIL)=')"
rubies=(--ruby "stock=$RUBY_STOCK/bin/ruby" --ruby "default=$RUBY_RUSTGIL/bin/ruby")
for p in $policies; do
    rubies+=(--ruby "$p=$RUBY_RUSTGIL/bin/ruby RUBY_RUST_GIL=$p")
done
exec python3 "$repo/ruby/bench/server.py" "${rubies[@]}" "$@"
