#!/usr/bin/env bash
# One call on the GPU machine: build, run the GPU tests (label `gpu`), run them again under
# compute-sanitizer (memcheck, racecheck), then the benchmarks when they exist. Logs come back
# packed in $OUT (or ./gpu-out)/gpu-check.tgz. Usage: scripts/gpu-check.sh [--no-sanitizer]
# Env: BENCH_SUITES (default quick), BENCH_FILTER (a --filter regex), GPU_TEST_FILTER (ctest -R),
# BUILD_TARGETS (space-separated; default: everything), DEADLINE_S (below), B12X_TORCH (AUTO: build the torch extension
# and run its GPU tests when python3 there imports torch); googletest's own GTEST_FILTER narrows the
# C++ GPU test binaries (e.g. GTEST_FILTER='LinearFp8Gpu.*' with GPU_TEST_FILTER=gpu.linear); BENCH_COMPARE_ENV
# (e.g. "B12X_CLUSTERS=1") runs the same benchmarks a second time with those variables set, rows in
# bench-compare.csv, and scripts/bench_compare.py's table of the two: an A/B of a switch in one call
# (an A/B of commits: scripts/ab-prepare.sh and scripts/ab-run.sh). BENCH_SHAPES (MxNxK,...)
# replaces the suites' default shapes in every bench run. Python test packages the machine lacks
# travel as wheels in .whl (carry it): gguf, for tests/oracle.py.
# The device call returns at most 8 files from $OUT: the logs are written to a work folder and
# packed into $OUT/gpu-check.tgz at the end (also when a `timeout` stops the script), with the
# bench CSVs copied beside it. CTest's LastTest.log travels in the archive.
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${OUT:-$PWD/gpu-out}"
out="$(mktemp -d /tmp/gpu-check.XXXXXX)"
mkdir -p "$dest"
pack() {
  cp build-gpu/Testing/Temporary/LastTest.log "$out/" 2>/dev/null
  tar czf "$dest/gpu-check.tgz" -C "$out" . 2>/dev/null
  cp "$out"/*.csv "$dest/" 2>/dev/null
  true
}
trap pack EXIT
# DEADLINE_S (seconds from the start): the tests, sanitizer runs and benches each get what is left, so
# the script ends (and packs) inside a device call's limit; unset: no limit.
start_s=$SECONDS
left() { if [[ -n "${DEADLINE_S:-}" ]]; then local l=$((DEADLINE_S - (SECONDS - start_s))); echo $((l > 1 ? l : 1)); else echo 86400; fi; }
export B12X_CACHE_DIR="${B12X_CACHE_DIR:-/tmp/b12x-cache}"
sanitize=1
[[ "${1:-}" == "--no-sanitizer" ]] && sanitize=0
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$out/device.txt"

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

step "build"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DB12X_TORCH="${B12X_TORCH:-AUTO}" \
  -DPython3_EXECUTABLE="$(command -v python3)" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep -E "b12x: torch" "$out/configure.log" || true
cmake --build build-gpu -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
echo "built"

step "gpu tests"
timeout "$(left)" ctest --test-dir build-gpu -L gpu ${GPU_TEST_FILTER:+-R "$GPU_TEST_FILTER"} --output-on-failure 2>&1 | tee "$out/gpu-tests.log" | tail -40
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

if ((sanitize)); then
  # SANITIZER_BINS (test families, e.g. "linear quantize"; default: every GPU test binary) and
  # SANITIZER_FILTER (a gtest filter; default: everything but the exhaustive and large cases, which
  # the ~100x slowdown makes too long) narrow the runs, e.g. to the kernels a change touched.
  bins=()
  if [[ -n "${SANITIZER_BINS:-}" ]]; then for f in $SANITIZER_BINS; do bins+=("build-gpu/tests/b12x_gpu_test_$f"); done
  else bins=(build-gpu/tests/b12x_gpu_test_*); fi
  for bin in "${bins[@]}"; do
    [[ -x "$bin" ]] || { echo "no test binary $bin"; status=1; continue; }
    # racecheck/synccheck matter once kernels use shared memory (the linear kernels); today memcheck.
    for tool in ${SANITIZER_TOOLS:-memcheck}; do
      step "compute-sanitizer --tool $tool $(basename "$bin")"
      t=$(left); timeout $((t < 240 ? t : 240)) compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin" --gtest_brief=1 \
        --gtest_filter="${SANITIZER_FILTER:--*AllFloats*:*Large*:*EveryCode*:*Exhaustive*}" >/tmp/sanitizer.log 2>&1
      rc=$?
      { echo "=== $tool $(basename "$bin") rc=$rc"; cat /tmp/sanitizer.log; } >>"$out/sanitizer.log"
      tail -5 /tmp/sanitizer.log
      [[ $rc -eq 0 ]] || { echo "compute-sanitizer $tool failed ($rc)"; status=1; }
    done
  done
fi

if [[ -x build-gpu/b12x ]] && build-gpu/b12x bench --help >/dev/null 2>&1; then
  step "bench"
  timeout "$(left)" build-gpu/b12x bench --suite "${BENCH_SUITES:-quick}" ${BENCH_FILTER:+--filter "$BENCH_FILTER"} \
    ${BENCH_SHAPES:+--shapes "$BENCH_SHAPES"} --json "$out/bench.json" --csv "$out/bench.csv" --plot "$out/bench.png" 2>&1 \
    | tee "$out/bench.log" | tail -70
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  if [[ -n "${BENCH_COMPARE_ENV:-}" ]]; then
    step "bench with $BENCH_COMPARE_ENV"
    timeout "$(left)" env $BENCH_COMPARE_ENV build-gpu/b12x bench --suite "${BENCH_SUITES:-quick}" ${BENCH_FILTER:+--filter "$BENCH_FILTER"} \
      ${BENCH_SHAPES:+--shapes "$BENCH_SHAPES"} --csv "$out/bench-compare.csv" 2>&1 | tee "$out/bench-compare.log" | tail -70
    [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
    step "A/B: unset -> $BENCH_COMPARE_ENV"
    python3 scripts/bench_compare.py "$out/bench.csv" "$out/bench-compare.csv" || true
  fi
fi

step "summary"
echo "gpu-check status: $status"
exit $status
