#!/usr/bin/env bash
# pyperformance on stock CPython vs the rust-gil build (its default policy,
# or the one PYTHON_RUST_GIL names), in alternating rounds, with pyperf's
# comparison of each round.
#
#   cpython/bench/pyperformance.sh [--version 3.13|3.14] [--benchmarks LIST|all] [--rounds N] [--fast] [--out DIR]
#
#   --version     the CPython both interpreters are built from
#                 (cpython/build.sh --version, default 3.14)
#   --benchmarks  comma-separated pyperformance benchmarks, or 'all' (the
#                 whole default suite); default: the subset below
#   --rounds      stock, rust-gil, stock, rust-gil, ... (default 2)
#   --fast        pyperformance's --fast (fewer processes per benchmark)
#   --out DIR     where the JSON results go (default build/pyperformance)
#
# pyperformance itself is installed into a venv under the build cache; it
# makes one venv per interpreter for the benchmarks' own dependencies, in
# the directory it runs in, so it runs in the build cache too.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}
say() { printf 'pyperformance.sh: %s\n' "$*" >&2; }
die() { printf 'pyperformance.sh: %s\n' "$*" >&2; exit 1; }

# Pure-Python benchmarks with few dependencies, plus the ones that use
# threads or asyncio (where the GIL is taken and released most).
benchmarks=chaos,deltablue,fannkuch,float,go,hexiom,json_dumps,json_loads,nbody,nqueens,pickle,unpickle,pyflate,raytrace,regex_v8,richards,spectral_norm,unpack_sequence,generators,coroutines,deepcopy,logging,pathlib,comprehensions,async_tree,async_tree_io,concurrent_imap,asyncio_tcp,gc_collect,telco
rounds=2 fast=() out="$repo/build/pyperformance" version=()
while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || die "--version needs 3.13 or 3.14"; version=(--version "$2"); shift 2 ;;
        --benchmarks) [ $# -ge 2 ] || die "--benchmarks needs a list"; benchmarks=$2; shift 2 ;;
        --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; rounds=$2; shift 2 ;;
        --fast) fast=(--fast); shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive number"
[ "$benchmarks" = all ] && benchmarks=default

eval "$(bash "$repo/cpython/build.sh" "${version[@]}" --stock | grep -E '^(STOCK|RUSTGIL)_PYTHON=')"
venv="$cache/pyperformance-venv"
if [ ! -x "$venv/bin/pyperformance" ]; then
    say "installing pyperformance into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet pyperformance==1.14.0
fi
mkdir -p "$out" "$cache/pyperformance-work"
out=$(cd "$out" && pwd)
cd "$cache/pyperformance-work"
policy=$("$RUSTGIL_PYTHON" -c 'import _rustgil; print("GIL options", _rustgil.options())')
for r in $(seq "$rounds"); do
    for who in stock rustgil; do
        py=$STOCK_PYTHON
        [ "$who" = rustgil ] && py=$RUSTGIL_PYTHON
        say "round $r: $who ($py)"
        rm -f "$out/$who-$r.json"
        "$venv/bin/pyperformance" run "${fast[@]}" --python="$py" -b "$benchmarks" \
            --inherit-environ PYTHON_RUST_GIL,PYTHONRUSTGIL -o "$out/$who-$r.json"
    done
done
for r in $(seq "$rounds"); do
    echo
    echo "## Round $r: stock vs rust-gil ($policy)"
    echo
    "$venv/bin/python" -m pyperf compare_to "$out/stock-$r.json" "$out/rustgil-$r.json" \
        --table --table-format md -G
done
