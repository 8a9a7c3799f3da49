#!/usr/bin/env bash
# MicroPython on the rust-gil lock: builds it (micropython/build.sh), then
#
#   0. the patch without the module changes no machine code;
#   1. start-up errors: a bad MICROPY_RUST_GIL stops start-up, naming it;
#   2. micropython/smoke_test.py under every preset, and a clean exit while
#      threads wait for the lock (exit_with_threads.py, 200 runs);
#   3. MicroPython's own test suite (tests/run-tests.py: basics, thread,
#      extmod, micropython, float, ...) on the lock under priority (the
#      default) and classic, and on the stock-GIL build for comparison;
#   4. tests/thread/ under the other five presets.
#
#   micropython/test.sh            (RUSTGIL_MP_POLICIES="priority classic" to
#                                   change the full-suite presets)
#
# Tests left out of every run, with their reason, are in
# micropython/known-failures.txt. Takes ~4 minutes on 2 cores after a build.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'micropython/test.sh: %s\n' "$*"; }
die() { printf 'micropython/test.sh: %s\n' "$*" >&2; exit 1; }

build_out=$(bash "$repo/micropython/build.sh") || die "micropython/build.sh failed"
printf '%s\n' "$build_out" | grep -v '^MICROPY_' || true
eval "$(printf '%s\n' "$build_out" | grep -E '^MICROPY_[A-Z]+=')"
[ -x "${MICROPY_RUSTGIL:-}" ] && [ -x "${MICROPY_GIL:-}" ] || die "build.sh did not produce the interpreters"

# ---- 0. the patch alone changes no machine code ----------------------------
# With MICROPY_PY_THREAD_GIL_EXTERNAL=0 the new macros expand to what py/ did
# before: every object file of the patched tree disassembles as the stock
# GIL build's does.
say "the patch without the module compiles to the stock GIL's machine code"
stock_objs="$MICROPY_BUILDS/stock/ports/unix/build-gil"
patched_objs="$MICROPY_BUILDS/rustgil/ports/unix/build-patched"
compared=0
while IFS= read -r obj; do
    rel=${obj#"$stock_objs"/}
    [ -f "$patched_objs/$rel" ] || die "the patched build has no $rel"
    cmp -s <(objdump -d --no-show-raw-insn "$obj" | tail -n +4) \
        <(objdump -d --no-show-raw-insn "$patched_objs/$rel" | tail -n +4) \
        || die "$rel: the patched tree's code differs from the stock GIL build's"
    compared=$((compared + 1))
done < <(find "$stock_objs" -name '*.o' | sort)
[ "$compared" -gt 100 ] || die "only $compared object files compared"
say "    $compared object files, the same code"

# ---- 1. start-up errors ---------------------------------------------------
say "a bad MICROPY_RUST_GIL is a start-up error naming the value"
# Each value, and the start of the library's message about it.
for case in "bogus|unknown GIL policy 'bogus' (known: classic, priority," \
            " classic|unknown GIL policy ' classic'" \
            "CLASSIC|unknown GIL policy 'CLASSIC'" \
            "priority,laps=99|laps must be a number from 0 to 16, not '99'" \
            "classic,laps=3|laps needs a policy that bounds overtaking" \
            "priority,|a trailing ','" \
            "priority,trace=gil.txt|trace file 'gil.txt' must end in .json" \
            "priority,trace=/nonexistent-dir/t.json|the GIL trace file '/nonexistent-dir/t.json' cannot be created: No such file"; do
    bad=${case%%|*} want=${case#*|}
    set +e
    out=$(MICROPY_RUST_GIL="$bad" "$MICROPY_RUSTGIL" -c 'print("ran")' 2>&1)
    rc=$?
    set -e
    [ "$rc" = 1 ] || die "MICROPY_RUST_GIL='$bad': exit status $rc, not 1 ($out)"
    case "$out" in
        *"MICROPY_RUST_GIL='$bad': $want"*) ;;
        *) die "MICROPY_RUST_GIL='$bad': unexpected message: $out" ;;
    esac
    case "$out" in *ran*) die "MICROPY_RUST_GIL='$bad': the program ran" ;; esac
done
[ "$(MICROPY_RUST_GIL= "$MICROPY_RUSTGIL" -c 'import rustgil; print(rustgil.policy())')" = priority ] \
    || die "an empty MICROPY_RUST_GIL does not mean the default (priority)"

