#!/usr/bin/env bash
# Ruby 3.3 on the rust-gil lock: builds it (ruby/build.sh), then
#
#   0. the patch alone (no -DRUBY_RUST_GIL) changes no code: thread.c
#      (with thread_pthread.c and its headers) preprocesses to exactly
#      what the pristine source gives;
#   1. start-up errors: a bad RUBY_RUST_GIL or RUBY_MN_THREADS=1 stops
#      start-up naming it (exit status 2) and runs nothing; a trace and
#      the accounting report asked for in RUBY_RUST_GIL are written; each
#      preset's switch interval and spin; a Thread.new whose
#      pthread_create fails (ruby/fail_pthread_create.c, LD_PRELOAD'd)
#      leaves no waiter behind; the report and a whole trace when Ruby
#      ends on SIGINT, SIGTERM, an uncaught Interrupt or exception, exit;
#   2. ruby/smoke_test.rb under every preset;
#   3. the GVL instrumentation API's own test
#      (test/-ext-/thread/test_instrumentation_api.rb, with its extension:
#      exact per-thread event sequences) under every preset;
#   4. Ruby's own thread tests (test/ruby/test_thread.rb,
#      test_thread_queue.rb, test_thread_cv.rb, test_fiber.rb,
#      test_signal.rb, test_process.rb) and the Ractor tests
#      (bootstraptest/test_ractor.rb) under RUSTGIL_RUBY_POLICIES (default
#      "priority classic": the default and Ruby's own scheduling; set it to
#      "all" for every preset, about 4 minutes each on two cores).
#
# Failures stock Ruby shares, with stock's result, are in
# ruby/known-failures.txt; any other failure fails this script.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'ruby/test.sh: %s\n' "$*"; }
die() { printf 'ruby/test.sh: %s\n' "$*" >&2; exit 1; }

presets=(classic priority lazy priority-lazy monitor priority-monitor priority-lazy-monitor)
wanted=${RUSTGIL_RUBY_POLICIES:-priority classic}
[ "$wanted" = all ] && wanted="${presets[*]}"
read -r -a policies <<<"$wanted"
[ "$(printf '%s\n' "${policies[@]}" | sort | uniq -d)" = "" ] \
    || die "RUSTGIL_RUBY_POLICIES names a preset twice: ${policies[*]}"

build_out=$(bash "$repo/ruby/build.sh") || die "ruby/build.sh failed"
printf '%s\n' "$build_out" | grep -v '^RUBY_' || true
eval "$(printf '%s\n' "$build_out" | grep -E '^RUBY_[A-Z_]+=')"
ruby=$RUBY_RUSTGIL/bin/ruby
[ -x "$ruby" ] || die "build.sh did not produce $ruby"
tree=$RUBY_RUSTGIL_BUILD
ldd "$ruby" | grep libgil >/dev/null || die "$ruby is not linked against libgil"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- 0. the patch alone changes no code ------------------------------------
say "the patch without RUBY_RUST_GIL preprocesses to the pristine thread.c"
arch=$(cd "$tree/.ext/include" && ls -d *-linux* | sed -n 1p)
[ -n "$arch" ] || die "no configured arch headers in $tree/.ext/include"
for side in "$tree" "$RUBY_SOURCE"; do
    # From inside each tree, so that __FILE__ names the same files; with
    # __LINE__ fixed, since the patch's lines shift the ones below them
    # (Ruby's list and debug macros expand __LINE__).
    (cd "$side" && cc -E -P -U__LINE__ -D__LINE__=0 -DRUBY_EXPORT -I"$tree/.ext/include/$arch" -I./include -I. thread.c) \
        >"$work/pp-$(basename "$side").c" 2>"$work/pp.err" \
        || { cat "$work/pp.err" >&2; die "cannot preprocess $side/thread.c"; }
done
[ -s "$work/pp-$(basename "$tree").c" ] || die "the preprocessed thread.c is empty"
cmp -s "$work/pp-$(basename "$tree").c" "$work/pp-$(basename "$RUBY_SOURCE").c" \
    || die "thread.c: the patched tree differs from the pristine one without RUBY_RUST_GIL"
grep 'rustgil' "$work/pp-$(basename "$tree").c" >/dev/null && die "the shim is compiled in without RUBY_RUST_GIL"
say "    thread.c (thread_pthread.c, thread_pthread.h): the same"

