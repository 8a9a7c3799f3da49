#!/usr/bin/env bash
# The C side of the C ABI: checks include/gil.h against cbindgen, builds the
# C tests -Wall -Wextra -Werror -pedantic, runs them under ASan + UBSan
# (static library) and under valgrind (shared library), installs the library
# into a prefix and builds + runs the embedding example through pkg-config.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n==> %s\n' "$*"; }
die() { printf 'c-tests.sh: %s\n' "$*" >&2; exit 1; }

need=()
command -v cc >/dev/null || need+=(gcc)
command -v valgrind >/dev/null || need+=(valgrind)
command -v pkg-config >/dev/null || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
    step "installing ${need[*]}"
    [ "$(id -u)" = 0 ] || die "need ${need[*]} (run as root, or install them)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

step "header: include/gil.h matches cbindgen"
bash scripts/gen-header.sh --check

out=build/c-tests
mkdir -p "$out"
prefix="$PWD/build/prefix"
step "install into $prefix"
bash scripts/install.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

CFLAGS=(-std=c11 -Wall -Wextra -Werror -pedantic -g -O1 -pthread)
src=crates/gil-ffi/tests/c/test_gil.c

step "C tests under AddressSanitizer + UndefinedBehaviorSanitizer (static library)"
# shellcheck disable=SC2046
cc "${CFLAGS[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
    "$src" -o "$out/test_gil_asan" $(pkg-config --cflags --libs gil-static)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    timeout 600 "$out/test_gil_asan"

step "C tests under valgrind (shared library)"
# shellcheck disable=SC2046
cc "${CFLAGS[@]}" "$src" -o "$out/test_gil_shared" $(pkg-config --cflags --libs gil)
GIL_TEST_SCALE=1 timeout 1200 valgrind --quiet --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    --suppressions=crates/gil-ffi/tests/c/valgrind.supp \
    "$out/test_gil_shared"

step "embedding example: build against the installed library, both ways"
make -s -C examples clean all PKG=gil
make -s -C examples all PKG=gil-static OUT=tiny-interp-static
examples/tiny-interp --policy classic --max-cpu 1 --seconds 0.3
examples/tiny-interp-static --policy classic --max-cpu 0 --seconds 0.2
if examples/tiny-interp --policy no-such-policy >/dev/null 2>&1; then
    die "tiny-interp accepted an unknown policy"
fi
echo "c-tests: all passed"
