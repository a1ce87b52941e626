#!/usr/bin/env bash
# Sets up, builds and runs every test that needs no GPU (ctest label `cpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --test-dir build -L cpu --output-on-failure -j "$(nproc)"
