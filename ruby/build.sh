#!/usr/bin/env bash
# Builds Ruby 3.3 from Debian's source package (trixie's ruby3.3; its
# upstream tarball pinned by sha256 below): "rustgil", with each Ractor's
# GVL on the rust-gil library (ruby/patches/ + ruby/shim/), and with
# --stock also "stock", unmodified, for comparison. Trees, installs and the
# library live under the cache root ($RUST_GIL_CACHE, else
# ~/.cache/rust-gil) in ruby/; a tree is rebuilt when its patch or source
# changes, and its thread code rebuilt when the shim or the library changes.
#
#   ruby/build.sh [--stock] [--source DIR] [--jobs N]
#
#   --stock       also build the unmodified Ruby
#   --source DIR  a Ruby 3.3 source tree instead of Debian's
#   --jobs N      make -jN (default: 2)
#
# At the end it prints RUBY_SOURCE=<the pristine tree>,
# RUBY_RUSTGIL=<prefix> and RUBY_RUSTGIL_BUILD=<tree> (and, with --stock,
# RUBY_STOCK=<prefix> and RUBY_STOCK_BUILD=<tree>).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf 'ruby/build.sh: %s\n' "$*"; }
die() { printf 'ruby/build.sh: %s\n' "$*" >&2; exit 1; }

# Debian's ruby3.3_3.3.8.orig.tar.xz (trixie), as fetched on 2026-11-28;
# the same hash as the release's .dsc.
RUBY_SHA256=e2e1233ad275b7623a05edf23a01192626d1da454bdfe353a28a87acd8ef015c

source_dir="" jobs=2 stock=0
while [ $# -gt 0 ]; do
    case "$1" in
        --source) [ $# -ge 2 ] || die "--source needs a directory"; source_dir=$2; shift 2 ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
        --stock) stock=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

top="$cache/ruby"
patch_file="$repo/ruby/patches/ruby-3.3-rust-gil.patch"
shim="$repo/ruby/shim/thread_pthread_rustgil.h"
mkdir -p "$top"

# ---- the source ---------------------------------------------------------

pristine="$top/src/pristine"
if [ -n "$source_dir" ]; then
    [ -f "$source_dir/thread_pthread.c" ] || die "$source_dir is not a Ruby source tree"
    src=$(cd "$source_dir" && pwd)
else
    bash "$repo/scripts/debian-source.sh" --sha256 "$RUBY_SHA256" --unpack "$pristine" \
        ruby3.3 "$cache/debian" trixie \
        || die "could not fetch Ruby 3.3's source; pass --source DIR with a Ruby 3.3 tree."
    src=$pristine
fi
api=$(awk '/^#define RUBY_API_VERSION_(MAJOR|MINOR) / { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    "$src/include/ruby/version.h")
[ "$api" = 3.3 ] || die "need Ruby 3.3.x, found API version '$api' in $src"
say "Ruby $(sed -n 's/^#define RUBY_VERSION_TEENY //p' "$src/version.h" | sed 's/^/3.3./') from $src"

# ---- build dependencies and the library -----------------------------------

# zlib and libyaml for the extensions Ruby's own test runner loads;
# libffi for fiddle. OpenSSL is left out (--with-out-ext): no test here
# needs it and it is the slowest extension to build.
bash "$repo/scripts/need-packages.sh" ruby/build.sh build-essential zlib1g-dev libyaml-dev libffi-dev
say "installing the rust-gil library into $cache/gil"
bash "$repo/scripts/install.sh" --build "$cache/gil" >/dev/null
lib_key=$(cat "$cache/gil/lib/libgil.so" "$cache/gil/include/gil.h" "$shim" | sha256sum | cut -c1-16)

# ---- one Ruby ---------------------------------------------------------------

# build NAME PATCHED: $src (patched if PATCHED=1) built in $top/build/NAME
# and installed into $top/NAME.
build() {
    local name=$1 patched=$2 tree="$top/build/$1" prefix="$top/$1" key
    local opts=(--prefix="$prefix" --disable-install-doc --disable-yjit --with-out-ext=openssl,win32ole)
    key="$src-$(cat "$src/.from" 2>/dev/null || true)"
    if [ "$patched" = 1 ]; then
        key="$key-$(sha256sum <"$patch_file" | cut -c1-16)"
        opts+=(CPPFLAGS="-DRUBY_RUST_GIL -I$cache/gil/include"
               LDFLAGS="-L$cache/gil/lib -Wl,-rpath,$cache/gil/lib" LIBS="-lgil")
    fi
    if [ -f "$tree/.key" ] && [ "$(cat "$tree/.key")" = "$key" ] && [ -x "$prefix/bin/ruby" ]; then
        if [ "$patched" = 0 ] || [ "$(cat "$tree/.lib_key")" = "$lib_key" ]; then
            say "$name: up to date ($prefix)"
            return
        fi
        say "$name: the library or the shim changed: rebuilding the thread code"
        cp "$shim" "$tree/"
        touch "$tree/thread.c"
    else
        say "$name: fresh tree in $tree"
        rm -rf "$tree" "$prefix"
        mkdir -p "$tree"
        cp -a "$src/." "$tree/"
        rm -f "$tree/.from"
        if [ "$patched" = 1 ]; then
            (cd "$tree" && patch -p1 --forward --quiet <"$patch_file") \
                || die "the patch does not apply to Ruby in $src"
            cp "$shim" "$tree/"
        fi
        say "$name: configure ${opts[*]}"
        (cd "$tree" && ./configure "${opts[@]}" >"$tree/configure.log" 2>&1) \
            || { tail -n 20 "$tree/configure.log" >&2; die "$name: configure failed (log: $tree/configure.log)"; }
    fi
    say "$name: make -j$jobs"
    (cd "$tree" && make -j"$jobs" >"$tree/make.log" 2>&1) \
        || { grep -E 'rror' "$tree/make.log" | tail -n 20 >&2; die "$name: make failed (log: $tree/make.log)"; }
    say "$name: make install-nodoc into $prefix"
    (cd "$tree" && make install-nodoc >"$tree/install.log" 2>&1) \
        || { tail -n 20 "$tree/install.log" >&2; die "$name: make install failed (log: $tree/install.log)"; }
    echo "$key" >"$tree/.key"
    echo "$lib_key" >"$tree/.lib_key"
}

build rustgil 1
echo "RUBY_SOURCE=$src"
echo "RUBY_RUSTGIL=$top/rustgil"
echo "RUBY_RUSTGIL_BUILD=$top/build/rustgil"
if [ "$stock" = 1 ]; then
    build stock 0
    echo "RUBY_STOCK=$top/stock"
    echo "RUBY_STOCK_BUILD=$top/build/stock"
fi
