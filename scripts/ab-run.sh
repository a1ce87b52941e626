#!/usr/bin/env bash
# On the GPU machine: builds the CLI of every tree that scripts/ab-prepare.sh exported into .ab/ (in
# parallel), optionally runs GPU tests in one of them, then runs the same benchmarks with each tree's
# CLI, trees interleaved, AB_RUNS times, and prints scripts/ab_table.py's table (median over the
# runs per tree, change against the first tree). Results: $OUT/ab.txt (the table) and $OUT/ab.csv
# (every run's rows, with tree and run columns). Env: AB_SUITES (default linear; baseline is always
# added, for the copy ceiling), AB_FILTER (a --filter regex; default: every case of the suites),
# AB_RUNS (default 2), AB_TEST_BIN (a GPU test target, e.g. b12x_gpu_test_linear; built and run in
# AB_TEST_TREE, default the last tree) with AB_TESTS (its gtest filter), AB_BENCH_ARGS (more bench
# options, e.g. "--l2-flush clean"), AB_PREWARM (default 1: before the timed runs, every tree's bench
# runs once with --iters 1 --warmup 0, all trees at once, so the JIT compiles of the trees overlap
# on the CPUs instead of filling each tree's first timed run; 0: off), AB_DEADLINE_S (seconds from
# the start: no timed run starts past it, and the table of the runs done is still printed).
# Trees that ab-prepare.sh prebuilt (.ab/bin/<tree>/, AB_PREBUILD) are not built here.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
dest="${OUT:-$PWD/gpu-out}"
mkdir -p "$dest"
work="$(mktemp -d /tmp/ab.XXXXXX)"
export B12X_CACHE_DIR="${B12X_CACHE_DIR:-/tmp/b12x-cache}"
mapfile -t trees < <(cut -d' ' -f1 .ab/trees.txt 2>/dev/null)
((${#trees[@]} >= 2)) || { echo "no .ab/trees.txt with two trees: run scripts/ab-prepare.sh and carry .ab"; exit 2; }
test_tree="${AB_TEST_TREE:-${trees[-1]}}"
jobs=$(( $(nproc) / ${#trees[@]} )); ((jobs >= 1)) || jobs=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
echo "== build ${trees[*]} ($(date +%T))"
for t in "${trees[@]}"; do
  targets="b12x_cli"
  [[ "$t" == "$test_tree" && -n "${AB_TEST_BIN:-}" ]] && targets="$targets $AB_TEST_BIN"
  # Executables built beforehand on the CPU machine (ab-prepare.sh with AB_PREBUILD), if they start
  # here (their shared libraries found): no build on the device.
  if [[ -x ".ab/bin/$t/b12x" ]] && ! ldd ".ab/bin/$t/b12x" | grep -q "not found" &&
     { [[ "$t" != "$test_tree" || -z "${AB_TEST_BIN:-}" ]] || [[ -x ".ab/bin/$t/$AB_TEST_BIN" ]]; }; then
    mkdir -p "$work/build-$t/tests"
    ln -s "$PWD/.ab/bin/$t/b12x" "$work/build-$t/b12x"
    [[ -n "${AB_TEST_BIN:-}" && -x ".ab/bin/$t/$AB_TEST_BIN" ]] && ln -s "$PWD/.ab/bin/$t/$AB_TEST_BIN" "$work/build-$t/tests/"
    echo "$t: prebuilt"
    continue
  fi
  ( cmake -S ".ab/$t" -B "$work/build-$t" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DB12X_TORCH=OFF >"$work/cfg-$t.log" 2>&1 &&
    cmake --build "$work/build-$t" -j "$jobs" --target $targets >"$work/build-$t.log" 2>&1 ||
    { echo "build of $t failed:"; grep -E "error" "$work/build-$t.log" "$work/cfg-$t.log" | head -20; } ) &
done
wait
past_deadline() { [[ -n "${AB_DEADLINE_S:-}" ]] && ((SECONDS >= AB_DEADLINE_S)); }  # (SECONDS: since the start)
if [[ -n "${AB_TEST_BIN:-}" ]]; then
  echo "== $AB_TEST_BIN in $test_tree ($(date +%T))"
  "$work/build-$test_tree/tests/$AB_TEST_BIN" ${AB_TESTS:+--gtest_filter="$AB_TESTS"} 2>&1 |
    grep -E "^\[ +(OK|PASSED|FAILED) |Failure|tests ran" | head -60
fi
if [[ "${AB_PREWARM:-1}" != 0 ]]; then
  echo "== JIT warm-up, trees in parallel ($(date +%T))"
  # The timed runs' shapes (AB_BENCH_ARGS' --shapes, if any) so that their kernels compile here too;
  # not the rest of AB_BENCH_ARGS (the CLI refuses a second --iters / --warmup).
  warm=()
  [[ "${AB_BENCH_ARGS:-}" =~ --shapes[=\ ]+([^ ]+) ]] && warm=(--shapes "${BASH_REMATCH[1]}")
  for t in "${trees[@]}"; do
    "$work/build-$t/b12x" bench --suite "baseline,${AB_SUITES:-linear}" ${AB_FILTER:+--filter "$AB_FILTER"} \
      "${warm[@]}" --iters 1 --warmup 0 >"$work/$t.prewarm.log" 2>&1 &
  done
  wait
fi
for r in $(seq 1 "${AB_RUNS:-2}"); do
  for t in "${trees[@]}"; do
    if past_deadline; then echo "== deadline (AB_DEADLINE_S=$AB_DEADLINE_S): no run $r of $t"; continue; fi
    echo "== bench $t run $r ($(date +%T))"
    "$work/build-$t/b12x" bench --suite "baseline,${AB_SUITES:-linear}" ${AB_FILTER:+--filter "$AB_FILTER"} \
      ${AB_BENCH_ARGS:-} --csv "$work/$t.run$r.csv" >"$work/$t.run$r.log" 2>&1 || echo "bench $t run $r: rc $?"
  done
done
csvs=("$work"/*.run*.csv)
[[ -e "${csvs[0]}" ]] || { echo "no bench CSVs were written (no CUDA device? see $work/*.run*.log)"; exit 1; }
python3 scripts/ab_table.py --out-csv "$dest/ab.csv" "${csvs[@]}" | tee "$dest/ab.txt"
