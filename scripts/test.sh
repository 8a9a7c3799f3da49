#!/usr/bin/env bash
# The project's test command (README): build, every test, the loom models,
# the C tests of the C ABI and its example, CPython 3.13 built on the lock
# with its own thread tests (SKIP_CPYTHON=1 skips that part), MicroPython's
# unix port on the lock with its own test suite (SKIP_MICROPYTHON=1), OCaml
# 5.3 on the lock with its own thread tests (SKIP_OCAML=1), Ruby 3.3 on the
# lock with its own thread tests (SKIP_RUBY=1), a smoke run of the main job
# (gil-bench) and the demo, every other platform (macOS, the BSDs and
# Windows: clippy per target, Windows' tests under Wine, the fallback timed
# waits on Linux; scripts/platforms.sh, SKIP_PLATFORMS=1), clippy and
# rustfmt. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# Each step says how long the one before it took (CI's log shows where
# the time goes), and the whole run's time at the end.
step_name='' step_start=$SECONDS
step() {
    [ -z "$step_name" ] || printf '==> %s: %d s\n' "$step_name" $((SECONDS - step_start))
    step_name=$* step_start=$SECONDS
    printf '\n==> %s\n' "$*"
}
die() { printf 'test.sh: %s\n' "$*" >&2; exit 1; }

command -v cargo >/dev/null || die "cargo not found: install Rust (rustup) first."
cargo clippy --version >/dev/null 2>&1 || die "clippy missing: run 'rustup component add clippy'."
cargo fmt --version >/dev/null 2>&1 || die "rustfmt missing: run 'rustup component add rustfmt'."

step "scripts: no pipe into a reader that exits early (pipefail + SIGPIPE)"
bash scripts/check-scripts.sh

step "build (all targets)"
cargo build --workspace --all-targets --locked

step "tests"
cargo test --workspace --locked

step "gil-core without its trace feature compiles none of the trace writers"
rlib=$(cargo build -p gil-core --lib --locked --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gil_core":
        print(next(f for f in m["filenames"] if f.endswith(".rlib")))')
[ -f "$rlib" ] || die "cargo built no gil-core rlib"
syms=$(nm -C "$rlib" 2>/dev/null) || die "nm failed on $rlib"
grep 'gil_core::options::' <<<"$syms" >/dev/null || die "$rlib: no gil_core symbols seen; the check sees nothing"
if grep 'gil_core::trace::' <<<"$syms" >/dev/null; then
    die "$rlib has gil_core::trace symbols without the trace feature"
fi
echo "$(basename "$rlib"): no gil_core::trace symbols"

preemptions="${LOOM_MAX_PREEMPTIONS:-2}"
step "loom models (LOOM_MAX_PREEMPTIONS=$preemptions)"
CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg gil_loom" LOOM_MAX_PREEMPTIONS="$preemptions" \
    timeout 2700 cargo test -p gil-core --test loom --release --locked

step "C ABI: header check, C tests (ASan+UBSan, valgrind), install, example"
bash scripts/c-tests.sh

if [ "${SKIP_CPYTHON:-0}" != 1 ]; then
    step "CPython 3.13 --with-rust-gil: build, smoke test, CPython's thread tests"
    bash cpython/test.sh
fi

if [ "${SKIP_MICROPYTHON:-0}" != 1 ]; then
    step "MicroPython 1.26 on the lock: build, smoke test, MicroPython's own tests"
    bash micropython/test.sh
fi

if [ "${SKIP_OCAML:-0}" != 1 ]; then
    step "OCaml 5.3 on the lock: build, smoke test, OCaml's own thread tests"
    bash ocaml/test.sh
fi

if [ "${SKIP_RUBY:-0}" != 1 ]; then
    step "Ruby 3.3 on the lock: build, smoke test, instrumentation API, Ruby's own thread tests"
    bash ruby/test.sh
fi

step "main job smoke run: a tiny gil-bench sweep, its table and pictures checked"
smoke=target/gil-bench-smoke
rm -rf "$smoke"
cargo run --quiet --release --locked -p gil-bench --bin gil-bench -- \
    --seconds 0.2 --cpu 0,1 --policies classic,priority --trace-cpu 1 --trace-ms 50 --out "$smoke"
python3 scripts/check-sweep.py "$smoke" classic priority
cargo run --quiet --release --locked -p gil-bench --bin gil-demo -- --cpu 2 --seconds 0.3

if [ "${SKIP_PLATFORMS:-0}" != 1 ]; then
    step "every platform: macOS, FreeBSD, NetBSD, Windows (under Wine), the fallback timed waits"
    bash scripts/platforms.sh
fi

step "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg gil_loom" cargo clippy -p gil-core --all-targets --locked -- -D warnings

step "rustfmt"
cargo fmt --all -- --check

step "done"
printf 'all checks passed in %d min %d s\n' $((SECONDS / 60)) $((SECONDS % 60))
