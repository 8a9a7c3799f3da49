#!/usr/bin/env bash
# Instructions per uncontended acquire + release, counted by callgrind (exact
# and repeatable, unlike time on a shared machine), for this tree and for an
# older revision, per preset.
#
#   scripts/instructions.sh [BASE_REV] [PRESET...]
#
# BASE_REV defaults to 7ceb99e (the last revision before event hooks). The
# same small driver is built against gil-core of both trees; each count is
# (instructions for 2M rounds - for 1M rounds) / 1M, so start-up cancels out.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
base=${1:-7ceb99e}
shift || true
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(classic priority lazy priority-lazy)
die() { printf 'instructions.sh: %s\n' "$*" >&2; exit 1; }
command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
git -C "$repo" rev-parse --verify --quiet "$base^{commit}" >/dev/null || die "unknown revision '$base'"

work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$repo" worktree add --quiet --detach "$work/base" "$base"

build() { # NAME GIL_CORE_DIR
    mkdir -p "$work/$1/src"
    cat >"$work/$1/Cargo.toml" <<EOF
[package]
name = "uncontended-loop"
version = "0.0.0"
edition = "2021"
[dependencies]
gil-core = { path = "$2" }
[workspace]
EOF
    cat >"$work/$1/src/main.rs" <<'EOF'
use gil_core::{Gil, GilConfig, ReleaseReason, Token};
use std::hint::black_box;
fn main() {
    let mut args = std::env::args().skip(1);
    let preset = args.next().expect("preset");
    let rounds: u64 = args.next().expect("rounds").parse().expect("a number");
    let gil = Gil::new(GilConfig::preset(&preset).expect("a preset")).expect("a lock");
    let me = Token::new(1).expect("non-zero");
    for _ in 0..rounds {
        gil.acquire(black_box(me)).expect("free");
        gil.release(black_box(me), ReleaseReason::Voluntary).expect("held");
    }
    assert_eq!(gil.counters().acquisitions, rounds);
}
EOF
    echo "instructions.sh: building against $2" >&2
    (cd "$work/$1" && cargo build --release --quiet) || die "build against $2 failed"
}
build drv-base "$work/base/crates/gil-core"
build drv-here "$repo/crates/gil-core"

per_round() { # BINARY PRESET; "-" where that tree has no such preset
    local a b
    "$1" "$2" 1 >/dev/null 2>&1 || { echo "-"; return; }
    a=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" 1000000 2>&1 | sed -n 's/.*Collected : //p')
    b=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" 2000000 2>&1 | sed -n 's/.*Collected : //p')
    echo $(((b - a) / 1000000))
}

echo "| preset | $base | $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo '+changes') |"
echo "|---|---:|---:|"
for p in "${presets[@]}"; do
    echo "| $p | $(per_round "$work/drv-base/target/release/uncontended-loop" "$p") | $(per_round "$work/drv-here/target/release/uncontended-loop" "$p") |"
done
