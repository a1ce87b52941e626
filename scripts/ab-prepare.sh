#!/usr/bin/env bash
# Exports the source trees of several commits into .ab/ (git-ignored) for scripts/ab-run.sh, an A/B
# of two or more commits on one GPU in one device call: carry ".ab" with the call. The first ref is
# the baseline the others are compared with. Usage: scripts/ab-prepare.sh main my-branch~1 my-branch
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 2)) || { echo "usage: $0 base-ref other-ref [more refs]" >&2; exit 2; }
rm -rf .ab
mkdir -p .ab
i=0
for ref in "$@"; do
  name="$i-$(printf %s "$ref" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-40)"
  mkdir -p ".ab/$name"
  git archive "$ref" | tar -x -C ".ab/$name"
  echo "$name $(git rev-parse --short "$ref")" >>.ab/trees.txt
  i=$((i + 1))
done
cat .ab/trees.txt
echo ".ab: $(du -sh .ab | cut -f1) (carry it; the device call's carried paths hold at most 64 MiB)"
