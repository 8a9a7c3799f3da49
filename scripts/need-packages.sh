#!/usr/bin/env bash
# Installs the Debian packages named that are missing (apt-get, as root);
# as another user, fails naming them. Used by the interpreter build scripts.
#
#   scripts/need-packages.sh WHO PACKAGE...     (WHO prefixes the messages)
set -euo pipefail
who=$1
shift
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$pkg")
done
[ ${#missing[@]} -gt 0 ] || exit 0
if [ "$(id -u)" != 0 ]; then
    printf '%s: missing build dependencies: %s (install them, or run as root)\n' "$who" "${missing[*]}" >&2
    exit 1
fi
printf '%s: installing %s\n' "$who" "${missing[*]}"
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
