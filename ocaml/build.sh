#!/usr/bin/env bash
# Builds OCaml 5.3 from Debian's source package (trixie; its upstream
# tarball pinned by sha256 below): "rustgil", with each domain's systhreads
# master lock on the rust-gil library (ocaml/patches/ + ocaml/shim/), and
# with --stock also "stock", unmodified, for comparison. Both with
# ocamltest, for OCaml's own test suite. Trees, installs and the library live under the cache root
# ($RUST_GIL_CACHE, else ~/.cache/rust-gil) in ocaml/; a tree is rebuilt
# when its patch or source changes, and the lock's part (the systhreads
# library) rebuilt and reinstalled when the shim or the library changes.
#
#   ocaml/build.sh [--stock] [--source DIR] [--jobs N]
#
#   --stock       also build the unmodified compiler
#   --source DIR  an OCaml 5.3 source tree instead of Debian's
#   --jobs N      make -jN (default: the number of CPUs)
#
# At the end it prints OCAML_SOURCE=<the pristine tree>,
# OCAML_RUSTGIL=<prefix> and OCAML_RUSTGIL_BUILD=<tree>
# (and, with --stock, OCAML_STOCK=<prefix> and OCAML_STOCK_BUILD=<tree>).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf 'ocaml/build.sh: %s\n' "$*"; }
die() { printf 'ocaml/build.sh: %s\n' "$*" >&2; exit 1; }

# Debian's ocaml_5.3.0.orig.tar.xz (trixie), as fetched on 2026-11-25.
OCAML_SHA256=b0229336d9ebe0af905954bcd1ae5b293306bbcb08c01ead03500d9e5bc90164

source_dir="" jobs=$(nproc) stock=0
while [ $# -gt 0 ]; do
    case "$1" in
        --source) [ $# -ge 2 ] || die "--source needs a directory"; source_dir=$2; shift 2 ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
        --stock) stock=1; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

top="$cache/ocaml"
patch_file="$repo/ocaml/patches/ocaml-5.3-rust-gil.patch"
shim="$repo/ocaml/shim/st_rustgil.h"
mkdir -p "$top"

# ---- the source ---------------------------------------------------------

pristine="$top/src/pristine"
if [ -n "$source_dir" ]; then
    [ -f "$source_dir/otherlibs/systhreads/st_stubs.c" ] || die "$source_dir is not an OCaml source tree"
    src=$(cd "$source_dir" && pwd)
else
    # The release's .dsc cannot be fetched here, so only the upstream
    # tarball is, and it must match the pin.
    bash "$repo/scripts/debian-source.sh" --sha256 "$OCAML_SHA256" --unpack "$pristine" \
        ocaml "$cache/debian" trixie \
        || die "could not fetch OCaml 5.3's source; pass --source DIR with an OCaml 5.3 tree."
    src=$pristine
fi
version=$(head -n 1 "$src/VERSION")
case "$version" in
    5.3.*) say "OCaml $version from $src" ;;
    *) die "need OCaml 5.3.x, found '$version' in $src" ;;
esac

# ---- build dependencies and the library -----------------------------------

bash "$repo/scripts/need-packages.sh" ocaml/build.sh build-essential
say "installing the rust-gil library into $cache/gil"
bash "$repo/scripts/install.sh" --build "$cache/gil" >/dev/null
lib_key=$(cat "$cache/gil/lib/libgil.so" "$cache/gil/include/gil.h" "$shim" | sha256sum | cut -c1-16)

# ---- one compiler ---------------------------------------------------------

# build NAME PATCHED: $src (patched if PATCHED=1) built in $top/build/NAME
# (OCaml builds in its source tree) and installed into $top/NAME.
build() {
    local name=$1 patched=$2 tree="$top/build/$1" prefix="$top/$1" key
    local opts=(--prefix="$prefix" --disable-ocamldoc --enable-ocamltest)
    local make_vars=()
    key="$version-$src"
    if [ "$patched" = 1 ]; then
        key="$key-$(sha256sum <"$patch_file" | cut -c1-16)"
        opts+=(CPPFLAGS="-DCAML_RUST_GIL -I$cache/gil/include")
        make_vars=(RUST_GIL_LIBDIR="$cache/gil/lib")
    fi
    if [ -f "$tree/.key" ] && [ "$(cat "$tree/.key")" = "$key" ] && [ -x "$prefix/bin/ocamlopt" ]; then
        if [ "$patched" = 0 ] || [ "$(cat "$tree/.lib_key")" = "$lib_key" ]; then
            say "$name: up to date ($prefix)"
            return
        fi
        say "$name: the library or the shim changed: rebuilding the lock's part"
        cp "$shim" "$tree/otherlibs/systhreads/"
        touch "$tree/otherlibs/systhreads/st_stubs.c"
        rm -f "$tree"/otherlibs/systhreads/*.cm*a "$tree"/otherlibs/systhreads/dllthreads*.so
    else
        say "$name: fresh tree in $tree"
        rm -rf "$tree" "$prefix"
        mkdir -p "$tree"
        cp -a "$src/." "$tree/"
        rm -f "$tree/.from"
        if [ "$patched" = 1 ]; then
            (cd "$tree" && patch -p1 --forward --quiet <"$patch_file") \
                || die "the patch does not apply to OCaml $version"
            cp "$shim" "$tree/otherlibs/systhreads/"
        fi
        say "$name: configure ${opts[*]}"
        (cd "$tree" && ./configure "${opts[@]}" >"$tree/configure.log" 2>&1) \
            || { tail -n 20 "$tree/configure.log" >&2; die "$name: configure failed (log: $tree/configure.log)"; }
    fi
    say "$name: make -j$jobs"
    (cd "$tree" && make -j"$jobs" "${make_vars[@]}" >"$tree/make.log" 2>&1) \
        || { grep -E 'rror' "$tree/make.log" | tail -n 20 >&2; die "$name: make failed (log: $tree/make.log)"; }
    say "$name: make install into $prefix"
    (cd "$tree" && make install "${make_vars[@]}" >"$tree/install.log" 2>&1) \
        || { tail -n 20 "$tree/install.log" >&2; die "$name: make install failed (log: $tree/install.log)"; }
    echo "$key" >"$tree/.key"
    echo "$lib_key" >"$tree/.lib_key"
}

build rustgil 1
echo "OCAML_SOURCE=$src"
echo "OCAML_RUSTGIL=$top/rustgil"
echo "OCAML_RUSTGIL_BUILD=$top/build/rustgil"
if [ "$stock" = 1 ]; then
    build stock 0
    echo "OCAML_STOCK=$top/stock"
    echo "OCAML_STOCK_BUILD=$top/build/stock"
fi
