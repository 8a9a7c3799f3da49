#!/usr/bin/env bash
# Stock CPython vs the rust-gil build under each policy, in one run, every
# scenario of issue 5; writes a Markdown report (default
# build/policies-V.md; docs/policies.md quotes its tables).
#
#   cpython/bench/policies.sh [OUT.md] [--version 3.13|3.14] [--repeat N] [--seconds S]
#
# --version picks the CPython both interpreters are built from
# (cpython/build.sh --version, default 3.14); the other options go to
# gilbench.py.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
minor=3.14 out="" extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || { echo "policies.sh: --version needs 3.13 or 3.14" >&2; exit 1; }
                   minor=$2; shift 2 ;;
        --*) extra+=("$1"); shift ;;
        *) if [ -z "$out" ] && [ ${#extra[@]} -eq 0 ]; then out=$1; else extra+=("$1"); fi; shift ;;
    esac
done
[ -n "$out" ] || out=$repo/build/policies-$minor.md
# The rounds per cell, as gilbench.py will read them (the last --repeat wins).
rounds=3
for ((i = 0; i < ${#extra[@]}; i++)); do
    case ${extra[i]} in
        --repeat) rounds=${extra[i + 1]:-3} ;;
        --repeat=*) rounds=${extra[i]#--repeat=} ;;
    esac
done

eval "$(bash "$repo/cpython/build.sh" --version "$minor" --stock | grep -E '^(STOCK|RUSTGIL)_PYTHON=')"
version=$("$STOCK_PYTHON" -c 'import platform; print(platform.python_version())')
shown=" --version $minor"
py=(--python "stock=$STOCK_PYTHON")
names=(stock)
# Every preset, and the priority class without its spin (the default before it).
for p in $("$RUSTGIL_PYTHON" -c "import _rustgil; print(' '.join(_rustgil.presets()))"); do
    py+=(--python "$p=$RUSTGIL_PYTHON PYTHON_RUST_GIL=$p")
    names+=("$p")
done
py+=(--python "priority+spin0=$RUSTGIL_PYTHON PYTHON_RUST_GIL=priority,spin_us=0")
names+=(priority+spin0)

# Parts are kept until the report is written, so an interrupted run resumes.
tmp="$repo/build/bench-parts-$minor"
mkdir -p "$tmp"
run() { # name, spinners, scenarios
    if [ -s "$tmp/$1.md" ] && [ -e "$tmp/$1.limit" ]; then
        echo "policies.sh: $3: kept from an earlier, interrupted run" >&2
        return
    fi
    echo "policies.sh: $3 (spinners $2)" >&2
    python3 "$repo/cpython/bench/gilbench.py" "${py[@]}" --spinners "$2" --scenarios "$3" \
        --repeat 3 "${extra[@]}" --out "$tmp/$1.part" --limit-out "$tmp/$1.limit-part" >/dev/null
    mv "$tmp/$1.limit-part" "$tmp/$1.limit"
    mv "$tmp/$1.part" "$tmp/$1.md"
}
run echo 0,1,2 echo,pingpong,pingpong99
run asyncio 0,1,2 asyncio1,asyncio10
run udp 0,1,2,3,4 udpmean,udpp99
run cpu 1,2,3,4 cpu
run select 0 select

{
    echo "# GIL policies on CPython $version: stock vs the rust-gil build"
    echo
    echo "Command: \`cpython/bench/policies.sh$shown ${extra[*]:-}\`; date: $(date -u +%Y-%m-%d);"
    echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/{print $2}') GiB, shared."
    echo
    echo "Interpreters (the version, and the options text of the lock):"
    echo
    sed -n '3,/^$/p' "$tmp/echo.md" | sed '/^$/d; s/^/- /'
    echo
    echo "## Against the limit"
    echo
    echo "Each cell with spinning threads: the same server beside the same spinning work"
    echo "as separate processes (\"processes\", the limit for this machine: no lock shared,"
    echo "only the CPUs), and each interpreter's median over it: 1.00x is as good as the"
    echo "limit. $rounds interleaved rounds, medians."
    echo
    header="| scenario | spinners | processes (the limit)"
    rule="|---|---:|---:"
    for n in "${names[@]}"; do header+=" | $n / limit"; rule+="|---:"; done
    echo "$header |"
    echo "$rule|"
    cat "$tmp"/{echo,asyncio,udp}.limit
    echo
    echo "## Every figure"
    echo
    echo "Each row: $rounds interleaved rounds, medians; ratios against stock and against the limit."
    for f in echo asyncio udp cpu select; do
        echo
        sed -n '/^|/,$p' "$tmp/$f.md"
    done
} >"$out"
rm -rf "$tmp"
echo "policies.sh: wrote $out" >&2