say "rustgil.options() is the options text the lock is, MicroPython's presets the library's"
for case in "priority|priority,spin_us=0" "classic|classic,interval_us=5000" "lazy|lazy" \
            "priority,spin_us=50,laps=2|priority,spin_us=50,laps=2"; do
    given=${case%%|*} want=${case#*|}
    got=$(MICROPY_RUST_GIL="$given" "$MICROPY_RUSTGIL" -c 'import rustgil; print(rustgil.options())') \
        || die "MICROPY_RUST_GIL='$given': status $? ($got)"
    [ "$got" = "$want" ] || die "MICROPY_RUST_GIL='$given': rustgil.options() is '$got', not '$want'"
done

say "MICROPY_RUST_GIL takes the whole grammar: interval, laps, accounting, a trace"
tracedir=$(mktemp -d)
out=$(MICROPY_RUST_GIL="priority-lazy,interval_us=2000,lazy_us=30,laps=3,stats=1,trace=$tracedir/gil-%p.json" \
    timeout 300 "$MICROPY_RUSTGIL" -c '
import rustgil, _thread, time
def spin():
    n = 0
    while n < 200000:
        n += 1
_thread.start_new_thread(spin, ())
spin()
time.sleep(0.2)
print(rustgil.policy(), rustgil.switch_interval())') || die "the whole grammar: status $? ($out)"
[ "$out" = "priority-lazy 2000" ] || die "the whole grammar: printed '$out', not 'priority-lazy 2000'"
trace=$(find "$tracedir" -name 'gil-*.json')
[ -n "$trace" ] && grep '"traceEvents"' "$trace" >/dev/null || die "no trace written at exit into $tracedir"
grep 'GIL options priority-lazy,interval_us=2000,lazy_us=30,spin_us=0,laps=3, pid' "$trace" >/dev/null \
    || die "the trace's title does not give the options text the lock is"
rm -rf "$tracedir"

say "a trace is written when SIGINT ends MicroPython (an uncaught KeyboardInterrupt)"
tracedir=$(mktemp -d)
cat >"$tracedir/sleep.py" <<'EOF'
import _thread, time
done = []
_thread.start_new_thread(lambda: done.append(1), ())
while not done:
    time.sleep(0.001)
print("ready")
time.sleep(60)
EOF
MICROPY_RUST_GIL="priority,trace=$tracedir/gil.json" "$MICROPY_RUSTGIL" "$tracedir/sleep.py" \
    >"$tracedir/out" 2>&1 &
pid=$!
# Bounded: 60 s for it to start; its sleep(60) bounds the rest.
for _ in $(seq 600); do
    grep -x ready "$tracedir/out" >/dev/null && break
    sleep 0.1
done
grep -x ready "$tracedir/out" >/dev/null || { kill "$pid" || true; die "the sleeper did not start: $(cat "$tracedir/out")"; }
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" = 1 ] || die "SIGINT: exit status $rc, not 1 (an uncaught KeyboardInterrupt): $(cat "$tracedir/out")"
grep KeyboardInterrupt "$tracedir/out" >/dev/null || die "SIGINT: no KeyboardInterrupt: $(cat "$tracedir/out")"
"$MICROPY_RUSTGIL" -c "
import json
doc = json.load(open('$tracedir/gil.json'))
assert doc['traceEvents'], 'no events'
assert 'GIL options priority' in doc['otherData']['title'], doc['otherData']['title']" \
    || die "SIGINT: $tracedir/gil.json is not a whole trace ($(wc -c <"$tracedir/gil.json" || true) bytes)"
rm -rf "$tracedir"

# ---- 2. smoke test under every preset -------------------------------------
presets=$("$MICROPY_RUSTGIL" -c 'import rustgil; print(" ".join(rustgil.presets()))')
for p in $presets; do
    say "smoke test, $p"
    MICROPY_RUST_GIL=$p RUSTGIL_EXPECTED_POLICY=$p timeout 300 "$MICROPY_RUSTGIL" \
        "$repo/micropython/smoke_test.py" || die "smoke test failed under $p"
done

# Exiting cancels the other threads while they wait for the lock, hold it
# in turn, go in and out of it or block outside the VM: the process must
# still end with status 0, having printed "exit".
say "exit while threads wait for the lock: 200 runs under priority and classic"
for i in $(seq 100); do
    for p in priority classic; do
        out=$(MICROPY_RUST_GIL=$p timeout 60 "$MICROPY_RUSTGIL" "$repo/micropython/exit_with_threads.py" 3 2>&1) \
            || die "exit_with_threads.py under $p, run $i: status $? ($out)"
        [ "$out" = exit ] || die "exit_with_threads.py under $p, run $i: printed '$out', not 'exit'"
    done
done

# ---- 3, 4. MicroPython's own tests ------------------------------------------
# The exclusions: one regex of the names in known-failures.txt.
exclude=$(grep -vE '^\s*(#|$)' "$repo/micropython/known-failures.txt" | awk '{print $1}' \
    | sed 's/\./\\./g' | paste -sd'|')
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# suite NAME BINARY [run-tests.py args...]
suite() {
    local name=$1 bin=$2
    shift 2
    say "run-tests.py${*:+ $*}: $name"
    local log="$results/$name.log"
    # select_poll_fd.py expects the open-files limit that upstream's CI sets.
    if ! (ulimit -n 1024 && cd "$MICROPY_TESTS" && MICROPY_MICROPYTHON=$bin \
            timeout 1200 python3 ./run-tests.py --result-dir "$results/$name" -e "($exclude)" "$@") >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        for out in "$results/$name"/*.out; do
            [ -f "$out" ] && { echo "--- $out" >&2; tail -n 20 "$out" >&2; }
        done
        die "MicroPython's tests failed: $name (log above)"
    fi
    grep -E '^[0-9]+ tests (performed|passed)' "$log" | sed "s/^/    $name: /"
}

for p in ${RUSTGIL_MP_POLICIES:-priority classic}; do
    MICROPY_RUST_GIL=$p suite "rustgil-$p" "$MICROPY_RUSTGIL"
done
suite stock-gil "$MICROPY_GIL"
for p in $presets; do
    case " ${RUSTGIL_MP_POLICIES:-priority classic} " in *" $p "*) continue ;; esac
    MICROPY_RUST_GIL=$p suite "rustgil-$p-thread" "$MICROPY_RUSTGIL" -d thread
done
say "all passed"
