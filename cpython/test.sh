#!/usr/bin/env bash
# The CPython part of the test command: builds CPython 3.13 --with-rust-gil
# (cpython/build.sh, cached), checks that configure refuses --with-rust-gil
# with --disable-gil, a bad --with-rust-gil-policy and a missing library,
# runs the smoke test under every preset and CPython's own test suites
# (TESTS) under four (RUSTGIL_POLICIES, default: classic priority lazy
# priority-lazy-monitor, which between them take every path: the faithful
# protocol, the default, lazy release, the monitor; RUSTGIL_POLICIES=all for
# all seven) with the rust-gil interpreter, in parallel, with a per-test
# timeout (the whole list takes 2-3 minutes per policy on a 2-core machine). Then the same interpreter
# with a shared libpython (--enable-shared): what it exports, the smoke test
# under priority and classic, the suites under priority.
#
#   cpython/test.sh [extra regrtest arguments]
#
# Failures the stock build of the same source also has may be listed in
# cpython/known-failures.txt (regrtest --ignorefile patterns, each with its
# reason); any other failure fails.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
step() { printf '\n==> %s\n' "$*"; }
die() { printf 'cpython/test.sh: %s\n' "$*" >&2; exit 1; }

TESTS=(test_threading test_thread test_threadsignals test_sys test_gc test_signal test_fork1 test_os
       test_subprocess test_queue test_concurrent_futures test_interpreters test__interpreters test_capi
       test_asyncio)

step "the CPython patch carries the current shim"
bash scripts/gen-cpython-patch.sh --check

step "build CPython 3.13 --with-rust-gil"
out=$(bash cpython/build.sh)
printf '%s\n' "$out"
RUSTGIL_PYTHON=$(printf '%s\n' "$out" | sed -n 's/^RUSTGIL_PYTHON=//p')
RUSTGIL_BUILD=$(printf '%s\n' "$out" | sed -n 's/^RUSTGIL_BUILD=//p')
[ -x "$RUSTGIL_PYTHON" ] || die "the build did not produce an interpreter"

ALL_PRESETS=$("$RUSTGIL_PYTHON" -c "import _rustgil; print(' '.join(_rustgil.presets()))")
case ${RUSTGIL_POLICIES:-} in
    "") POLICIES=(classic priority lazy priority-lazy-monitor) ;;
    all) POLICIES=($ALL_PRESETS) ;;
    *) POLICIES=($RUSTGIL_POLICIES) ;;
esac
for policy in $ALL_PRESETS; do
    step "smoke test, PYTHON_RUST_GIL=$policy"
    PYTHON_RUST_GIL=$policy RUSTGIL_EXPECTED_POLICY=$policy "$RUSTGIL_PYTHON" cpython/smoke_test.py
done

step "configure refuses --with-rust-gil --disable-gil"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/Include"
cp "$RUSTGIL_BUILD"/{configure,config.guess,config.sub,install-sh} "$scratch/"
cp "$RUSTGIL_BUILD/Include/object.h" "$scratch/Include/"
if (cd "$scratch" && ./configure --with-rust-gil=/nowhere --disable-gil >configure.out 2>&1); then
    die "configure accepted --with-rust-gil with --disable-gil"
fi
grep -q 'cannot be combined with --disable-gil' "$scratch/configure.out" \
    || { cat "$scratch/configure.out" >&2; die "configure failed, but not with the expected message"; }
echo "configure: $(grep 'error:' "$scratch/configure.out")"

