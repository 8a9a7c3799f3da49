#!/usr/bin/env bash
# Stock CPython vs the rust-gil build under each policy, in one run, every
# scenario of issue 5; writes a Markdown report (default docs/policies.md).
#
#   cpython/bench/policies.sh [OUT.md] [--repeat N] [--seconds S]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/docs/policies.md}
shift || true
extra=("$@")

eval "$(bash "$repo/cpython/build.sh" --stock | grep -E '^(STOCK|RUSTGIL)_PYTHON=')"
py=(--python "stock=$STOCK_PYTHON")
# Every preset, and the bounded spin on top of the priority class.
for p in $("$RUSTGIL_PYTHON" -c "import _rustgil; print(' '.join(_rustgil.presets()))"); do
    py+=(--python "$p=$RUSTGIL_PYTHON PYTHON_RUST_GIL=$p")
done
py+=(--python "priority+spin50=$RUSTGIL_PYTHON PYTHON_RUST_GIL=priority,spin_us=50")

# Parts are kept until the report is written, so an interrupted run resumes.
tmp="$repo/build/bench-parts"
mkdir -p "$tmp"
run() { # name, spinners, scenarios
    if [ -s "$tmp/$1.md" ]; then
        echo "policies.sh: $3: kept from an earlier, interrupted run" >&2
        return
    fi
    echo "policies.sh: $3 (spinners $2)" >&2
    python3 "$repo/cpython/bench/gilbench.py" "${py[@]}" --spinners "$2" --scenarios "$3" \
        --repeat 3 "${extra[@]}" --out "$tmp/$1.part" >/dev/null
    mv "$tmp/$1.part" "$tmp/$1.md"
}
run echo 0,1,2 echo,pingpong
run asyncio 0,1 asyncio1,asyncio10
run udp 0,1,2,3,4 udpmean,udpp99
run cpu 1,2,3,4 cpu
run select 0 select

{
    echo "# GIL policies on CPython 3.13.5: stock vs the rust-gil build"
    echo
    echo "Command: \`cpython/bench/policies.sh ${extra[*]:-}\`; date: $(date -u +%Y-%m-%d);"
    echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/{print $2}') GiB, shared."
    echo "Each row: 3 interleaved rounds, medians; ratios against stock."
    for f in echo asyncio udp cpu select; do
        echo
        tail -n +4 "$tmp/$f.md"
    done
} >"$out"
rm -rf "$tmp"
echo "policies.sh: wrote $out" >&2
