#!/usr/bin/env bash
# Instructions per uncontended acquire + release, counted by callgrind (exact
# and repeatable, unlike time on a shared machine), for this tree and for an
# older revision, per preset.
#
#   [OBSERVERS="none accounting histograms hook"] scripts/instructions.sh [BASE_REV] [PRESET...]
#
# BASE_REV defaults to 7ceb99e (the last revision before event hooks). The
# same small driver is built against gil-core of both trees; each count is
# (instructions for 2M rounds - for 1M rounds) / 1M, so start-up cancels out.
# OBSERVERS (default "none") adds a column per observer turned on in this
# tree: accounting (Gil::set_thread_stats), histograms, hook (an event hook
# that does nothing); the base column is always without observers.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
base=${1:-7ceb99e}
shift || true
presets=("$@")
read -r -a observers <<<"${OBSERVERS:-none}"
[ ${#presets[@]} -gt 0 ] || presets=(classic priority lazy priority-lazy)
die() { printf 'instructions.sh: %s\n' "$*" >&2; exit 1; }
command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
git -C "$repo" rev-parse --verify --quiet "$base^{commit}" >/dev/null || die "unknown revision '$base'"
for o in "${observers[@]}"; do
    case $o in none | accounting | histograms | hook) ;; *) die "unknown observer '$o' in OBSERVERS (none, accounting, histograms, hook)" ;; esac
done

work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$repo" worktree add --quiet --detach "$work/base" "$base"

build() { # NAME GIL_CORE_DIR OBSERVE_FN
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
    observe(&gil, &args.next().unwrap_or_else(|| "none".into()));
    let me = Token::new(1).expect("non-zero");
    for _ in 0..rounds {
        gil.acquire(black_box(me)).expect("free");
        gil.release(black_box(me), ReleaseReason::Voluntary).expect("held");
    }
    assert_eq!(gil.counters().acquisitions, rounds);
}
EOF
    printf '%s\n' "$3" >>"$work/$1/src/main.rs"
    echo "instructions.sh: building against $2" >&2
    (cd "$work/$1" && cargo build --release --quiet) || die "build against $2 failed"
}
# The base tree may predate some observers, so its driver turns none on.
build drv-base "$work/base/crates/gil-core" \
    'fn observe(_: &Gil, name: &str) { assert_eq!(name, "none"); }'
build drv-here "$repo/crates/gil-core" 'fn observe(gil: &Gil, name: &str) {
    match name {
        "none" => {}
        "accounting" => gil.set_thread_stats(true),
        "histograms" => gil.set_histograms(true),
        "hook" => {
            let hook: gil_core::EventHook = std::sync::Arc::new(|e| { black_box(e); });
            gil.add_event_hook(hook, gil_core::EventMask::ALL).expect("a hook");
        }
        _ => panic!("unknown observer {name}"),
    }
}'

per_round() { # BINARY PRESET OBSERVER; "-" where that tree has no such preset
    local a b
    "$1" "$2" 1 none >/dev/null 2>&1 || { echo "-"; return; }
    "$1" "$2" 1 "$3" >/dev/null || die "the driver failed on preset $2 with observer $3"
    a=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" 1000000 "$3" 2>&1 | sed -n 's/.*Collected : //p')
    b=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" 2000000 "$3" 2>&1 | sed -n 's/.*Collected : //p')
    echo $(((b - a) / 1000000))
}

here="$(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo '+changes')"
header="| preset | $base |"
rule="|---|---:|"
for o in "${observers[@]}"; do
    if [ "$o" = none ]; then header+=" $here |"; else header+=" $here $o |"; fi
    rule+="---:|"
done
echo "$header"
echo "$rule"
for p in "${presets[@]}"; do
    row="| $p | $(per_round "$work/drv-base/target/release/uncontended-loop" "$p" none) |"
    for o in "${observers[@]}"; do
        row+=" $(per_round "$work/drv-here/target/release/uncontended-loop" "$p" "$o") |"
    done
    echo "$row"
done