# ---- 1. start-up errors and the observers ----------------------------------
say "a bad RUBY_RUST_GIL is a start-up error naming the value; nothing runs"
for case in "bogus|unknown GIL policy 'bogus' (known: classic, priority," \
            "priority,laps=99|laps must be a number from 0 to 16, not '99'" \
            "priority,|a trailing ','" \
            "priority,trace=/nonexistent-dir/t.json|the GIL trace file '/nonexistent-dir/t.json' cannot be created: No such file"; do
    bad=${case%%|*} want=${case#*|}
    set +e
    out=$(RUBY_RUST_GIL="$bad" "$ruby" -e 'puts "ran"' 2>&1)
    rc=$?
    set -e
    [ "$rc" = 2 ] || die "RUBY_RUST_GIL='$bad': exit status $rc, not 2 ($out)"
    case "$out" in
        *"RUBY_RUST_GIL='$bad': $want"*) ;;
        *) die "RUBY_RUST_GIL='$bad': unexpected message: $out" ;;
    esac
    case "$out" in *ran*) die "RUBY_RUST_GIL='$bad': the program ran" ;; esac
done

say "RUBY_MN_THREADS=1 is refused at start-up naming the variable; =0 runs"
set +e
out=$(RUBY_MN_THREADS=1 "$ruby" -e 'puts "ran"' 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || die "RUBY_MN_THREADS=1: exit status $rc, not 2 ($out)"
case "$out" in *"RUBY_MN_THREADS=1: M:N threads are not supported"*) ;; *) die "RUBY_MN_THREADS=1: unexpected message: $out" ;; esac
case "$out" in *ran*) die "RUBY_MN_THREADS=1: the program ran" ;; esac
out=$(RUBY_MN_THREADS=0 "$ruby" -e 'puts "ran"' 2>&1) || die "RUBY_MN_THREADS=0: $out"
[ "$out" = ran ] || die "RUBY_MN_THREADS=0: unexpected output: $out"

say "RUBY_RUST_GIL takes the whole grammar: interval, laps, accounting, a trace"
out=$(RUBY_RUST_GIL="priority-lazy,interval_us=2000,lazy_us=30,laps=3,stats=1,trace=$work/gil-%p.json" \
    "$ruby" "$repo/ruby/smoke_test.rb" 2>&1) || die "the smoke test with a trace failed: $out"
# The smoke test forks once; the child traces into its own file (%p).
traces=$(find "$work" -maxdepth 1 -name 'gil-*.json')
[ "$(printf '%s\n' "$traces" | grep -c .)" = 2 ] || die "not two traces (the process's and its fork child's): $traces"
for trace in $traces; do
    grep '"traceEvents"' "$trace" >/dev/null || die "$trace: no trace written at exit"
    grep 'GIL options priority-lazy,interval_us=2000,lazy_us=30,spin_us=200,laps=3, pid' "$trace" >/dev/null \
        || die "$trace: the trace's title does not give the options text the lock is"
done
[ "$(grep -c '^ruby: rust-gil stats, pid' <<<"$out")" = 1 ] || die "stats=1: not one report at exit: $out"
grep -E '^ lock: [1-9][0-9]* acquisitions' <<<"$out" >/dev/null || die "stats=1: no lock counters: $out"
grep -E '^ waits \(us\): p50 [0-9.]+, p99' <<<"$out" >/dev/null || die "stats=1: no wait quantiles: $out"
[ "$(grep -cE '^ +[0-9]+ +[01] +[0-9]+ ' <<<"$out")" -ge 10 ] || die "stats=1: fewer thread rows than the smoke test's threads: $out"
grep 'switch interval 2000 us$' <<<"$out" >/dev/null || die "interval_us=2000 is not the lock's interval: $out"

