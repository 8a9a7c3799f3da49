#!/usr/bin/env bash
# The CPython part of the test command, for CPython 3.14 and 3.13 built
# --with-rust-gil (cpython/build.sh --version, cached). For each version:
# the smoke test under every preset; configure refuses --with-rust-gil with
# --disable-gil, a bad --with-rust-gil-policy and a missing library;
# CPython's own test suites (TESTS, and on 3.14 also TESTS_314, whose
# tests that depend on timing, RACY_314, run alone with three tries).
# 3.14's suites run under four presets (RUSTGIL_POLICIES, default: classic priority
# lazy priority-lazy-monitor, which between them take every path: the
# faithful protocol, the default, lazy release, the monitor;
# RUSTGIL_POLICIES=all for all seven), 3.13's under the default, priority,
# only (RUSTGIL_POLICIES_313 to change that). Each suite run is in parallel,
# with a per-test timeout and a timeout on the whole run, so that a hang
# fails the step (about 3 minutes per run on a 2-core machine). Then 3.14
# with a shared libpython (--enable-shared): what it exports, the smoke test
# under priority and classic, the suites under priority.
#
#   cpython/test.sh [extra regrtest arguments]
#
# CPYTHON_VERSIONS="3.14 3.13" (the default) names the versions to test.
# Failures the stock build of the same source also has may be listed in
# cpython/known-failures.txt (regrtest --ignorefile patterns, each with its
# reason); any other failure fails.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
step_name='' step_start=$SECONDS
step() {
    [ -z "$step_name" ] || printf '==> %s: %d s\n' "$step_name" $((SECONDS - step_start))
    step_name=$* step_start=$SECONDS
    printf '\n==> %s\n' "$*"
}
die() { printf 'cpython/test.sh: %s\n' "$*" >&2; exit 1; }

TESTS=(test_threading test_thread test_threadsignals test_sys test_gc test_signal test_fork1 test_os
       test_subprocess test_queue test_concurrent_futures test_interpreters test__interpreters test_capi
       test_asyncio)
# New in 3.14: another process reads this one's thread states and GIL holder
# through _Py_DebugOffsets (_remote_debugging), or runs code in it at its
# next eval-breaker check (sys.remote_exec, PEP 768; test_sys has more).
TESTS_314=(test_external_inspection test_remote_pdb)
# Tests whose outcome depends on timing, as FILE:TEST. Each is left out of
# the suite run and run alone, and must pass in one of three tries: what
# never works still fails all three.
# - test_only_active_thread, racy in stock 3.14.7 as well (upstream
#   gh-136186): it reads the GIL's holder once, while the script's three
#   worker threads may still be taking their first turns, and finds none
#   between a release and the next take (stock: 1 failure in 150 runs
#   beside a busy test run). A holder that readers of _Py_DebugOffsets
#   never see fails all three tries.
# - test_attach_to_process_with(out)_colors: the child waits 10 s in all for
#   pdb's sys.remote_exec to land, then carries on as if unattached. Once,
#   in a CI run under priority, it did not land in time ("Function
#   returned: 1", the test 10 s slower than usual); 45 runs alone each, of
#   stock and of the lock, 20 of them beside six busy loops, all passed.
RACY_314=(test_external_inspection:test_only_active_thread
          test_remote_pdb:test_attach_to_process_without_colors
          test_remote_pdb:test_attach_to_process_with_colors)
# regrtest's timeout per test file, which dumps every thread's traceback
# (faulthandler) before it kills one; and a bound on a whole run.
TEST_TIMEOUT=600 RUN_TIMEOUT=1800

versions=(${CPYTHON_VERSIONS:-3.14 3.13})
regrtest_args=("$@")

step "the CPython patches carry the current shim"
bash scripts/gen-cpython-patch.sh --check

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
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

