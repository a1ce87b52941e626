#!/usr/bin/env bash
# Sanitizer and fuzz checks of the host parsers (safetensors, GGUF, quantization config) and of the
# checkpoint reader (open, per-layer validation, TP shards), no GPU. scripts/test.sh (CI) runs it
# after ctest with FUZZ_SECONDS (default 30) per target:
#   1. builds fuzz/CMakeLists.txt with clang into build-fuzz (ASan + UBSan, libFuzzer);
#   2. runs the parser GoogleTests (tests/io/*.cpp) under ASan + UBSan (leak checks on);
#   3. writes the seed corpora (fuzz/make_corpus.py) and runs each fuzz target for a bounded time.
# Fails on a test failure, a sanitizer report, a crash, a leak, a timeout or running out of memory;
# the input that caused it is left in build-fuzz/artifacts/<target>/ with the command to replay it.
#
# Usage: scripts/fuzz.sh [SECONDS per target, default 30]
# Env:   FUZZ_SECONDS (same as the argument), FUZZ_CXX (default clang++-14), FUZZ_BUILD (default build-fuzz)
# Needs: clang-14 libclang-rt-14-dev (libFuzzer and the sanitizer runtimes), cmake, ninja-build,
#        nlohmann-json3-dev, libgtest-dev, and the Python packages of requirements-test.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-${FUZZ_SECONDS:-30}}
cxx=${FUZZ_CXX:-clang++-14}
build=${FUZZ_BUILD:-build-fuzz}
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: seconds must be a positive integer, got '$seconds'" >&2; exit 2; }
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: $cxx not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi

start=$SECONDS
echo "fuzz.sh: building into $build with $cxx"
cmake -G Ninja -S fuzz -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$build" -j "$(nproc)"
echo "fuzz.sh: built in $((SECONDS - start)) s"

export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The safetensors writer's round trip needs a scratch folder; tmpfs keeps its fsync cheap.
export B12X_FUZZ_TMP=${B12X_FUZZ_TMP:-$([[ -d /dev/shm && -w /dev/shm ]] && echo /dev/shm || echo "${TMPDIR:-/tmp}")}

t0=$SECONDS
echo "fuzz.sh: parser tests under ASan + UBSan"
"$build/asan_test_io"
echo "fuzz.sh: parser tests passed in $((SECONDS - t0)) s"

python3 fuzz/make_corpus.py "$build/seeds"
failed=()
# fuzz_checkpoint's inputs are whole checkpoint directories (docs/CHECKPOINTS.md section 7): a larger
# max_len, and the JSON dictionary plus its separator and tensor / layer names.
cat fuzz/json.dict fuzz/checkpoint.dict >"$build/checkpoint.dict"
for target in fuzz_safetensors fuzz_gguf fuzz_config_json fuzz_checkpoint; do
  if [[ ! -x $build/$target ]]; then
    echo "fuzz.sh: $target was not built (see the CMake warning); skipped"
    continue
  fi
  dict=fuzz/json.dict
  max_len=8192
  [[ $target == fuzz_gguf ]] && dict=fuzz/gguf.dict
  [[ $target == fuzz_checkpoint ]] && dict=$build/checkpoint.dict && max_len=16384
  corpus=$build/corpus/$target        # grows across runs; the seeds stay read-only
  artifacts=$build/artifacts/$target/
  mkdir -p "$corpus" "$artifacts"
  log=$build/$target.log
  t0=$SECONDS
  if "$build/$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2560 -dict="$dict" \
      -artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" "$build/seeds/$target" >"$log" 2>&1; then
    echo "fuzz.sh: $target: $(grep -Eo '^Done [0-9]+ runs' "$log" | cut -d' ' -f2) runs in $((SECONDS - t0)) s, no finding"
  else
    echo "fuzz.sh: $target FAILED; last lines of $log:" >&2
    tail -n 60 "$log" >&2
    for a in "$artifacts"*; do
      [[ -e $a ]] && echo "fuzz.sh: replay with: $build/$target $a" >&2
    done
    failed+=("$target")
  fi
done

echo "fuzz.sh: total $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi
