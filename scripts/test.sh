#!/usr/bin/env bash
# Sets up, builds and runs every test that needs no GPU (ctest label `cpu`, the torch extension's
# pytest files included), then the parser and checkpoint fuzzers under ASan + UBSan for FUZZ_SECONDS
# per target (default 30; scripts/fuzz.sh), then `pip install .` and the installed package's tests
# (scripts/test-package.sh). All steps always run; the last lines summarise them (fuzz, package, then ctest's counts), and
# the exit status is non-zero when either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

fuzz_seconds=${FUZZ_SECONDS:-30}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

if ctest --test-dir build -L cpu --no-tests=error --output-on-failure -j "$(nproc)" 2>&1 | tee "$logs/ctest"; then
  ctest_rc=0
else
  ctest_rc=$?
fi
if ./scripts/fuzz.sh "$fuzz_seconds" 2>&1 | tee "$logs/fuzz"; then
  fuzz_rc=0
else
  fuzz_rc=$?
fi
if ./scripts/test-package.sh 2>&1 | tee "$logs/package"; then
  package_rc=0
else
  package_rc=$?
fi

echo
echo "== test.sh summary =="
grep -E '^fuzz\.sh: (fuzz_[a-z_]+(: | FAILED)|parser tests |total |findings )' "$logs/fuzz" || true
if ((fuzz_rc == 0)); then
  echo "fuzz: ok, no finding (${fuzz_seconds} s per target)"
else
  echo "fuzz: FAILED (scripts/fuzz.sh exit $fuzz_rc; its output is above)"
fi
package_counts=$(grep -Eo '[0-9]+ (passed|failed)[^=]*' "$logs/package" | tail -n 1 || true)
if ((package_rc == 0)); then
  echo "package: ok, pip install . and its tests: ${package_counts:-no summary}"
else
  echo "package: FAILED (scripts/test-package.sh exit $package_rc: ${package_counts:-no summary}; its output is above)"
fi
counts=$(grep -Eo '[0-9]+ tests failed out of [0-9]+' "$logs/ctest" | tail -n 1 || true)
if [[ $counts =~ ^([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+)$ ]]; then
  echo "ctest: $((BASH_REMATCH[2] - BASH_REMATCH[1])) passed, ${BASH_REMATCH[1]} failed"
else
  echo "ctest: FAILED (exit $ctest_rc, no test summary)"
fi
if ((ctest_rc != 0)); then exit "$ctest_rc"; fi
if ((package_rc != 0)); then exit "$package_rc"; fi
exit "$fuzz_rc"