# suites PYTHON POLICY MINOR: CPython's own tests under POLICY, bounded.
suites() {
    local python=$1 policy=$2 minor=$3 tests=("${TESTS[@]}") racy=() skip=() r t try
    if [ "$minor" != 3.13 ]; then
        tests+=("${TESTS_314[@]}")
        racy=("${RACY_314[@]}")
    fi
    for r in "${racy[@]}"; do
        skip+=(--ignore="${r#*:}")
    done
    step "CPython $minor's own tests, PYTHON_RUST_GIL=$policy: ${tests[*]}"
    PYTHON_RUST_GIL=$policy with_default_signals timeout -k 60 "$RUN_TIMEOUT" "$python" -m test \
        -j"$(nproc)" --timeout "$TEST_TIMEOUT" -W "${ignore[@]}" "${skip[@]}" \
        "${regrtest_args[@]}" "${tests[@]}" \
        || die "CPython $minor's tests failed under PYTHON_RUST_GIL=$policy (status $?; 124: the run took over $RUN_TIMEOUT s)"
    for r in "${racy[@]}"; do
        t=${r#*:}
        for try in 1 2 3; do
            echo "$t (timing-dependent, alone), try $try of 3:"
            if PYTHON_RUST_GIL=$policy with_default_signals timeout -k 10 600 "$python" -m test \
                   -v -m "$t" "${r%%:*}" >"$scratch/racy.out" 2>&1; then
                grep -F "$t" "$scratch/racy.out" | grep -E '\.\.\. ok$' \
                    || { cat "$scratch/racy.out"; die "$t passed without running"; }
                continue 2
            fi
            grep -E '^(FAIL|ERROR|AssertionError)' "$scratch/racy.out" || tail -5 "$scratch/racy.out"
        done
        cat "$scratch/racy.out"
        die "$t failed three times under PYTHON_RUST_GIL=$policy"
    done
}

# configure_checks MINOR BUILD_TREE: what configure refuses, and how it says so.
configure_checks() {
    local minor=$1 build=$2 dir="$scratch/configure-$1"
    step "CPython $minor: configure refuses --with-rust-gil --disable-gil"
    mkdir -p "$dir/Include"
    cp "$build"/{configure,config.guess,config.sub,install-sh} "$dir/"
    cp "$build/Include/object.h" "$dir/Include/"
    if (cd "$dir" && ./configure --with-rust-gil=/nowhere --disable-gil >configure.out 2>&1); then
        die "configure accepted --with-rust-gil with --disable-gil"
    fi
    grep -q 'cannot be combined with --disable-gil' "$dir/configure.out" \
        || { cat "$dir/configure.out" >&2; die "configure failed, but not with the expected message"; }
    echo "configure: $(grep 'error:' "$dir/configure.out")"

    step "CPython $minor: configure checks --with-rust-gil-policy"
    local case args message
    for case in "--with-rust-gil=/nowhere --with-rust-gil-policy=fast|unknown GIL policy 'fast'" \
                "--with-rust-gil=/nowhere --with-rust-gil-policy=priority,spin=5|options after the policy must be KEY=N" \
                "--with-rust-gil=/nowhere --with-rust-gil-policy=priority,spin_us=5,|options after the policy must be KEY=N" \
                "--with-rust-gil=/nowhere --with-rust-gil-policy|needs a policy name" \
                "--with-rust-gil-policy=classic|--with-rust-gil-policy=classic needs --with-rust-gil"; do
        args=${case%%|*} message=${case#*|}
        # shellcheck disable=SC2086  # args is a list of options
        if (cd "$dir" && ./configure $args >configure.out 2>&1); then
            die "configure accepted $args"
        fi
        grep -qF -- "$message" "$dir/configure.out" \
            || { tail -5 "$dir/configure.out" >&2; die "configure $args failed, but not with '$message'"; }
        echo "configure $args: $(grep 'error:' "$dir/configure.out" | cut -c1-120)"
    done

    step "CPython $minor: configure names what to install when the library is missing"
    mkdir "$dir/missing"
    if (cd "$dir/missing" && env -u RUST_GIL_CFLAGS -u RUST_GIL_LIBS \
            "$build/configure" --with-rust-gil=/nowhere >configure.out 2>&1); then
        die "configure accepted --with-rust-gil=/nowhere"
    fi
    grep -q 'no usable gil-static.pc.*scripts/install.sh' "$dir/missing/configure.out" \
        || { tail -5 "$dir/missing/configure.out" >&2; die "configure failed, but not with the expected message"; }
    echo "configure: $(grep 'error:' "$dir/missing/configure.out" | cut -c1-160)..."
}

for minor in "${versions[@]}"; do
    case "$minor" in
        3.14) case ${RUSTGIL_POLICIES:-} in
                  "") policies=(classic priority lazy priority-lazy-monitor) ;;
                  *) policies=(${RUSTGIL_POLICIES}) ;;
              esac ;;
        3.13) policies=(${RUSTGIL_POLICIES_313:-priority}) ;;
        *) die "CPYTHON_VERSIONS: no patch for CPython '$minor' (3.13 and 3.14 have one)" ;;
    esac
    step "build CPython $minor --with-rust-gil"
    out=$(bash cpython/build.sh --version "$minor")
    printf '%s\n' "$out"
    python=$(printf '%s\n' "$out" | sed -n 's/^RUSTGIL_PYTHON=//p')
    build=$(printf '%s\n' "$out" | sed -n 's/^RUSTGIL_BUILD=//p')
    [ -x "$python" ] || die "the build did not produce an interpreter"

    all_presets=$("$python" -c "import _rustgil; print(' '.join(_rustgil.presets()))")
    [ "${policies[*]}" != all ] || policies=($all_presets)
    for policy in $all_presets; do
        step "CPython $minor: smoke test, PYTHON_RUST_GIL=$policy"
        PYTHON_RUST_GIL=$policy RUSTGIL_EXPECTED_POLICY=$policy timeout -k 10 600 "$python" cpython/smoke_test.py
    done
    configure_checks "$minor" "$build"
    for policy in "${policies[@]}"; do
        suites "$python" "$policy" "$minor"
    done
done

case " ${versions[*]} " in
    *" 3.14 "*) shared_minor=3.14 ;;
    *) shared_minor=${versions[0]} ;;
esac
lib=libpython$shared_minor.so.1.0
step "CPython $shared_minor, shared libpython (--enable-shared): build, exports"
out=$(bash cpython/build.sh --version "$shared_minor" --shared)
SHARED_PYTHON=$(printf '%s\n' "$out" | sed -n 's/^RUSTGIL_SHARED_PYTHON=//p')
[ -x "$SHARED_PYTHON" ] || die "the --shared build did not produce an interpreter"
libpython=$(cd "$(dirname "$SHARED_PYTHON")/../lib" && pwd)/$lib
ldd "$SHARED_PYTHON" | grep -F "$libpython" >/dev/null \
    || { ldd "$SHARED_PYTHON" >&2; die "the --shared interpreter does not load its own $lib"; }
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
echo "$lib exports $(printf '%s\n' "$exports" | wc -l) symbols, all CPython's (Py*, _Py*, PY_TIMEOUT_MAX)"
for policy in priority classic; do
    step "CPython $shared_minor, shared libpython: smoke test, PYTHON_RUST_GIL=$policy"
    PYTHON_RUST_GIL=$policy RUSTGIL_EXPECTED_POLICY=$policy timeout -k 10 600 "$SHARED_PYTHON" cpython/smoke_test.py
done
suites "$SHARED_PYTHON" priority "$shared_minor"
step "done"
