#!/usr/bin/env bash
# Builds CPython 3.13 or 3.14 on the rust-gil library (./configure
# --with-rust-gil) and, with --stock, the unmodified interpreter from the
# same source.
#
#   cpython/build.sh [--version 3.13|3.14] [--source DIR] [--stock] [--shared] [--jobs N]
#
#   --version V   the CPython minor version (default: 3.14); each has its own
#                 patch (cpython/patches/python-V-rust-gil.patch) and cache
#   --source DIR  a CPython V.x source tree to use (it is copied, never
#                 modified); default for 3.13: the upstream tarball inside
#                 Debian's python3.13 source package, fetched with apt-get
#                 source; for 3.14: ../shared/sources/Python-3.14.7.tar.xz
#                 beside the repository when it is there, else Debian's
#                 python3.14 source package; either is checked against a
#                 sha256 pinned here
#   --stock       also build the unmodified interpreter, for comparisons
#   --shared      also build the rust-gil interpreter with --enable-shared
#                 (a shared libpythonV.so linked to the lock)
#   --jobs N      parallel make jobs (default: nproc)
#
# Everything goes under ${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}/cpython-V,
# outside the git tree; reruns reuse it and rebuild only what changed (a new
# library relinks, a new patch or shim rebuilds). At the end it prints:
#   RUSTGIL_PYTHON=<prefix>/bin/pythonV   STOCK_PYTHON=<prefix>/bin/pythonV
#   (and RUSTGIL_SHARED_PYTHON, with --shared)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${RUST_GIL_CACHE:-$HOME/.cache/rust-gil}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf 'cpython/build.sh: %s\n' "$*"; }
die() { printf 'cpython/build.sh: %s\n' "$*" >&2; exit 1; }

# CPython 3.14.7's source release: the copy in ../shared/sources (the
# release re-packed, Misc/svnmap.txt left out; its README.md) and the
# release itself as python.org published it, which Debian's python3.14
# source package carries as its upstream tarball.
PY314_SHARED_TARBALL=Python-3.14.7.tar.xz
PY314_SHARED_SHA256=c6e9330ca9d58adbe25bb6499705d11e3ae100b2152831d685b6a2b971b88c45
PY314_UPSTREAM_SHA256=3b48dac8fb59f62eaa67ac83c1eb12bda1b7a08406dd286e252c11a66be27f81

minor=3.14 source_dir="" stock=0 shared=0 jobs=$(nproc)
while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || die "--version needs 3.13 or 3.14"; minor=$2; shift 2 ;;
        --source) [ $# -ge 2 ] || die "--source needs a directory"; source_dir=$2; shift 2 ;;
        --stock) stock=1; shift ;;
        --shared) shared=1; shift ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
case "$minor" in
    3.13|3.14) ;;
    *) die "--version $minor: this repository has patches for CPython 3.13 and 3.14 only" ;;
esac
top="$cache/cpython-$minor"
python="python$minor"

mkdir -p "$top"
# The patch as scripts/gen-cpython-patch.sh would write it: the committed
# patch's edits with the shim (cpython/shim/) as new files, so an edited shim
# is built before it is committed into the patch.
patch_file="$top/python-$minor-rust-gil.patch"
bash "$repo/scripts/gen-cpython-patch.sh" --print "$minor" >"$patch_file.new"
mv "$patch_file.new" "$patch_file"
if ! cmp -s "$patch_file" "$repo/cpython/patches/python-$minor-rust-gil.patch"; then
    say "note: cpython/shim/ differs from the shim inside cpython/patches/python-$minor-rust-gil.patch;" \
        "building the shim; run scripts/gen-cpython-patch.sh before committing"
fi

# ---- the source ---------------------------------------------------------

pristine="$top/src/pristine"
if [ -n "$source_dir" ]; then
    [ -f "$source_dir/Include/patchlevel.h" ] || die "$source_dir is not a CPython source tree"
    src=$(cd "$source_dir" && pwd)
elif [ "$minor" = 3.13 ]; then
    # Debian's python3.13 source package (trixie), downloaded with a
    # throwaway apt state and unpacked by scripts/debian-source.sh.
    bash "$repo/scripts/debian-source.sh" --unpack "$pristine" python3.13 "$cache/debian" trixie \
        || die "could not fetch the python3.13 source package; pass --source DIR with a CPython 3.13 tree."
    src=$pristine
elif [ -f "$repo/../shared/sources/$PY314_SHARED_TARBALL" ]; then
    tarball=$(cd "$repo/../shared/sources" && pwd)/$PY314_SHARED_TARBALL
    if [ ! -f "$pristine/.from" ] || [ "$(cat "$pristine/.from")" != "$tarball" ]; then
        sum=$(sha256sum <"$tarball" | cut -d' ' -f1)
        [ "$sum" = "$PY314_SHARED_SHA256" ] \
            || die "$tarball has sha256 $sum, not the pinned $PY314_SHARED_SHA256; pass --source DIR with a CPython 3.14 tree."
        say "unpacking $tarball"
        rm -rf "$pristine"
        mkdir -p "$pristine"
        tar xf "$tarball" -C "$pristine" --strip-components=1 || die "could not unpack $tarball"
        echo "$tarball" >"$pristine/.from"
    fi
    src=$pristine
