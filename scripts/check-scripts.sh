#!/usr/bin/env bash
# Fails if a shell script of the repository that runs under `set -o
# pipefail` pipes a command into a reader that may stop reading early:
# `grep -q` (exits at the first match), `head`, or a `sed` that quits. The
# writer then dies of SIGPIPE once the pipe is closed, the pipeline fails,
# and the script fails at random, depending on how fast the writer is
# (issue 29: ldd piped into a quiet grep failed 11 of 200 times). Read everything
# instead: `grep ... >/dev/null`, `sed -n 1,Np`.
#
#   scripts/check-scripts.sh [FILE...]   (default: every tracked *.sh and .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
    files=("$@")
else
    mapfile -t files < <(git ls-files '*.sh' '.ci/*')
fi

bad=0
for f in "${files[@]}"; do
    grep -E 'set -[a-z]*o pipefail|set -o pipefail' "$f" >/dev/null || continue
    # A pipe into: grep with q among its short options (or --quiet/--silent),
    # head, or sed with a q command. Comments are skipped.
    hits=$(grep -nE '\|[[:space:]]*(grep([[:space:]]+-[a-zA-Z]*[qs]?[a-zA-Z]*)*[[:space:]]+(-[a-zA-Z]*q|--quiet|--silent)|head([[:space:]]|$)|sed[[:space:]]+(-n[[:space:]]+)?'"'"'?[0-9]*q)' "$f" |
        grep -vE '^[0-9]+:[[:space:]]*#' || true)
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s|^|$f:|" >&2
        bad=1
    fi
done
if [ "$bad" = 1 ]; then
    echo "check-scripts.sh: the lines above pipe into a reader that may exit early under pipefail;" \
        "use 'grep ... >/dev/null' or 'sed -n 1,Np' (reads all its input)" >&2
    exit 1
fi
echo "check-scripts.sh: ${#files[@]} scripts, no pipe into an early-exiting reader"
