#!/bin/bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs a CUDA build of kloss on its GPU: the unit test programs, Compute
# Sanitizer's memcheck, the benchmarks of docs/gpu.md and the PyTorch /
# Liger-Kernel / Cut Cross-Entropy peers on the same work, in one call.
#
#   scripts/gpu-check.sh BUILD OUT_DIR [tests|san|bench|peers|ncu ...]
#   scripts/gpu-check.sh --bundle BUILD BUNDLE_DIR
#
# BUILD is a built CUDA tree (the cmake line of docs/portability.md), or a
# bundle made from one by --bundle: bin/ (the test programs and
# benchmarks, stripped), lib/ (libkloss.so and the shared libraries they
# load that a machine with only the CUDA driver, toolkit and PyTorch may
# lack), so that the binaries built on one machine run on the GPU's.
# OUT_DIR receives tests.log, san.log, lm.json, team.log, pw.json,
# emb.json, peers.log and ncu.log. With no stage named: tests, san, bench,
# peers. Stages:
#   tests  every test program, in parallel (KLOSS_GPU_TESTS: a subset)
#   san    memcheck over KLOSS_GPU_SAN_TESTS (default: the cross-entropy,
#          fused head, element-wise and embedding programs), in parallel
#   bench  bench_lm_shapes (cross_entropy at the three shapes, the fused
#          head's default and small chunks), the row kernels' team sizes,
#          bench_pointwise (2^28 elements), bench_embedding
#   peers  tools/gpu_peers.py (every table; Liger-Kernel and Cut
#          Cross-Entropy where installed)
#   ncu    Nsight Compute's registers, occupancy and DRAM throughput of the
#          cross-entropy row kernels at (16384, 128256), clocks left alone
set -u
if [ "${1:-}" = --bundle ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --bundle BUILD BUNDLE_DIR" >&2; exit 2; }
  build=$(realpath "$2")
  mkdir -p "$3/bin" "$3/lib"
  for f in "$build"/unit_tests/test_* "$build"/perf_tests/bench_*; do
    [ -f "$f" ] && [ -x "$f" ] && cp "$f" "$3/bin/"
  done
  cp -L "$build/src/libkloss.so" "$3/lib/"
  # what the binaries load beyond the driver, libc and the toolkit
  ldd "$3"/bin/* "$3/lib/libkloss.so" | awk '/=> \// {print $3}' | sort -u |
    grep -E 'kokkos|dnnl|OpenCL|gomp|benchmark|cudart' | xargs -r -I{} cp -L {} "$3/lib/"
  strip --strip-unneeded "$3"/bin/* "$3"/lib/*.so* 2>/dev/null
  du -sh "$3"
  exit 0
fi
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD OUT_DIR [tests|san|bench|peers|ncu ...]" >&2
  exit 2
fi
build=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
stages=${*:-tests san bench peers}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
if [ -d "$build/bin" ]; then
  bin=$build/bin
  cublas=$(python3 -c "import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + '/lib')" 2>/dev/null)
  export LD_LIBRARY_PATH=$build/lib:/usr/local/cuda/lib64${cublas:+:$cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  bin=$build/bin.tmp
  mkdir -p "$bin"
  ln -sf "$build"/unit_tests/test_* "$build"/perf_tests/bench_* "$bin/" 2>/dev/null
fi
# in_parallel LOG SECONDS LAUNCHER PROGRAM...: each test program (under
# LAUNCHER, a command prefix or "") at once, each cut at SECONDS; their
# outputs and exit codes one after another in LOG
in_parallel() {
  local log=$1 seconds=$2 launcher=$3 t
  shift 3
  for t in "$@"; do
    # shellcheck disable=SC2086 # the launcher is a command prefix
    (timeout "$seconds" $launcher "$bin/$t" --gtest_brief=1 >"$log.$t" 2>&1
      echo "$t rc=$?" >>"$log.$t") &
  done
  wait
  for t in "$@"; do cat "$log.$t" && rm -f "$log.$t"; done >"$log"
}
t0=$(date +%s)
elapsed() { echo "[$(($(date +%s) - t0)) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader

for stage in $stages; do
  case $stage in
  tests)
    in_parallel "$out/tests.log" "${KLOSS_GPU_TEST_SECONDS:-240}" "" \
      ${KLOSS_GPU_TESTS:-$(cd "$bin" && ls test_* 2>/dev/null)}
    grep -E ' rc=|FAILED|tests ran' "$out/tests.log" | head -40
    elapsed tests
    ;;
  san)
    in_parallel "$out/san.log" "${KLOSS_GPU_SAN_SECONDS:-150}" "compute-sanitizer --tool memcheck --print-limit 20" \
      ${KLOSS_GPU_SAN_TESTS:-test_cross_entropy test_fused_linear test_pointwise test_embedding}
    grep -E 'ERROR SUMMARY|rc=|FAILED' "$out/san.log" | head -20
    elapsed san
    ;;
  bench)
    export KLOSS_BENCH_TORCH=0 # the GPU peers are a stage of their own
    "$bin/bench_lm_shapes" --benchmark_out="$out/lm.json" --benchmark_out_format=json \
      --benchmark_filter="${KLOSS_GPU_LM_FILTER:-^BM_ce<|BM_fused_linear<kloss::bfloat16>|BM_fused_linear<float>/[0-9]+/2048/[0-9]+/0/0/0}" \
      --benchmark_counters_tabular=true 2>&1 | grep -E '^BM|rror' | cut -c1-160
    elapsed lm
    # one program per team size: a size the kernel's registers do not
    # allow ends its program with Kokkos' error
    for team in ${KLOSS_GPU_TEAMS:-4 16 32}; do
      timeout 60 "$bin/bench_lm_shapes" --benchmark_filter="BM_ce_team<.*>/16384/128256/[012]/$team/" \
        --benchmark_counters_tabular=true 2>&1 | grep -E '^BM|rror|what' | cut -c1-300
    done >"$out/team.log" 2>&1
    cat "$out/team.log"
    elapsed team
    timeout 120 "$bin/bench_pointwise" --benchmark_out="$out/pw.json" --benchmark_out_format=json \
      --benchmark_filter="${KLOSS_GPU_PW_FILTER:-^(mse_loss|l1_loss|binary_cross_entropy_with_logits)/(forward|backward)/(float32|bfloat16)/}" \
      --benchmark_counters_tabular=true 2>&1 | grep -E '^[a-z_]+/|rror' | cut -c1-160
    elapsed pointwise
    timeout 120 "$bin/bench_embedding" --benchmark_out="$out/emb.json" --benchmark_out_format=json \
      --benchmark_counters_tabular=true 2>&1 | grep -E '^BM|rror|what' | cut -c1-160
    elapsed embedding
    ;;
  peers)
    PYTHONUNBUFFERED=1 timeout "${KLOSS_GPU_PEER_SECONDS:-240}" python3 "$src/tools/gpu_peers.py" >"$out/peers.log" 2>&1
    echo "peers rc=$?"
    elapsed peers
    ;;
  ncu)
    timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:cross_entropy" \
      --launch-count "${KLOSS_GPU_NCU_LAUNCHES:-8}" \
      --metrics launch__registers_per_thread,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,gpu__time_duration.sum,launch__block_size \
      "$bin/bench_lm_shapes" --benchmark_filter='BM_ce<.*>/16384/128256/[01]/0' --benchmark_min_time=0.01 >"$out/ncu.log" 2>&1
    echo "ncu rc=$?"
    elapsed ncu
    ;;
  *) echo "unknown stage: $stage" ;;
  esac
done