else
    # Debian's python3.14 source package (forky, sid): only its upstream
    # tarball, 3.14.7's, checked against the release's published sha256.
    bash "$repo/scripts/debian-source.sh" --version '^3\.14\.7-' --sha256 "$PY314_UPSTREAM_SHA256" \
        --unpack "$pristine" python3.14 "$cache/debian" forky sid \
        || die "could not fetch CPython 3.14.7's source; pass --source DIR with a CPython 3.14 tree."
    src=$pristine
fi
version=$(sed -n 's/^#define PY_VERSION[[:space:]]*"\(.*\)"/\1/p' "$src/Include/patchlevel.h")
case "$version" in
    "$minor".*) say "CPython $version from $src" ;;
    *) die "need CPython $minor.x, found '$version' in $src" ;;
esac

# ---- build dependencies ---------------------------------------------------

bash "$repo/scripts/need-packages.sh" cpython/build.sh build-essential pkg-config libffi-dev zlib1g-dev \
    libssl-dev libbz2-dev liblzma-dev libsqlite3-dev libreadline-dev libncurses-dev uuid-dev

# ---- the library ----------------------------------------------------------

say "installing the rust-gil library into $cache/gil"
bash "$repo/scripts/install.sh" --build "$cache/gil" >/dev/null

# ---- one interpreter ------------------------------------------------------

# build NAME CONFIGURE_ARGS... : builds $src (patched for rustgil) in
# $top/build/NAME and installs it into $top/NAME.
build() {
    local name=$1
    shift
    local tree="$top/build/$name" prefix="$top/$name"
    local key lib_key
    if [ "$name" != stock ]; then
        key=$(sha256sum <"$patch_file" | cut -c1-16)
        lib_key=$(cat "$cache/gil/lib/libgil.a" "$cache/gil/include/gil.h" | sha256sum | cut -c1-16)
    else
        key=stock lib_key=none
    fi
    key="$key-$version-$src"
    if [ -f "$tree/.key" ] && [ "$(cat "$tree/.key")" = "$key" ] && [ -x "$prefix/bin/$python" ]; then
        if [ "$(cat "$tree/.lib_key")" = "$lib_key" ]; then
            say "$name: up to date ($prefix)"
            return
        fi
        say "$name: the library changed: recompiling the shim and relinking"
        touch "$tree/Python/ceval_gil.c" "$tree/Modules/_rustgilmodule.c"
    else
        say "$name: fresh tree in $tree"
        rm -rf "$tree" "$prefix"
        mkdir -p "$tree"
        cp -a "$src/." "$tree/"
        rm -f "$tree/.from"
        if [ "$name" != stock ]; then
            (cd "$tree" && patch -p1 --forward --quiet <"$patch_file") || die "the patch does not apply to $version"
        fi
        say "$name: configure $*"
        (cd "$tree" && ./configure --prefix="$prefix" --without-ensurepip "$@" >"$tree/configure.log" 2>&1) \
            || { tail -n 20 "$tree/configure.log" >&2; die "$name: configure failed (log: $tree/configure.log)"; }
    fi
    say "$name: make -j$jobs"
    (cd "$tree" && make -j"$jobs" >"$tree/make.log" 2>&1) \
        || { grep -E 'error|Error' "$tree/make.log" | tail -n 20 >&2; die "$name: make failed (log: $tree/make.log)"; }
    say "$name: make install into $prefix"
    (cd "$tree" && make install >"$tree/install.log" 2>&1) \
        || { tail -n 20 "$tree/install.log" >&2; die "$name: make install failed (log: $tree/install.log)"; }
    echo "$key" >"$tree/.key"
    echo "$lib_key" >"$tree/.lib_key"
}

build rustgil --with-rust-gil="$cache/gil"
echo "RUSTGIL_PYTHON=$top/rustgil/bin/$python"
echo "RUSTGIL_BUILD=$top/build/rustgil"
if [ "$shared" = 1 ]; then
    # The installed interpreter finds its lib$python.so by its rpath.
    build rustgil-shared --with-rust-gil="$cache/gil" --enable-shared \
        LDFLAGS="-Wl,-rpath,$top/rustgil-shared/lib"
    echo "RUSTGIL_SHARED_PYTHON=$top/rustgil-shared/bin/$python"
    echo "RUSTGIL_SHARED_BUILD=$top/build/rustgil-shared"
fi
if [ "$stock" = 1 ]; then
    build stock
    echo "STOCK_PYTHON=$top/stock/bin/$python"
    echo "STOCK_BUILD=$top/build/stock"
fi
