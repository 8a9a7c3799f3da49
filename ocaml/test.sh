#!/usr/bin/env bash
# OCaml 5.3 on the rust-gil lock: builds it (ocaml/build.sh), then
#
#   0. the patch alone (no -DCAML_RUST_GIL) changes no code: the systhreads
#      stubs preprocess to exactly what the pristine source gives;
#   1. start-up errors: a bad OCAML_RUST_GIL stops start-up naming it, and
#      a trace and the accounting report asked for in it are written, also
#      on Sys.Break, a signal handler's exit and an uncaught exception;
#   2. ocaml/smoke_test.ml, native and bytecode, under every preset;
#   3. OCaml's own thread tests (testsuite/tests/lib-systhreads and
#      lib-threads, through ocamltest) under every preset
#      (RUSTGIL_OCAML_POLICIES="priority classic" to choose), four presets
#      at a time (RUSTGIL_OCAML_JOBS=N to change).
#
# Tests left out, with their reason, are in ocaml/known-failures.txt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'ocaml/test.sh: %s\n' "$*"; }
die() { printf 'ocaml/test.sh: %s\n' "$*" >&2; exit 1; }

presets=(classic priority lazy priority-lazy monitor priority-monitor priority-lazy-monitor)
read -r -a policies <<<"${RUSTGIL_OCAML_POLICIES:-${presets[*]}}"
# Each preset's suites write files named after it: a preset named twice
# would run into its own files.
[ "$(printf '%s\n' "${policies[@]}" | sort | uniq -d)" = "" ] \
    || die "RUSTGIL_OCAML_POLICIES names a preset twice: ${policies[*]}"

build_out=$(bash "$repo/ocaml/build.sh") || die "ocaml/build.sh failed"
printf '%s\n' "$build_out" | grep -v '^OCAML_' || true
eval "$(printf '%s\n' "$build_out" | grep -E '^OCAML_[A-Z_]+=')"
[ -x "${OCAML_RUSTGIL:-}/bin/ocamlopt" ] || die "build.sh did not produce the compiler"
export PATH="$OCAML_RUSTGIL/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- 0. the patch alone changes no code ------------------------------------
say "the patch without CAML_RUST_GIL preprocesses to the pristine stubs"
tree=$OCAML_RUSTGIL_BUILD
pristine=$OCAML_SOURCE
for variant in "" -DNATIVE_CODE; do
    for side in "$tree" "$pristine"; do
        # shellcheck disable=SC2086
        cc -E -P -D_FILE_OFFSET_BITS=64 $variant -I"$tree/runtime" -I"$side/otherlibs/systhreads" \
            "$side/otherlibs/systhreads/st_stubs.c" >"$work/pp-$(basename "$side")$variant.c"
    done
    cmp -s "$work/pp-$(basename "$tree")$variant.c" "$work/pp-$(basename "$pristine")$variant.c" \
        || die "st_stubs.c${variant:+ ($variant)}: the patched tree differs from the pristine one without CAML_RUST_GIL"
done
say "    st_stubs.c, bytecode and native: the same"

# ---- the smoke test, compiled both ways ------------------------------------
cp "$repo/ocaml/smoke_test.ml" "$work/"
(cd "$work" && ocamlopt -I +unix -I +threads unix.cmxa threads.cmxa smoke_test.ml -o smoke.opt \
    && ocamlc -I +unix -I +threads unix.cma threads.cma smoke_test.ml -o smoke.byte) >"$work/compile.log" 2>&1 \
    || { cat "$work/compile.log" >&2; die "the smoke test does not compile"; }
ldd "$work/smoke.opt" | grep libgil >/dev/null || die "smoke.opt is not linked against libgil"

# ---- 1. start-up errors and the observers ----------------------------------
say "a bad OCAML_RUST_GIL is a start-up error naming the value"
for case in "bogus|unknown GIL policy 'bogus' (known: classic, priority," \
            "priority,laps=99|laps must be a number from 0 to 16, not '99'" \
            "priority,|a trailing ','" \
            "priority,trace=/nonexistent-dir/t.json|the GIL trace file '/nonexistent-dir/t.json' cannot be created: No such file"; do
    bad=${case%%|*} want=${case#*|}
    for prog in smoke.opt smoke.byte; do
        set +e
        out=$(OCAML_RUST_GIL="$bad" "$work/$prog" 2>&1)
        rc=$?
        set -e
        [ "$rc" = 2 ] || die "$prog, OCAML_RUST_GIL='$bad': exit status $rc, not 2 ($out)"
        case "$out" in
            *"OCAML_RUST_GIL='$bad': $want"*) ;;
            *) die "$prog, OCAML_RUST_GIL='$bad': unexpected message: $out" ;;
        esac
        case "$out" in *"ok "*) die "$prog, OCAML_RUST_GIL='$bad': the program ran" ;; esac
    done
