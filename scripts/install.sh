#!/usr/bin/env bash
# Installs the C library the way cargo-c's `cargo cinstall` lays it out:
#
#   LIBDIR/libgil.so.X.Y.Z   the shared library, soname libgil.so.X.Y (0.x:
#                            the minor version is the ABI; from 1.0: .so.X)
#   LIBDIR/libgil.so.X.Y     -> libgil.so.X.Y.Z (the soname's link)
#   LIBDIR/libgil.so         -> libgil.so.X.Y.Z (the link-time name)
#   LIBDIR/libgil.a          the static library
#   INCLUDEDIR/gil.h
#   LIBDIR/pkgconfig/gil.pc          (shared; Libs.private for --static)
#   LIBDIR/pkgconfig/gil-static.pc   (the static library, -l:libgil.a)
#
# On macOS the shared library is LIBDIR/libgil.X.Y.Z.dylib, install name
# LIBDIR/libgil.X.Y.dylib (a link, as is libgil.dylib), and gil-static.pc
# names LIBDIR/libgil.a by path (Apple's ld has neither -l:NAME nor
# --exclude-libs). The BSDs get Linux's layout (ELF; their linkers, lld and
# GNU ld, take both flags). The macOS and BSD branches are written from
# the platforms' manuals and not run here (no such machine; README,
# "Platforms"). Windows: take gil.dll, libgil.dll.a and libgil.a from the
# target directory; this script refuses.
#
# Usage: scripts/install.sh [options] [PREFIX]
#   --prefix DIR      where the files will live (default /usr/local; also
#                     the positional PREFIX or $PREFIX)
#   --libdir DIR      default PREFIX/lib; relative: under PREFIX (e.g.
#                     lib/x86_64-linux-gnu); also $LIBDIR
#   --includedir DIR  default PREFIX/include; relative: under PREFIX
#   --destdir DIR     stage the files under DIR (the .pc files still name
#                     PREFIX); also $DESTDIR
#   --rpath           put -Wl,-rpath,LIBDIR into gil.pc's Libs (off by
#                     default: distributions reject rpaths)
#   --build           build the library first (cargo build --release
#                     --locked -p gil-ffi); without it nothing is built and
#                     the artifacts must be in the target directory
#                     ($CARGO_TARGET_DIR or target/)
#
# Why not cargo-c itself: Debian 12's cargo-c (0.9.14) cannot read this
# workspace (lock file version 4; tried 2026-11-24), and `cargo install
# cargo-c` builds all of cargo from source on every fresh CI machine. The
# layout, soname rule and .pc files here follow cargo-c's.
#
# Libs.private and the static .pc's system libraries are what
# `rustc --print native-static-libs` reports for a static library on this
# toolchain, probed with an empty crate (libgil links no native library of
# its own; scripts/c-tests.sh checks the probe against the real crate).
set -euo pipefail
self=$(realpath "$0")
here=$PWD   # relative --prefix / --destdir are taken from here
cd "$(dirname "$self")/.."
export PATH="$HOME/.cargo/bin:$PATH"

usage() { sed -n '/^# Usage:/,/CARGO_TARGET_DIR or target/p' "$self" | sed 's/^# \{0,1\}//' >&2; }
die() { echo "install.sh: $*" >&2; exit 2; }

prefix=${PREFIX:-}
libdir=${LIBDIR:-}
includedir=${INCLUDEDIR:-}
destdir=${DESTDIR:-}
rpath=0
build=0
positional=()
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#*=}; shift ;;
        --libdir) [ $# -ge 2 ] || die "--libdir needs a directory"; libdir=$2; shift 2 ;;
        --libdir=*) libdir=${1#*=}; shift ;;
        --includedir) [ $# -ge 2 ] || die "--includedir needs a directory"; includedir=$2; shift 2 ;;
        --includedir=*) includedir=${1#*=}; shift ;;
        --destdir) [ $# -ge 2 ] || die "--destdir needs a directory"; destdir=$2; shift 2 ;;
        --destdir=*) destdir=${1#*=}; shift ;;
        --rpath) rpath=1; shift ;;
        --build) build=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) usage || true; die "unknown option $1" ;;
        *) positional+=("$1"); shift ;;
    esac
