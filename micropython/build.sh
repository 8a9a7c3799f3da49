#!/usr/bin/env bash
# Builds MicroPython's unix port three ways from one source:
#
#   rustgil  its GIL on the rust-gil library (micropython/patches/ and the
#            user C module micropython/shim/rustgil; MICROPY_PY_THREAD_GIL=1)
#   gil      unmodified, with its own GIL (MICROPY_PY_THREAD_GIL=1: a mutex
#            the VM unlocks and re-locks every 32 jumps)
#   nogil    unmodified, the unix port's default (threads without a GIL)
#   patched  the patched tree without the module (the stock GIL through the
#            new macros; test.sh compares its code with gil's)
#
#   micropython/build.sh [--source DIR] [--jobs N]
#
#   --source DIR  a MicroPython 1.26 source tree to use (copied, never
#                 modified); default: the upstream tarball inside Debian's
#                 micropython source package (forky/sid), via apt-get source
#   --jobs N      parallel make jobs (default: nproc)
#
# Everything goes under ${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}/micropython;
# reruns rebuild only what changed (a new patch or shim: a fresh patched
# tree; a new library: a relink). Each build takes ~15 s on 2 cores. At the
# end it prints
#   MICROPY_RUSTGIL=<bin>  MICROPY_GIL=<bin>  MICROPY_NOGIL=<bin>  MICROPY_TESTS=<tests dir>
#   MICROPY_BUILDS=<the build trees>
#
# Ports options: the Debian source drops the bundled libraries (lib/), so
# the build turns off what needs them: frozen modules (FROZEN_MANIFEST=),
# btree, TLS and ffi. Nothing here touches the GIL.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf 'micropython/build.sh: %s\n' "$*"; }
die() { printf 'micropython/build.sh: %s\n' "$*" >&2; exit 1; }

source_dir="" jobs=$(nproc)
while [ $# -gt 0 ]; do
    case "$1" in
        --source) [ $# -ge 2 ] || die "--source needs a directory"; source_dir=$2; shift 2 ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

top="$cache/micropython"
patch_file="$repo/micropython/patches/micropython-1.26-rust-gil.patch"
shim_dir="$repo/micropython/shim"
mkdir -p "$top/bin"

# ---- the source ---------------------------------------------------------

pristine="$top/src/pristine"
if [ -n "$source_dir" ]; then
    [ -f "$source_dir/py/mpthread.h" ] || die "$source_dir is not a MicroPython source tree"
    src=$(cd "$source_dir" && pwd)
else
    bash "$repo/scripts/debian-source.sh" --version '^1\.26\.' --unpack "$pristine" \
        micropython "$cache/debian" forky sid \
        || die "could not fetch the micropython source package; pass --source DIR with a MicroPython 1.26 tree."
    src=$pristine
fi
version=$(sed -n 's/^#define MICROPY_VERSION_\(MAJOR\|MINOR\|MICRO\) \([0-9]*\)$/\2/p' "$src/py/mpconfig.h" | paste -sd.)
case "$version" in
    1.26.*) say "MicroPython $version from $src" ;;
    *) die "need MicroPython 1.26.x, found '$version' in $src" ;;
esac

# ---- build dependencies ---------------------------------------------------

bash "$repo/scripts/need-packages.sh" micropython/build.sh build-essential pkg-config python3

# ---- the library ----------------------------------------------------------

say "installing the rust-gil library into $cache/gil"
bash "$repo/scripts/install.sh" --build "$cache/gil" >/dev/null

# ---- the interpreters -----------------------------------------------------

port_opts=(FROZEN_MANIFEST= MICROPY_PY_BTREE=0 MICROPY_SSL_AXTLS=0 MICROPY_PY_SSL=0 MICROPY_PY_FFI=0)

# tree NAME PATCHED: $top/build/NAME, a copy of $src (patched if PATCHED=1),
# made afresh when the source, patch or shim changed.
tree() {
    local name=$1 patched=$2 dir="$top/build/$1" key
    # MicroPython's make does not track CFLAGS: options in the key.
    key="$version-$src-${port_opts[*]}"
    if [ "$patched" = 1 ]; then
        key="$key-$(cat "$patch_file" "$shim_dir"/rustgil/* | sha256sum | cut -c1-16)"
    fi
    if [ -f "$dir/.key" ] && [ "$(cat "$dir/.key")" = "$key" ]; then
        return
    fi
    say "$name: fresh tree in $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -a "$src/." "$dir/"
    rm -f "$dir/.from"
    if [ "$patched" = 1 ]; then
        (cd "$dir" && patch -p1 --forward --quiet <"$patch_file") \
            || die "the patch does not apply to MicroPython $version"
        mkdir -p "$dir/usermod"
        cp -a "$shim_dir/rustgil" "$dir/usermod/"
    fi
    echo "$key" >"$dir/.key"
}

# build NAME TREE MAKE_ARGS...: the unix port of TREE into $top/bin/micropython-NAME.
build() {
    local name=$1 dir="$top/build/$2"
    shift 2
    local log="$dir/make-$name.log"
    say "$name: make -j$jobs $*"
    make -C "$dir/ports/unix" -j"$jobs" BUILD="build-$name" PROG="micropython-$name" \
        "${port_opts[@]}" "$@" >"$log" 2>&1 \
        || { grep -E 'error|Error' "$log" | tail -n 20 >&2; die "$name: make failed (log: $log)"; }
    cp "$dir/ports/unix/build-$name/micropython-$name" "$top/bin/micropython-$name"
}

tree rustgil 1
tree stock 0
# A new library changes no source file make can see: relink when it changed.
lib_key=$(cat "$cache/gil/lib/libgil.a" "$cache/gil/include/gil.h" | sha256sum | cut -c1-16)
rust_prog="$top/build/rustgil/ports/unix/build-rustgil/micropython-rustgil"
if [ -f "$rust_prog" ] && [ "$(cat "$top/build/rustgil/.lib_key" 2>/dev/null)" != "$lib_key" ]; then
    say "rustgil: the library changed: recompiling the shim and relinking"
    rm -f "$rust_prog"
    touch "$top/build/rustgil/usermod/rustgil/rustgil.c"
fi
build rustgil rustgil MICROPY_PY_THREAD_GIL=1 USER_C_MODULES="$top/build/rustgil/usermod" \
    RUSTGIL_PREFIX="$cache/gil"
echo "$lib_key" >"$top/build/rustgil/.lib_key"
build gil stock MICROPY_PY_THREAD_GIL=1
build nogil stock MICROPY_PY_THREAD_GIL=0
# The patched tree without the module: test.sh checks that it compiles to
# the stock GIL build's machine code.
build patched rustgil MICROPY_PY_THREAD_GIL=1

echo "MICROPY_RUSTGIL=$top/bin/micropython-rustgil"
echo "MICROPY_GIL=$top/bin/micropython-gil"
echo "MICROPY_NOGIL=$top/bin/micropython-nogil"
echo "MICROPY_TESTS=$top/build/stock/tests"
echo "MICROPY_BUILDS=$top/build"
