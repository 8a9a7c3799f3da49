#!/usr/bin/env bash
# Generates include/gil.h from crates/gil-ffi with the pinned cbindgen.
#   scripts/gen-header.sh           write include/gil.h
#   scripts/gen-header.sh --check   fail if include/gil.h is not what it would write
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
CBINDGEN_VERSION=0.29.4

if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]; then
    echo "gen-header: installing cbindgen $CBINDGEN_VERSION (pinned)"
    cargo install cbindgen --version "$CBINDGEN_VERSION" --locked --quiet
fi

out=include/gil.h
if [ "${1:-}" = "--check" ]; then
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
fi
cbindgen --quiet --config crates/gil-ffi/cbindgen.toml --crate gil-ffi --output "$out"
if [ "${1:-}" = "--check" ]; then
    if ! diff -u include/gil.h "$out"; then
        echo "gen-header: include/gil.h is stale; run scripts/gen-header.sh and commit it." >&2
        exit 1
    fi
    echo "gen-header: include/gil.h is up to date"
else
    echo "gen-header: wrote include/gil.h"
fi
