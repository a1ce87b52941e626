#!/usr/bin/env bash
# Exports the source tree of a commit (default: main) into .bench-base (git-ignored), for
# scripts/gpu-check.sh's BENCH_BASE A/B: carry ".bench-base" with the device call and set
# BENCH_BASE=.bench-base. Usage: scripts/bench-base.sh [commit]
set -euo pipefail
cd "$(dirname "$0")/.."
ref="${1:-main}"
rm -rf .bench-base
mkdir -p .bench-base
git archive "$ref" | tar -x -C .bench-base
echo ".bench-base = $(git rev-parse --short "$ref") ($(du -sh .bench-base | cut -f1))"
