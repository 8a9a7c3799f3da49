#!/usr/bin/env bash
# A thread-per-connection Ruby server (ruby/bench/server.rb) beside 0-2
# CPU-bound Ruby threads, loaded by wrk: stock Ruby 3.3, the lock's default
# (RUBY_RUST_GIL unset: priority) and classic, side by side in one run, with
# the processes control (stock beside the same spinning work as processes).
# Prints a Markdown table (requests/s, p50/p99/p99.9, each as a ratio to
# stock too) on stdout.
#
#   ruby/bench/server.sh [--policies "classic ..."] [server.py options:
#                        --connections 10,50 --spinners 0,1,2 --seconds 5
#                        --rounds 3 --no-processes --json OUT.json]
#
# --policies: the RUBY_RUST_GIL values run beside stock and the default
# (default: "classic"). Builds both Rubies first (ruby/build.sh --stock:
# about 20 minutes the first time, cached after) and installs wrk with
# apt-get if it is missing. With the defaults (2 x 3 cells, 3 Rubies and
# the processes control, 3 rounds of 5 s) it takes about 8 minutes.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
policies="classic"
if [ "${1:-}" = --policies ]; then
    [ $# -ge 2 ] || { echo "server.sh: --policies needs a list" >&2; exit 2; }
    policies=$2
    shift 2
fi
case "${1:-}" in -h|--help) sed -n '2,17p' "$0"; exit 0 ;; esac

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
