#!/usr/bin/env bash
# Builds the C library and installs it under a prefix:
#   PREFIX/lib/libgil.a, PREFIX/lib/libgil.so(.0), PREFIX/include/gil.h,
#   PREFIX/lib/pkgconfig/gil.pc (shared) and gil-static.pc (static).
# Usage: scripts/install.sh PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

[ $# -eq 1 ] || { echo "usage: scripts/install.sh PREFIX" >&2; exit 2; }
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
version=$(sed -n 's/^#define GIL_VERSION "\(.*\)"$/\1/p' include/gil.h)
# What a static link of a Rust library needs from the C side on Linux/glibc
# (as printed by rustc --print native-static-libs).
native_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

echo "install: building gil-ffi (release)"
cargo build --release --locked --quiet -p gil-ffi
target=${CARGO_TARGET_DIR:-target}/release

echo "install: into $prefix"
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 644 "$target/libgil.a" "$prefix/lib/libgil.a"
install -m 755 "$target/libgil.so" "$prefix/lib/libgil.so.0"
ln -sf libgil.so.0 "$prefix/lib/libgil.so"
install -m 644 include/gil.h "$prefix/include/gil.h"

common="prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include
"
cat > "$prefix/lib/pkgconfig/gil.pc" <<PC
${common}
Name: gil
Description: Global interpreter lock with CPython's new-GIL protocol (shared library)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lgil
Libs.private: $native_libs
PC
cat > "$prefix/lib/pkgconfig/gil-static.pc" <<PC
${common}
Name: gil-static
Description: Global interpreter lock with CPython's new-GIL protocol (static library)
Version: $version
Cflags: -I\${includedir}
Libs: \${libdir}/libgil.a $native_libs
PC
echo "install: done. Build with: cc app.c \$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs gil)"
