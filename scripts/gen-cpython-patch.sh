#!/usr/bin/env bash
# Puts the shim into the CPython patch: cpython/shim/ceval_gil_rust.h,
# cpython/shim/ceval_gil_rust_observe.h, cpython/shim/_rustgilmodule.c and
# cpython/shim/rustgil.py become new files (Python/ceval_gil_rust.h,
# Python/ceval_gil_rust_observe.h, Modules/_rustgilmodule.c, Lib/rustgil.py) at the
# end of each cpython/patches/*.patch, so a
# builder applies one patch and runs ./configure --with-rust-gil; make.
# The rest of each patch (the edits to CPython's own files) is kept as it is.
#
#   scripts/gen-cpython-patch.sh           rewrite the patches
#   scripts/gen-cpython-patch.sh --check   fail if a patch is not what it would write
#   scripts/gen-cpython-patch.sh --print 3.13
#                                          print what it would write for 3.13
#                                          (cpython/build.sh applies that, so an
#                                          edited shim is built before it is
#                                          committed into the patch)
set -euo pipefail
cd "$(dirname "$0")/.."

# shim file -> its path in a CPython tree
declare -A target=(
    [cpython/shim/_rustgilmodule.c]=Modules/_rustgilmodule.c
    [cpython/shim/ceval_gil_rust.h]=Python/ceval_gil_rust.h
    [cpython/shim/ceval_gil_rust_observe.h]=Python/ceval_gil_rust_observe.h
    [cpython/shim/rustgil.py]=Lib/rustgil.py
)
order=(cpython/shim/_rustgilmodule.c cpython/shim/ceval_gil_rust.h cpython/shim/ceval_gil_rust_observe.h
       cpython/shim/rustgil.py)

# new_file SHIM: a git-style diff that creates target[SHIM] with its content.
new_file() {
    local shim=$1 path=${target[$1]} lines
    [ -s "$shim" ] || { echo "gen-cpython-patch: $shim is missing or empty" >&2; exit 1; }
    [ "$(tail -c 1 "$shim" | od -An -c | tr -d ' ')" = '\n' ] \
        || { echo "gen-cpython-patch: $shim does not end with a newline" >&2; exit 1; }
    lines=$(wc -l <"$shim")
    printf 'diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n' \
        "$path" "$path" "$path" "$lines"
    sed 's/^/+/' "$shim"
}

# generate PATCH: the patch's edits, without any section for a shim file,
# then a fresh section for each shim file.
generate() {
    local skip=() shim
    for shim in "${order[@]}"; do
        skip+=("${target[$shim]}")
    done
    awk -v skip="${skip[*]}" '
        BEGIN { n = split(skip, s, " "); for (i = 1; i <= n; i++) drop["a/" s[i]] = 1 }
        /^diff --git / { keep = !($3 in drop) }
        keep' "$1"
    for shim in "${order[@]}"; do
        new_file "$shim"
    done
}

if [ "${1:-}" = "--print" ]; then
    patch=cpython/patches/python-${2:-}-rust-gil.patch
    [ -f "$patch" ] || { echo "gen-cpython-patch: no patch for CPython '${2:-}' ($patch)" >&2; exit 1; }
    generate "$patch"
    exit 0
fi
case "${1:-}" in
    ""|--check) ;;
    *) echo "gen-cpython-patch: unknown argument '$1' (see the comment at the top)" >&2; exit 1 ;;
esac

status=0
for patch in cpython/patches/python-3.*-rust-gil.patch; do
    out=$(mktemp)
    generate "$patch" >"$out"
    if [ "${1:-}" = "--check" ]; then
        if ! diff -q "$patch" "$out" >/dev/null; then
            diff -u "$patch" "$out" | sed -n 1,40p >&2
            echo "gen-cpython-patch: $patch is stale; run scripts/gen-cpython-patch.sh and commit it." >&2
            status=1
        else
            echo "gen-cpython-patch: $patch is up to date"
        fi
        rm -f "$out"
    else
        cat "$out" >"$patch"
        rm -f "$out"
        echo "gen-cpython-patch: wrote $patch"
    fi
done
exit "$status"
