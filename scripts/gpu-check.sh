#!/bin/bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs a CUDA (or HIP) build of kloss on its GPU: the unit tests through
# ctest, the benchmarks of docs/gpu.md, and the PyTorch / Liger-Kernel /
# Cut Cross-Entropy peers (tools/gpu_peers.py) on the same work.
#
#   scripts/gpu-check.sh BUILD_DIR OUT_DIR [tests|bench|peers|ncu ...]
#
# BUILD_DIR is a configured and built tree (see docs/portability.md for the
# cmake line); OUT_DIR receives tests.log, bench.log, peers.log (and
# ncu.log: Nsight Compute's counters of the cross-entropy kernels, a stage
# run only when named). With no stage named, tests, bench and peers run.
# Prints a summary at the end.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [tests|bench|peers ...]" >&2
  exit 2
fi
build=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
stages=${*:-tests bench peers}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
summary=()

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null |
  tee "$out/gpu.txt"

for stage in $stages; do
  case $stage in
  tests)
    # install: the downstream test rebuilds against the Kokkos install
    (cd "$build" && timeout "${KLOSS_GPU_CHECK_TEST_SECONDS:-300}" ctest -j "${KLOSS_GPU_CHECK_JOBS:-8}" \
      -E "${KLOSS_GPU_CHECK_EXCLUDE:-downstream}" --timeout 240 --output-on-failure) >"$out/tests.log" 2>&1
    summary+=("tests: $(grep -E 'tests passed|tests failed' "$out/tests.log" | tail -1)")
    grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Exception|Subprocess)' "$out/tests.log" | head -20
    ;;
  bench)
    : >"$out/bench.log"
    export KLOSS_BENCH_TORCH=0  # the GPU peers are the next stage
    benches=${KLOSS_GPU_CHECK_BENCHES:-"bench_lm_shapes;bench_pointwise --benchmark_filter=(mse_loss|l1_loss|smooth_l1_loss|binary_cross_entropy_with_logits)/;bench_embedding;bench_ctc"}
    IFS=';' read -ra list <<<"$benches"
    for b in "${list[@]}"; do
      read -ra args <<<"$b"  # no glob expansion of the filters
      set -- "${args[@]}"
      exe="$build/perf_tests/$1"
      shift
      if [ ! -x "$exe" ]; then
        echo "### $(basename "$exe"): not built" >>"$out/bench.log"
        continue
      fi
      echo "### $(basename "$exe") $*" >>"$out/bench.log"
      timeout "${KLOSS_GPU_CHECK_BENCH_SECONDS:-90}" "$exe" "$@" --benchmark_counters_tabular=true >>"$out/bench.log" 2>&1 ||
        echo "### exit $?" >>"$out/bench.log"
    done
    summary+=("bench: $(grep -c '^BM_\|^[a-z_]*/' "$out/bench.log") rows")
    ;;
  ncu)
    # the cross-entropy row kernels' registers per thread, achieved
    # occupancy and DRAM throughput (Nsight Compute, clocks left alone)
    ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:cross_entropy" \
      --launch-count "${KLOSS_GPU_CHECK_NCU_LAUNCHES:-24}" \
      --metrics launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
      "$build/perf_tests/bench_lm_shapes" --benchmark_filter='BM_ce' --benchmark_min_time=0.01 >"$out/ncu.log" 2>&1
    summary+=("ncu: exit $?")
    ;;
  peers)
    PYTHONUNBUFFERED=1 timeout "${KLOSS_GPU_CHECK_PEER_SECONDS:-240}" python3 "$src/tools/gpu_peers.py" >"$out/peers.log" 2>&1
    summary+=("peers: exit $?")
    ;;
  *) summary+=("unknown stage: $stage") ;;
  esac
done
printf '%s\n' "${summary[@]}"