done

say "OCAML_RUST_GIL takes the whole grammar: interval, laps, accounting, a trace"
out=$(OCAML_RUST_GIL="priority-lazy,interval_us=2000,lazy_us=30,laps=3,stats=1,trace=$work/gil-%p.json" \
    timeout 300 "$work/smoke.opt" 2>&1) || die "smoke.opt with a trace failed: $out"
trace=$(find "$work" -maxdepth 1 -name 'gil-*.json' | sed -n 1p)
[ -n "$trace" ] && grep '"traceEvents"' "$trace" >/dev/null || die "no trace written at exit into $work"
grep 'GIL options priority-lazy,interval_us=2000,lazy_us=30,spin_us=200,laps=3, pid' "$trace" >/dev/null \
    || die "the trace's title does not give the options text the lock is"
# The fork child traces into its own file (the name has %p).
[ "$(find "$work" -maxdepth 1 -name 'gil-*.json' | wc -l)" = 2 ] || die "the fork child wrote no trace of its own"
# stats=1: the accounting at exit, once (the smoke test forks: the child
# does not report), with a row for each of the program's threads.
[ "$(grep -c '^ocaml: rust-gil stats, pid' <<<"$out")" = 1 ] || die "stats=1: not one report at exit: $out"
grep -E '^ lock: [1-9][0-9]* acquisitions' <<<"$out" >/dev/null || die "stats=1: no lock counters: $out"
grep -E '^ waits \(us\): p50 [0-9.]+, p99' <<<"$out" >/dev/null || die "stats=1: no wait quantiles: $out"
[ "$(grep -cE '^ +[0-9]+ +[01] +[0-9]+ ' <<<"$out")" -ge 4 ] || die "stats=1: fewer thread rows than the smoke test's threads: $out"
grep 'switch interval 2000 us$' <<<"$out" >/dev/null || die "interval_us=2000 is not the lock's interval: $out"

say "the report and the trace are written on the ends OCaml handles: Sys.Break, a handler's exit, an uncaught exception"
# OCaml installs no handler for SIGINT or SIGTERM: unless the program asks
# (Sys.catch_break, Sys.set_signal), they kill it without exit(3), and
# nothing is written (docs/observability.md). Every end the runtime
# handles goes through exit(3), whose handlers write both.
cat >"$work/ends.ml" <<'EOF'
let () =
  Thread.join (Thread.create (fun () -> ()) ());
  match Sys.argv.(1) with
  | "break" ->
      Sys.catch_break true;
      Unix.kill (Unix.getpid ()) Sys.sigint;
      Unix.sleepf 60.
  | "term" ->
      Sys.set_signal Sys.sigterm (Sys.Signal_handle (fun _ -> exit 3));
      Unix.kill (Unix.getpid ()) Sys.sigterm;
      Unix.sleepf 60.
  | "raise" -> failwith "uncaught"
  | _ -> exit 4
EOF
(cd "$work" && ocamlopt -I +unix -I +threads unix.cmxa threads.cmxa ends.ml -o ends.opt) >"$work/compile.log" 2>&1 \
    || { cat "$work/compile.log" >&2; die "ends.ml does not compile"; }
