#!/usr/bin/env bash
# One call on the GPU machine: build the CLI and profile the linear decode kernels of chosen bench
# cases with Nsight Compute (speed of light, occupancy, warp stall reasons, instruction mix). Text
# reports go to $OUT (or ./gpu-out). Clocks are left alone (--clock-control none, see METHOD.md).
# Usage: scripts/gpu-profile.sh 'linear/(fp8|nvfp4)/1x28672x8192' [kernel-name regex, default linear_]
# Env: SUITES (default linear), LAUNCHES (kernels profiled, default 8; each case launches its kernel
# twice: the check, then one timed call), SOURCE=1 (also warp stall samples per SASS instruction:
# the report in $OUT/prof.ncu-rep and its source page, every profiled launch, in $OUT/source.csv).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
export B12X_CACHE_DIR="${B12X_CACHE_DIR:-/tmp/b12x-cache}"
filter="${1:?bench case filter}"
kernel="${2:-linear_}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target b12x_cli >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
# Plain timing first (the profiled run replays each kernel and is not a timing).
build-gpu/b12x bench --suite "${SUITES:-linear}" --filter "$filter" 2>&1 | tee "$out/bench.log" | tail -20
ncu --clock-control none --kernel-name "regex:$kernel" --launch-count "${LAUNCHES:-8}" --print-details all \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis \
  ${SOURCE:+--section SourceCounters --import-source no -o "$out/prof" -f} \
  build-gpu/b12x bench --suite "${SUITES:-linear}" --filter "$filter" --warmup 0 --iters 1 >"$out/ncu.txt" 2>&1
echo "ncu rc=$?"
if [[ -n "${SOURCE:-}" ]]; then
  ncu -i "$out/prof.ncu-rep" --print-details all >"$out/ncu.txt" 2>&1
  ncu -i "$out/prof.ncu-rep" --page source --csv --print-source sass >"$out/source.csv" 2>&1
  echo "source page rc=$? ($(wc -l <"$out/source.csv") lines)"
fi
grep -E "linear_|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Warp|Eligible Warps|Executed Ipc A|Executed Instructions  |Stall|stall" "$out/ncu.txt" | cut -c1-150 | head -200
