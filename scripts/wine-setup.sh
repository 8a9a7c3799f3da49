#!/usr/bin/env bash
# Makes the project's private Wine prefix, in which programs built for
# x86_64-pc-windows-gnu run: Wine 8 (Debian 13's wine64) plus a one-function
# bcryptprimitives.dll (scripts/windows/processprng.c) giving the
# ProcessPrng that Rust's std imports and Wine 8 lacks. Installs wine64 and
# mingw-w64 first if missing (apt-get, as root). Prints the prefix's path
# on its last line; idempotent (a made prefix is reused).
#
#   scripts/wine-setup.sh        prefix: ${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}/wine64
set -euo pipefail
cd "$(dirname "$0")/.."
die() { printf 'wine-setup: %s\n' "$*" >&2; exit 1; }

bash scripts/need-packages.sh wine-setup wine64 gcc-mingw-w64-x86-64
command -v wine >/dev/null || die "wine is not on PATH after installing wine64"

prefix=${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}/wine64
dll=$prefix/drive_c/windows/system32/bcryptprimitives.dll
export WINEPREFIX=$prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$prefix/.rust-gil-ready" ]; then
    echo "wine-setup: making the Wine prefix $prefix"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    wineboot --init >/dev/null 2>&1 || die "wineboot --init failed in $prefix"
    wineserver --wait
    obj=$(mktemp -d)
    trap 'rm -rf "$obj"' EXIT
    x86_64-w64-mingw32-gcc -O2 -shared -o "$obj/bcryptprimitives.dll" \
        scripts/windows/processprng.c scripts/windows/bcryptprimitives.def -ladvapi32 ||
        die "building bcryptprimitives.dll with mingw-w64 failed"
    cp "$obj/bcryptprimitives.dll" "$dll"
    # Prefer this DLL to Wine's builtin one, which has no ProcessPrng.
    wine reg add 'HKCU\Software\Wine\DllOverrides' /v bcryptprimitives /d native,builtin /f >/dev/null 2>&1 ||
        die "could not set the DLL override in $prefix"
    wineserver --wait
    touch "$prefix/.rust-gil-ready"
fi
echo "$prefix"