done
[ ${#positional[@]} -le 1 ] || die "one PREFIX at most, got: ${positional[*]}"
[ ${#positional[@]} -eq 0 ] || prefix=${positional[0]}
prefix=${prefix:-/usr/local}
# A relative prefix or destdir is taken from the directory install.sh was
# started in, made absolute (the .pc files must name an absolute path).
case $prefix in /*) ;; *) prefix=$here/$prefix ;; esac
prefix=${prefix%/}
case $libdir in "") libdir=$prefix/lib ;; /*) ;; *) libdir=$prefix/$libdir ;; esac
case $includedir in "") includedir=$prefix/include ;; /*) ;; *) includedir=$prefix/$includedir ;; esac
case $destdir in "" | /*) ;; *) destdir=$here/$destdir ;; esac
destdir=${destdir%/}

os=$(uname -s)
case $os in
    Linux | FreeBSD | NetBSD | OpenBSD | DragonFly) os=elf ;;
    Darwin) os=darwin ;;
    *) die "no install layout for $os: this script knows Linux, the BSDs and macOS (on Windows take gil.dll, libgil.dll.a and libgil.a from the target directory)" ;;
esac

version=$(sed -n 's/^#define GIL_VERSION "\(.*\)"$/\1/p' include/gil.h)
[ -n "$version" ] || die "no GIL_VERSION in include/gil.h"
IFS=. read -r major minor _patch <<<"$version"
if [ "$major" = 0 ]; then abi=$major.$minor; else abi=$major; fi
if [ $os = darwin ]; then
    shared=libgil.dylib soname=libgil.$abi.dylib real=libgil.$version.dylib
else
    shared=libgil.so soname=libgil.so.$abi real=libgil.so.$version
fi

if [ $build = 1 ]; then
    echo "install: building gil-ffi (release)"
    cargo build --release --locked --quiet -p gil-ffi
fi
target=${CARGO_TARGET_DIR:-target}/release
for f in libgil.a $shared; do
    [ -f "$target/$f" ] || die "$target/$f is missing: build it first (cargo build --release -p gil-ffi) or pass --build"
    # What the library is built from (its tests and benches are not).
    newer=$(find Cargo.toml Cargo.lock crates/gil-core/Cargo.toml crates/gil-core/src \
        crates/gil-ffi/Cargo.toml crates/gil-ffi/src crates/gil-ffi/build.rs \
        -newer "$target/$f" -type f \( -name '*.rs' -o -name Cargo.toml -o -name Cargo.lock \) -print -quit)
    [ -z "$newer" ] || die "$target/$f is older than $newer: rebuild it (cargo build --release -p gil-ffi) or pass --build"
done
if [ $os = darwin ]; then
    command -v otool >/dev/null || die "otool not found (install Xcode's command line tools)"
    got=$(otool -D "$target/$shared" | sed -n '2s|.*/||p')
    what="install name"
else
    command -v readelf >/dev/null || die "readelf not found (Debian: apt-get install binutils)"
    got=$(readelf -d "$target/$shared" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
    what=soname
fi
[ "$got" = "$soname" ] || die "$target/$shared has $what '${got:-none}', expected $soname: rebuild it (cargo build --release -p gil-ffi)"

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
: > "$probe/empty.rs"
probe_out=$(rustc --crate-type staticlib --crate-name probe --edition 2021 --print native-static-libs \
    -o "$probe/libprobe.a" "$probe/empty.rs" 2>&1) || die "rustc could not build the probe for native-static-libs: $probe_out"
native_libs=$(sed -n 's/.*native-static-libs: //p' <<<"$probe_out" | tail -1)
[ -n "$native_libs" ] || die "rustc --print native-static-libs printed nothing"

echo "install: $real ($what $soname) into ${destdir}$libdir, gil.h into ${destdir}$includedir"
install -d "$destdir$libdir/pkgconfig" "$destdir$includedir"
install -m 644 "$target/libgil.a" "$destdir$libdir/libgil.a"
install -m 755 "$target/$shared" "$destdir$libdir/$real"
ln -sfn "$real" "$destdir$libdir/$soname"
ln -sfn "$real" "$destdir$libdir/$shared"
if [ $os = darwin ]; then
    # The install name programs record: where the library will live.
    install_name_tool -id "$libdir/$soname" "$destdir$libdir/$real" || die "install_name_tool failed on $real"
fi
install -m 644 include/gil.h "$destdir$includedir/gil.h"

# The .pc files say ${prefix} where they can, so that pkg-config's
# --define-variable=prefix=DIR can point them at a relocated tree.
pcpath() { case $1 in "$prefix") echo '${prefix}' ;; "$prefix"/*) echo "\${prefix}${1#"$prefix"}" ;; *) echo "$1" ;; esac; }
rpath_flag=""
[ $rpath = 0 ] || rpath_flag=" -Wl,-rpath,\${libdir}"
common="prefix=$prefix
libdir=$(pcpath "$libdir")
includedir=$(pcpath "$includedir")
"
cat > "$destdir$libdir/pkgconfig/gil.pc" <<PC
${common}
Name: gil
Description: Global interpreter lock with CPython's new-GIL protocol (shared library)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir}${rpath_flag} -lgil
Libs.private: $native_libs
PC
# --exclude-libs keeps a program that links the archive with
# --export-dynamic (CPython does) from exporting the Rust runtime's symbols.
if [ $os = darwin ]; then
    static_libs="\${libdir}/libgil.a $native_libs"
else
    static_libs="-L\${libdir} -l:libgil.a -Wl,--exclude-libs,libgil.a $native_libs"
fi
cat > "$destdir$libdir/pkgconfig/gil-static.pc" <<PC
${common}
Name: gil-static
Description: Global interpreter lock with CPython's new-GIL protocol (static library)
Version: $version
Cflags: -I\${includedir}
Libs: $static_libs
PC
if [ -n "$destdir" ]; then
    echo "install: done. Build against the staged tree with: cc app.c \$(PKG_CONFIG_PATH=${destdir}$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$destdir pkg-config --cflags --libs gil)"
else
    echo "install: done. Build with: cc app.c \$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs gil)"
fi