for case in break:2 term:3 raise:2; do
    how=${case%:*} want=${case#*:}
    set +e
    out=$(OCAML_RUST_GIL="priority,stats=1,trace=$work/end-$how.json" timeout 120 "$work/ends.opt" "$how" 2>&1)
    rc=$?
    set -e
    [ "$rc" = "$want" ] || die "ends.opt $how: exit status $rc, not $want: $out"
    [ "$(grep -c '^ocaml: rust-gil stats, pid' <<<"$out")" = 1 ] || die "ends.opt $how: not one stats=1 report: $out"
    python3 -c 'import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["traceEvents"], "no events"
assert "GIL options priority" in doc["otherData"]["title"], doc["otherData"]["title"]' "$work/end-$how.json" \
        || die "ends.opt $how: $work/end-$how.json is not a whole trace"
    say "    $how (exit status $rc): the report and a whole trace"
done

say "the report prints the options text the lock is: OCaml's defaults spelled out"
for case in "priority|priority,spin_us=200" "classic|classic,interval_us=50000" "lazy|lazy" \
            "priority,spin_us=0|priority,spin_us=0"; do
    given=${case%%|*} want=${case#*|}
    out=$(OCAML_RUST_GIL="$given,stats=1" timeout 300 "$work/smoke.opt" 2>&1) || die "smoke.opt under '$given,stats=1' failed: $out"
    grep ", GIL options $want, switch interval" <<<"$out" >/dev/null \
        || die "'$given': the report does not print '$want': $(grep 'rust-gil stats' <<<"$out")"
done

say "the switch interval: OCaml's 50 ms under classic, 5 ms under the other presets"
for case in classic:50000 priority:5000 lazy:5000 monitor:5000 priority-lazy-monitor:5000 classic,interval_us=700:700; do
    policy=${case%:*} want=${case##*:}
    out=$(OCAML_RUST_GIL="$policy,stats=1" timeout 300 "$work/smoke.opt" 2>&1) || die "smoke.opt under $policy,stats=1 failed: $out"
    grep "switch interval $want us\$" <<<"$out" >/dev/null || die "$policy: the interval is not $want us: $(grep 'rust-gil stats' <<<"$out")"
done

say "the spin: 200 us under the priority presets, none under the others, spin_us= wins"
for case in priority:200 priority-lazy-monitor:200 classic:0 lazy:0 monitor:0 priority,spin_us=0:0 classic,spin_us=20:20; do
    policy=${case%:*} want=${case##*:}
    out=$(OCAML_RUST_GIL="$policy,stats=1" timeout 300 "$work/smoke.opt" 2>&1) || die "smoke.opt under $policy,stats=1 failed: $out"
    grep "; spin $want us, [0-9]* CPU spin takes\$" <<<"$out" >/dev/null || die "$policy: the spin is not $want us: $(grep '^ lock:' <<<"$out")"
done

# ---- 2. the smoke test under every preset ----------------------------------
for policy in "${presets[@]}"; do
    for prog in smoke.opt smoke.byte; do
        out=$(OCAML_RUST_GIL=$policy timeout 300 "$work/$prog" 2>&1) \
            || die "$prog under $policy failed: $out"
        case "$out" in *"all passed"*) ;; *) die "$prog under $policy: $out" ;; esac
    done
    say "smoke test under $policy: native and bytecode passed"
done

# ---- 3. OCaml's own thread tests -------------------------------------------
# Each preset runs both directories in its own output directory and log,
# RUSTGIL_OCAML_JOBS presets at once (default 4: the tests mostly sleep
# and wait on each other, so on two CPUs four at once take 6.5 minutes
# where one at a time takes 13); the logs are read in the presets' order
# once all have finished.
jobs=${RUSTGIL_OCAML_JOBS:-4}
case "$jobs" in ''|*[!0-9]*|0) die "RUSTGIL_OCAML_JOBS must be a positive number, not '$jobs'" ;; esac
dirs=(tests/lib-systhreads tests/lib-threads)
suite() {
    local policy=$1 dir
    for dir in "${dirs[@]}"; do
        local name="$work/$(basename "$dir")-$policy"
        OCAML_RUST_GIL=$policy timeout 1200 make -C "$tree/testsuite" one DIR="$dir" \
            OCAMLTESTDIR="$name.out" TESTLOG="$name.log" failstamp="$name.stamp" >"$name.make" 2>&1 || true
    done
}
running=0
for policy in "${policies[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    suite "$policy" &
    running=$((running + 1))
done
wait
known=$(grep -v '^#' "$repo/ocaml/known-failures.txt" | awk 'NF { print $1 }' || true)
for policy in "${policies[@]}"; do
    for dir in "${dirs[@]}"; do
        log="$work/$(basename "$dir")-$policy.make"
        failed=$(grep -E "^ \.\.\. testing '[^']+' .*=> failed" "$log" | sed -E "s/^ \.\.\. testing '([^']+)'.*/\1/" | sort -u || true)
        unexpected=""
        for t in $failed; do
            printf '%s\n' "$known" | grep -xF -- "$dir/$t" >/dev/null || unexpected="$unexpected $t"
        done
        [ -z "$unexpected" ] || { tail -n 40 "$log" >&2; die "$dir under $policy: failed:$unexpected"; }
        summary=$(grep -E '^ +[0-9]+ tests (passed|failed|skipped)' "$log" | tr -s ' ' | paste -sd, - || true)
        [ -n "$summary" ] || { tail -n 40 "$log" >&2; die "$dir under $policy: no summary from ocamltest"; }
        grep -E '^ +0 unexpected errors' "$log" >/dev/null || { tail -n 40 "$log" >&2; die "$dir under $policy: unexpected errors"; }
        passed=$(grep -E '^ +[0-9]+ tests passed' "$log" | awk '{ print $1 }' || true)
        [ "${passed:-0}" -gt 0 ] || { tail -n 40 "$log" >&2; die "$dir under $policy: no test passed"; }
        say "$dir under $policy:$summary"
    done
done
say "all passed"