say "the report prints the options text the lock is: Ruby's defaults spelled out"
for case in "priority|priority,spin_us=200" "classic|classic,interval_us=100000" "lazy|lazy" \
            "priority,spin_us=0|priority,spin_us=0"; do
    given=${case%%|*} want=${case#*|}
    out=$(RUBY_RUST_GIL="$given,stats=1" "$ruby" -e 'Thread.new { 1 }.join' 2>&1) || die "under '$given,stats=1': $out"
    grep ", GIL options $want, switch interval" <<<"$out" >/dev/null \
        || die "'$given': the report does not print '$want': $(grep 'rust-gil stats' <<<"$out")"
done

say "the switch interval: Ruby's 100 ms under classic, 5 ms under the other presets"
for case in classic:100000 priority:5000 lazy:5000 monitor:5000 priority-lazy-monitor:5000 classic,interval_us=700:700; do
    policy=${case%:*} want=${case##*:}
    out=$(RUBY_RUST_GIL="$policy,stats=1" "$ruby" -e 'Thread.new { 1 }.join' 2>&1) || die "under $policy,stats=1: $out"
    grep "switch interval $want us\$" <<<"$out" >/dev/null || die "$policy: the interval is not $want us: $(grep 'rust-gil stats' <<<"$out")"
done

say "the spin: 200 us under the priority presets, none under the others, spin_us= wins"
for case in priority:200 priority-lazy-monitor:200 classic:0 lazy:0 monitor:0 priority,spin_us=0:0 classic,spin_us=20:20; do
    policy=${case%:*} want=${case##*:}
    out=$(RUBY_RUST_GIL="$policy,stats=1" "$ruby" -e 'Thread.new { 1 }.join' 2>&1) || die "under $policy,stats=1: $out"
    grep "; spin $want us, [0-9]* CPU spin takes\$" <<<"$out" >/dev/null || die "$policy: the spin is not $want us: $(grep '^ lock:' <<<"$out")"
done

say "a Thread.new that cannot start its native thread leaves no waiter behind"
cc -shared -fPIC -o "$work/fail_pthread_create.so" "$repo/ruby/fail_pthread_create.c" -ldl \
    || die "cannot build ruby/fail_pthread_create.c"
fail_one_start='ENV["RUSTGIL_TEST_FAIL_PTHREAD_CREATE"] = "1"
begin
  Thread.new { }
  abort "Thread.new started a thread while pthread_create fails"
rescue ThreadError => e
  puts "refused: #{e.message}"
ensure
  ENV.delete("RUSTGIL_TEST_FAIL_PTHREAD_CREATE")
end'
for policy in priority classic; do
    # Thread.pass beside a thread asleep in Queue#pop keeps the lock when no
    # thread is ready: counted by the main thread's forced releases in the
    # report (its row is the first), not timed. The thread that never
    # started, still counted as ready, made each of the 1000 passes a
    # forced release that waited 2 ms for it: 1000 or more. The rest of the
    # program makes a few at most (a forced release answers a thread that
    # waits for the lock: only the sleeper's start and wake-up do).
    out=$(RUBY_RUST_GIL="$policy,stats=1" LD_PRELOAD="$work/fail_pthread_create.so" timeout 120 \
        "$ruby" -e "q = Queue.new
sleeper = Thread.new { q.pop }
sleep 0.001 until sleeper.status == 'sleep'
$fail_one_start
1000.times { Thread.pass }
q << :done
sleeper.join" 2>&1) || die "$policy: a failed Thread.new, then Thread.pass: $out"
    grep "^refused: can't create Thread: Resource temporarily unavailable" <<<"$out" >/dev/null \
        || die "$policy: Thread.new did not fail as pthread_create did: $out"
    forced=$(awk 'NF == 10 && $1 == 1 { print $8 }' <<<"$out")
    [ -n "$forced" ] && [ "$forced" -lt 100 ] \
        || die "$policy: after a failed Thread.new, 1000 Thread.pass beside a sleeping thread made ${forced:-?} forced releases (a yield waited for a thread that does not exist): $out"
    # Threads started after it run (stock 3.3.8 deadlocks here; timeout bounds it).
    out=$(RUBY_RUST_GIL=$policy LD_PRELOAD="$work/fail_pthread_create.so" timeout 120 \
        "$ruby" -e "$fail_one_start
p 4.times.map { |i| Thread.new { Thread.pass; i * 2 } }.map(&:value)" 2>&1) \
        || die "$policy: threads after a failed Thread.new: $out"
    grep -x '\[0, 2, 4, 6\]' <<<"$out" >/dev/null || die "$policy: threads after a failed Thread.new: $out"
    say "    $policy: $forced forced releases in 1000 Thread.pass after it; later threads run"
done

say "the report and the trace are written however Ruby ends: a signal, an uncaught exception, exit"
# Ruby ends on SIGINT, SIGTERM or an uncaught Interrupt by raising the
# signal again after its cleanup, so exit(3) and its handlers never run.
for case in "SIGINT:130:Process.kill(:INT, Process.pid); sleep 60" \
            "SIGTERM:143:Process.kill(:TERM, Process.pid); sleep 60" \
            "Interrupt:130:raise Interrupt" \
            "RuntimeError:1:raise 'uncaught'" \
            "exit:3:exit 3"; do
    what=${case%%:*} rest=${case#*:}
    want=${rest%%:*} code=${rest#*:}
    trace="$work/end-$what.json"
    set +e
    out=$(RUBY_RUST_GIL="priority,stats=1,trace=$trace" timeout 120 "$ruby" -e "Thread.new { 1 }.join; $code" 2>&1)
    rc=$?
    set -e
    [ "$rc" = "$want" ] || die "ended by $what: exit status $rc, not $want: $out"
    [ "$(grep -c '^ruby: rust-gil stats, pid' <<<"$out")" = 1 ] || die "ended by $what: not one stats=1 report: $out"
    grep -E '^ lock: [1-9][0-9]* acquisitions' <<<"$out" >/dev/null || die "ended by $what: no lock counters: $out"
    "$ruby" -rjson -e 'doc = JSON.parse(File.read(ARGV[0]))
        abort "no events" if doc["traceEvents"].empty?
        abort "title: #{doc["otherData"]["title"]}" unless doc["otherData"]["title"].include?("GIL options priority,spin_us=200")' \
        "$trace" || die "ended by $what: the trace $trace is not a whole trace ($(wc -c <"$trace" || true) bytes)"
    say "    ended by $what (exit status $rc): the report and a whole trace"
done

# ---- 2. the smoke test under every preset ----------------------------------
for policy in "${presets[@]}"; do
    out=$(RUBY_RUST_GIL=$policy timeout 300 "$ruby" "$repo/ruby/smoke_test.rb" 2>&1) \
        || die "the smoke test under $policy failed: $out"
    case "$out" in *"all passed"*) ;; *) die "the smoke test under $policy: $out" ;; esac
    say "smoke test under $policy: passed"
done

# ---- Ruby's own tests --------------------------------------------------------
known=$(grep -v '^#' "$repo/ruby/known-failures.txt" | awk 'NF { print $1 }' || true)

# verdict LOG WHAT POLICY: the test-unit summary in LOG, its failures and
# errors checked against the known ones.
verdict() {
    local log=$1 what=$2 policy=$3 summary failed unexpected="" t
    summary=$(grep -E '^[0-9]+ tests, [0-9]+ assertions, [0-9]+ failures, [0-9]+ errors' "$log" | tail -n 1 || true)
    [ -n "$summary" ] || { tail -n 40 "$log" >&2; die "$what under $policy: no summary from the test runner"; }
    failed=$(grep -A1 -E '^ *[0-9]+\) (Failure|Error):' "$log" | grep -oE '^[A-Z][A-Za-z0-9_:]*#[A-Za-z0-9_?!]+' | sort -u || true)
    for t in $failed; do
        printf '%s\n' "$known" | grep -xF -- "$t" >/dev/null || unexpected="$unexpected $t"
    done
    [ -z "$unexpected" ] || { grep -B2 -A25 -E '^ *[0-9]+\) (Failure|Error):' "$log" | tail -n 120 >&2; die "$what under $policy: failed:$unexpected"; }
    case "$summary" in "0 tests,"*) die "$what under $policy: no test ran" ;; esac
    say "$what under $policy: $summary${failed:+ (known: $(echo $failed))}"
}

# test_all POLICY NAME FILE...: Ruby's test runner on FILEs (relative to
# the build tree's test/), under POLICY; the command `make test-all` runs,
# without make's checks of the extensions (ruby/build.sh built them).
test_all() {
    local policy=$1 name=$2 log files=()
    shift 2
    for f in "$@"; do files+=("$tree/test/$f"); done
    log="$work/$name-$policy.log"
    local runruby=(./miniruby -I./lib -I. -I.ext/common ./tool/runruby.rb --extout=.ext -- --disable-gems)
    (cd "$tree" && RUBY_RUST_GIL=$policy timeout 1200 "${runruby[@]}" ./test/runner.rb \
        --ruby="${runruby[*]}" --excludes-dir=./test/.excludes --name='!/memory_leak/' \
        --no-retry -q "${files[@]}") >"$log" 2>&1 || true
    verdict "$log" "$name" "$policy"
}

# ---- 3. the instrumentation API, every preset -------------------------------
for policy in "${presets[@]}"; do
    test_all "$policy" instrumentation -ext-/thread/test_instrumentation_api.rb
done

# ---- 4. Ruby's thread tests and the Ractor tests ----------------------------
suites=(ruby/test_thread.rb ruby/test_thread_queue.rb ruby/test_thread_cv.rb ruby/test_fiber.rb
        ruby/test_signal.rb ruby/test_process.rb)
for policy in "${policies[@]}"; do
    printf '%s\n' "${presets[@]}" | grep -xF -- "$policy" >/dev/null || die "unknown preset '$policy' in RUSTGIL_RUBY_POLICIES"
    test_all "$policy" thread-tests "${suites[@]}"
    log="$work/ractor-$policy.log"
    RUBY_RUST_GIL=$policy timeout 1200 make -C "$tree" btest BTESTS=bootstraptest/test_ractor.rb >"$log" 2>&1 || true
    summary=$(grep -E '^(PASS all [0-9]+ tests|FAIL [0-9]+/[0-9]+ tests failed)' "$log" | tail -n 1 || true)
    case "$summary" in
        "PASS all "*) say "bootstraptest/test_ractor.rb under $policy: $summary" ;;
        *) tail -n 60 "$log" >&2; die "bootstraptest/test_ractor.rb under $policy: ${summary:-no summary}" ;;
    esac
done
say "all passed"