step "configure checks --with-rust-gil-policy"
for case in "--with-rust-gil=/nowhere --with-rust-gil-policy=fast|unknown GIL policy 'fast'" \
            "--with-rust-gil=/nowhere --with-rust-gil-policy=priority,spin=5|options after the policy must be KEY=N" \
            "--with-rust-gil=/nowhere --with-rust-gil-policy=priority,spin_us=5,|options after the policy must be KEY=N" \
            "--with-rust-gil=/nowhere --with-rust-gil-policy|needs a policy name" \
            "--with-rust-gil-policy=classic|--with-rust-gil-policy=classic needs --with-rust-gil"; do
    args=${case%%|*} message=${case#*|}
    # shellcheck disable=SC2086  # args is a list of options
    if (cd "$scratch" && ./configure $args >configure.out 2>&1); then
        die "configure accepted $args"
    fi
    grep -qF -- "$message" "$scratch/configure.out" \
        || { tail -5 "$scratch/configure.out" >&2; die "configure $args failed, but not with '$message'"; }
    echo "configure $args: $(grep 'error:' "$scratch/configure.out" | cut -c1-120)"
done

step "configure names what to install when the library is missing"
mkdir "$scratch/missing"
if (cd "$scratch/missing" && env -u RUST_GIL_CFLAGS -u RUST_GIL_LIBS \
        "$RUSTGIL_BUILD/configure" --with-rust-gil=/nowhere >configure.out 2>&1); then
    die "configure accepted --with-rust-gil=/nowhere"
fi
grep -q 'no usable gil-static.pc.*scripts/install.sh' "$scratch/missing/configure.out" \
    || { tail -5 "$scratch/missing/configure.out" >&2; die "configure failed, but not with the expected message"; }
echo "configure: $(grep 'error:' "$scratch/missing/configure.out" | cut -c1-160)..."

ignore=()
if grep -qv '^\s*\(#\|$\)' cpython/known-failures.txt 2>/dev/null; then
    grep -v '^\s*\(#\|$\)' cpython/known-failures.txt | sed 's/[[:space:]].*//' >"$scratch/ignore"
    ignore=(--ignorefile "$scratch/ignore")
fi
# A job started in the background inherits SIGINT and SIGQUIT ignored, and
# CPython's signal tests need them at their defaults (one in test_threading
# then hangs until its timeout). bash cannot undo an inherited ignore; perl
# (in every Debian system) can, before it execs the test run.
with_default_signals() {
    perl -e '$SIG{INT} = $SIG{QUIT} = "DEFAULT"; exec {$ARGV[0]} @ARGV or die "exec $ARGV[0]: $!\n"' "$@"
}
for policy in "${POLICIES[@]}"; do
    step "CPython's own tests, PYTHON_RUST_GIL=$policy: ${TESTS[*]}"
    PYTHON_RUST_GIL=$policy with_default_signals "$RUSTGIL_PYTHON" -m test -j"$(nproc)" --timeout 900 -W "${ignore[@]}" "$@" "${TESTS[@]}"
done

step "shared libpython (--enable-shared): build, exports, smoke test, thread suites"
out=$(bash cpython/build.sh --shared)
SHARED_PYTHON=$(printf '%s\n' "$out" | sed -n 's/^RUSTGIL_SHARED_PYTHON=//p')
[ -x "$SHARED_PYTHON" ] || die "the --shared build did not produce an interpreter"
libpython=$(dirname "$SHARED_PYTHON")/../lib/libpython3.13.so.1.0
ldd "$SHARED_PYTHON" | grep -F "$(cd "$(dirname "$libpython")" && pwd)/libpython3.13.so.1.0" >/dev/null \
    || { ldd "$SHARED_PYTHON" >&2; die "the --shared interpreter does not load its own libpython3.13.so"; }
# What libpython exports: CPython's API (Py*, _Py*, PY_TIMEOUT_MAX) and the
# init functions of its built-in modules, _rustgil's among them; nothing of
# the library (gil_*) or the Rust standard library (mangled _ZN / _R names):
# gil-static.pc links libgil.a with --exclude-libs, and _rustgil is built in.
exports=$(nm -D --defined-only "$libpython" | awk '{ print $3 }')
[ "$(printf '%s\n' "$exports" | wc -l)" -gt 1000 ] || die "nm -D found too few exports in $libpython"
foreign=$(printf '%s\n' "$exports" | grep -Ev '^(_?Py|PY_TIMEOUT_MAX$)' || true)
[ -z "$foreign" ] || { printf '%s\n' "$foreign" | sed -n 1,20p >&2; die "$libpython exports symbols that are not CPython's"; }
printf '%s\n' "$exports" | grep -x PyInit__rustgil >/dev/null || die "$libpython does not carry _rustgil"
! printf '%s\n' "$exports" | grep '^_PyRustGil' >/dev/null || die "$libpython exports the shim's internals"
echo "libpython3.13.so.1.0 exports $(printf '%s\n' "$exports" | wc -l) symbols, all CPython's (Py*, _Py*, PY_TIMEOUT_MAX)"
for policy in priority classic; do
    step "shared libpython: smoke test, PYTHON_RUST_GIL=$policy"
    PYTHON_RUST_GIL=$policy RUSTGIL_EXPECTED_POLICY=$policy "$SHARED_PYTHON" cpython/smoke_test.py
done
step "shared libpython: CPython's own tests, PYTHON_RUST_GIL=priority: ${TESTS[*]}"
PYTHON_RUST_GIL=priority with_default_signals "$SHARED_PYTHON" -m test -j"$(nproc)" --timeout 900 -W "${ignore[@]}" "$@" "${TESTS[@]}"
