#!/usr/bin/env bash
# HTTP servers loaded by wrk: stock CPython vs the rust-gil build under every
# preset and priority,spin_us=0, with the processes control, in one run;
# writes a Markdown report, and the raw numbers beside it as OUT.json.
#
#   cpython/bench/server.sh OUT.md [server.py options: --seconds S --repeat N
#                                   --connections 1,10,50,200 --spinners 0,1,2 --diag ...]
#   cpython/bench/server.sh OUT.md --pool 8 [server.py options]
#   cpython/bench/server.sh OUT.md --version 3.13 [...]
#
# The first: a thread per connection (http.server.ThreadingHTTPServer,
# issue 14); with the defaults (4 x 3 cells, 9 interpreters and the
# processes control, 3 rounds of 5 s) it takes about 40 minutes (38 on
# 2026-11-27; up to 80 when the machine is slow).
#
# --pool 8: a pool of 8 worker threads serving 16 keep-alive connections in
# turn (gunicorn gthread's design, issue 56; server.py --help), with
# priority,laps=3 (as priority+laps3) beside the others; with the defaults
# (0-2 CPU threads, 10 interpreters and the processes control, 3 rounds of
# 5 s) it takes about 11 minutes.
#
# --version picks the CPython both interpreters are built from
# (cpython/build.sh --version, default 3.14). Builds both interpreters first
# (cached: cpython/build.sh --stock) and installs wrk with apt-get if it is
# missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: cpython/bench/server.sh OUT.md [server.py options]" >&2
    exit 2
fi
out=$1
shift
version=() extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || { echo "server.sh: --version needs 3.13 or 3.14" >&2; exit 2; }
                   version=(--version "$2"); shift 2 ;;
        *) extra+=("$1"); shift ;;
    esac
done

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

eval "$(bash "$repo/cpython/build.sh" "${version[@]}" --stock | grep -E '^(STOCK|RUSTGIL)_PYTHON=')"
py=(--python "stock=$STOCK_PYTHON")
for p in $("$RUSTGIL_PYTHON" -c "import _rustgil; print(' '.join(_rustgil.presets()))"); do
    py+=(--python "$p=$RUSTGIL_PYTHON PYTHON_RUST_GIL=$p")
done
# The priority class without its spin, as in policies.sh.
py+=(--python "priority+spin0=$RUSTGIL_PYTHON PYTHON_RUST_GIL=priority,spin_us=0")
# The thread pool's candidate for the default (issue 56): the bound on laps.
for a in "${extra[@]}"; do
    case "$a" in
        --pool|--pool=*) py+=(--python "priority+laps3=$RUSTGIL_PYTHON PYTHON_RUST_GIL=priority,laps=3"); break ;;
    esac
done

python3 "$repo/cpython/bench/server.py" "${py[@]}" --out "$out" --json "${out%.md}.json" "${extra[@]}" >/dev/null
echo "server.sh: wrote $out and ${out%.md}.json" >&2
