#!/usr/bin/env bash
# Downloads a Debian source package (.dsc, upstream tarball, debian tarball)
# with a throwaway apt state: a deb-src entry for the given releases, built
# from the mirror this machine's own apt configuration uses. The system's
# apt configuration is neither changed nor written.
#
#   scripts/debian-source.sh [--version ERE] [--sha256 HASH] [--unpack DIR] PACKAGE OUTDIR RELEASE [RELEASE...]
#
# Fetches nothing if OUTDIR already has PACKAGE_*.orig.tar.* (delete it to
# fetch again). --unpack DIR: then unpacks the newest upstream tarball there
# (its top directory stripped), unless DIR/.from says it already holds it. The releases are looked at together: without --version apt takes
# the newest version any of them carries; with it, the newest whose Debian
# version matches the extended regex ERE (e.g. '^1\.26\.'), so a newer
# upstream release in sid does not replace the one a patch is written for
# while a release still carries it. --sha256 HASH: fetch only the upstream
# tarball (for a release whose .dsc cannot be fetched, e.g. ocaml in
# trixie), and require it, fetched now or found in OUTDIR, to have that
# sha256 (pinned in the repository). Used by cpython/build.sh (python3.13
# from trixie), micropython/build.sh (micropython 1.26 from forky/sid) and
# ocaml/build.sh (ocaml 5.3 from trixie, pinned).
set -euo pipefail

die() { printf 'debian-source.sh: %s\n' "$*" >&2; exit 1; }
match="" unpack="" pin=""
while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || die "--version needs an extended regex"; match=$2; shift 2 ;;
        --sha256) [ $# -ge 2 ] || die "--sha256 needs a hash"; pin=$2; shift 2 ;;
        --unpack) [ $# -ge 2 ] || die "--unpack needs a directory"; unpack=$2; shift 2 ;;
        *) break ;;
    esac
done
[ $# -ge 3 ] || die "usage: scripts/debian-source.sh [--version ERE] [--sha256 HASH] [--unpack DIR] PACKAGE OUTDIR RELEASE [RELEASE...]"
package=$1 out=$2
shift 2

# unpack_into DIR: the newest upstream tarball in $out, unpacked into DIR.
unpack_into() {
    local dir=$1 tarball
    tarball=$(ls "$out/${package}"_*.orig.tar.* | grep -v '\.asc$' | sort -V | tail -n 1)
    if [ -f "$dir/.from" ] && [ "$(cat "$dir/.from")" = "$tarball" ]; then
        return
    fi
    printf 'debian-source.sh: unpacking %s\n' "$(basename "$tarball")"
    rm -rf "$dir"
    mkdir -p "$dir"
    tar xf "$tarball" -C "$dir" --strip-components=1 || die "could not unpack $tarball"
    echo "$tarball" >"$dir/.from"
}

# check_pin: with --sha256, the upstream tarball in $out has the pinned hash.
check_pin() {
    [ -n "$pin" ] || return 0
    local tarball sum
    tarball=$(ls "$out/${package}"_*.orig.tar.* | grep -v '\.asc$' | sort -V | tail -n 1)
    sum=$(sha256sum <"$tarball" | cut -d' ' -f1)
    [ "$sum" = "$pin" ] || die "$tarball has sha256 $sum, not the pinned $pin: delete it to fetch" \
        "again, or update the pin if the release changed on purpose"
}

if compgen -G "$out/${package}_*.orig.tar.*" >/dev/null; then
    check_pin
    [ -z "$unpack" ] || unpack_into "$unpack"
    exit 0
fi
command -v apt-get >/dev/null || die "apt-get not found: pass --source DIR with a $package source tree."
uri=$(awk '/^URIs:/{u=$2} /^Suites:/{ if ($0 !~ /security/ && u != "") { print u; exit } }' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$uri" ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
fi
[ -n "$uri" ] || die "no Debian mirror found in /etc/apt; pass --source DIR with a $package source tree."
key=$(awk '/^Signed-By:/{ print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$key" ] || key=/usr/share/keyrings/debian-archive-keyring.gpg

apt_state=$(mktemp -d)
trap 'rm -rf "$apt_state"' EXIT
mkdir -p "$apt_state/sources.list.d" "$apt_state/lists/partial" "$apt_state/cache/archives/partial" "$out"
printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
    "$uri" "$*" "$key" >"$apt_state/sources.list.d/$package-src.sources"
opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt_state/sources.list.d"
      -o "Dir::State::Lists=$apt_state/lists" -o "Dir::Cache=$apt_state/cache"
      -o "APT::Sandbox::User=root" -qq)
printf 'debian-source.sh: fetching the %s source package (%s)\n' "$package" "$*"
apt-get "${opts[@]}" update || die "apt-get update for the deb-src entry ($*) failed"
want=$package
if [ -n "$match" ]; then
    versions=$(apt-cache "${opts[@]}" showsrc "$package" 2>/dev/null | awk '/^Version:/ { print $2 }' | sort -uV)
    version=$(printf '%s\n' "$versions" | grep -E -- "$match" | tail -n 1 || true)
    [ -n "$version" ] || die "no $package version matching '$match' in $* (there: $(echo $versions))"
    want="$package=$version"
fi
if [ -n "$pin" ]; then
    # Only the upstream tarball, through apt's own downloader (it checks
    # the size and hash the release's index gives), then against the pin.
    line=$(apt-get "${opts[@]}" --print-uris source "$want" | grep -E "^'[^']*/${package}_[^']*\.orig\.tar\.[a-z0-9]+'" \
        | sed -n 1p || true)
    [ -n "$line" ] || die "the $package source package in $* lists no upstream tarball"
    read -r file_uri file _ file_hash <<<"$line"
    file_uri=${file_uri//\'/}
    /usr/lib/apt/apt-helper "${opts[@]}" download-file "$file_uri" "$out/$file" "$file_hash" \
        || die "could not download $file from the $package source package ($*)"
else
    (cd "$out" && apt-get "${opts[@]}" source --download-only "$want") \
        || die "apt-get source $want failed"
fi
compgen -G "$out/${package}_*.orig.tar.*" >/dev/null || die "no upstream tarball in the $package source package"
check_pin
[ -z "$unpack" ] || unpack_into "$unpack"
