#!/usr/bin/env bash
# Every platform but Linux (README, "Platforms"), as CI checks them here:
#   - macOS (x86_64, aarch64), FreeBSD, NetBSD and Windows: clippy -D
#     warnings (a full type check) of gil-core and gil-ffi, all targets, and
#     of gil-bench's library and binaries;
#   - the fallback timed waits of a POSIX system without
#     pthread_condattr_setclock (a CLOCK_REALTIME deadline), selected on
#     Linux by --cfg gil_realtime_wait: gil-core's real-thread tests;
#   - Windows (x86_64-pc-windows-gnu) under Wine 8: gil-core's and gil-ffi's
#     tests (not the loom models, which test the protocol, not the OS);
#     gil.dll, its import library and the static library, exporting what
#     libgil.so does; the C tests that are not POSIX-only, the convoy test
#     and examples/tiny-interp.c, built with mingw-w64 against gil.dll;
#     unload.c, which loads gil.dll and unloads it under its monitor thread;
#     a short sweep of the main job, checked by scripts/check-sweep.py.
# Installs what it needs (rustup targets; wine64 and mingw-w64 through
# scripts/wine-setup.sh, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n==> [%d s] %s\n' "$SECONDS" "$*"; }
die() { printf 'platforms.sh: %s\n' "$*" >&2; exit 1; }

targets=(x86_64-apple-darwin aarch64-apple-darwin x86_64-unknown-freebsd x86_64-unknown-netbsd x86_64-pc-windows-gnu)
win=x86_64-pc-windows-gnu

installed=$(rustup target list --installed) || die "rustup not found: the cross targets come from rustup"
missing=()
for t in "${targets[@]}"; do
    grep -x "$t" <<<"$installed" >/dev/null || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
    step "rustup target add ${missing[*]}"
    rustup target add "${missing[@]}"
fi

step "Wine prefix and mingw-w64 (scripts/wine-setup.sh)"
prefix=$(bash scripts/wine-setup.sh | tail -n 1)
export WINEPREFIX=$prefix WINEDEBUG=-all
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
# One wineserver for the whole step: started per program, a server that is
# shutting down (3 s after its last client) races the next program's
# start-up and drops its connection ("recvmsg: Connection reset by peer").
wineserver -k >/dev/null 2>&1 || true
wineserver -p || die "could not start a persistent wineserver for $WINEPREFIX"
trap 'wineserver -k >/dev/null 2>&1 || true' EXIT

for t in "${targets[@]}"; do
    step "clippy -D warnings for $t"
    cargo clippy --quiet --locked --target "$t" -p gil-core -p gil-ffi --all-targets -- -D warnings
    cargo clippy --quiet --locked --target "$t" -p gil-bench --lib --bins -- -D warnings
done

step "fallback timed waits (--cfg gil_realtime_wait) on Linux: gil-core's real-thread tests"
CARGO_TARGET_DIR=target/realtime-wait RUSTFLAGS="--cfg gil_realtime_wait" \
    cargo clippy --quiet --locked -p gil-core --lib -- -D warnings
CARGO_TARGET_DIR=target/realtime-wait RUSTFLAGS="--cfg gil_realtime_wait" \
    cargo test --quiet --locked -p gil-core

step "Windows under Wine: gil-core's and gil-ffi's tests"
timeout 1800 cargo test --quiet --locked --target "$win" -p gil-core -p gil-ffi

step "Windows: gil.dll, its import library, the static library; the exports of libgil.so"
cargo build --quiet --release --locked -p gil-ffi
cargo build --quiet --release --locked --target "$win" -p gil-ffi
cargo build --quiet --release --locked --target "$win" -p gil-bench --bins
rel=target/$win/release
for f in gil.dll libgil.dll.a libgil.a; do
    [ -f "$rel/$f" ] || die "no $rel/$f"
done
dll_syms=$(x86_64-w64-mingw32-objdump -p "$rel/gil.dll" |
    sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/s/^[[:space:]]*\[ *[0-9]*\] //p' | sort)
so_syms=$(nm -D --defined-only target/release/libgil.so | awk '{print $3}' | sort)
[ -n "$dll_syms" ] || die "objdump found no export in $rel/gil.dll"
if [ "$dll_syms" != "$so_syms" ]; then
    diff <(echo "$so_syms") <(echo "$dll_syms") >&2 || true
    die "gil.dll does not export what libgil.so does (above: < libgil.so, > gil.dll)"
fi
echo "gil.dll, libgil.dll.a, libgil.a; $(wc -l <<<"$dll_syms") exports, the same as libgil.so's"

step "Windows: the C tests that are not POSIX-only, the convoy test, tiny-interp and unload, mingw-w64 (against gil.dll), under Wine"
out=build/windows
rm -rf "$out"
mkdir -p "$out"
winpthread=$(x86_64-w64-mingw32-gcc -print-file-name=libwinpthread-1.dll)
[ -f "$winpthread" ] || die "mingw-w64 has no libwinpthread-1.dll (Debian: gcc-mingw-w64-x86-64)"
cp "$rel/gil.dll" "$winpthread" "$out/"
mingw() { x86_64-w64-mingw32-gcc -std=c11 -Wall -Wextra -Werror -pedantic -O1 -pthread -Iinclude "$@" "$rel/libgil.dll.a"; }
mingw crates/gil-ffi/tests/c/test_gil.c -o "$out/test_gil.exe"
mingw crates/gil-ffi/tests/c/convoy.c -o "$out/convoy.exe"
mingw examples/tiny-interp.c -o "$out/tiny-interp.exe" -lws2_32
# Not linked against gil.dll: it loads and unloads the DLL itself.
x86_64-w64-mingw32-gcc -std=c11 -Wall -Wextra -Werror -pedantic -O1 -Iinclude \
    crates/gil-ffi/tests/c/unload.c -o "$out/unload.exe"
# From the output directory: the tests' scratch files go under /tmp, which
# Wine's Z: drive maps to this machine's /tmp.
(cd "$out" && timeout 600 wine ./test_gil.exe)
(cd "$out" && timeout 300 wine ./convoy.exe --expect classic priority)
(cd "$out" && timeout 300 wine ./unload.exe gil.dll)
(cd "$out" && timeout 300 wine ./tiny-interp.exe --max-cpu 1 --seconds 0.3 --policy priority)

step "Windows: a short sweep of the main job under Wine"
# Wine's loopback sockets take ~2 ms a round trip even alone, so the
# interval is 50 ms here: the convoy (about an interval a round trip) and
# its cure (the round trip alone) stay apart by more than 10x.
sweep=target/gil-bench-wine
rm -rf "$sweep"
timeout 600 wine "$rel/gil-bench.exe" --seconds 0.5 --interval-us 50000 --cpu 0,1 \
    --policies classic,priority --trace-cpu 1 --trace-ms 200 --out "$sweep" >/dev/null
python3 scripts/check-sweep.py "$sweep" classic priority

printf '\nplatforms: all checks passed (%d s)\n' "$SECONDS"
