#!/usr/bin/env bash
# Builds and installs the Python package the way users do (`pip install --no-build-isolation .`,
# scikit-build-core) into a scratch directory, then runs tests/torch/package_check.py against that
# install rather than the build tree. scripts/test.sh runs it after ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
echo "test-package: pip install --no-build-isolation . (into $target)"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$target" .
cd tests
PYTHONPATH="$target" B12X_INSTALLED_AT="$target" PYTHONDONTWRITEBYTECODE=1 \
  python3 -m pytest -q -p no:cacheprovider torch/package_check.py
