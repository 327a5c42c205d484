#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Sets up a Debian 12 machine, builds kloss and runs the main job on the
# bundled data, under mpirun with 2 ranks:
#  1. sim_surrogate: a 2-D advection-diffusion simulation whose state trains
#     an MLP surrogate online with gaussian_nll_loss (data-parallel; every
#     loss over the whole grid, area-weighted, a land disk masked, 5 % of the
#     observations missing), then the same on beta-NLL (beta 0.5, in
#     out/beta), and an 8-member ensemble surrogate on the almost-fair
#     crps_ensemble (in out/crps); then the reproducible mode's first
#     objective on 1, 2 and 3 ranks: the same bits;
#  2. lm_head_vocab_parallel: an embedding + LM head over a 50257-token
#     vocabulary sharded over the ranks, trained on data/markov_tokens.h5
#     toward the data's known entropy floor.
# The CSVs and PNGs land in ./out (or $KLOSS_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DKLOSS_ENABLE_EXAMPLES=ON >/dev/null
cmake --build build/release -j"$(nproc)" --target sim_surrogate lm_head_vocab_parallel kloss_demo kloss-ops
out=${KLOSS_OUT:-$PWD/out}
mkdir -p "$out"
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# An OpenBLAS older than the CPU runs its oldest kernels on it (Debian 12's
# on Sapphire Rapids: SSE3 "Prescott"); kloss-ops names the core that fits
# (kloss/blas_check.hpp) and the runs below get it.
eval "$(./build/release/src/kloss-ops --blas-env)"
echo "== 1/2 simulation-coupled training (mpirun -np 2): gaussian_nll_loss, beta-NLL, then an ensemble on crps_ensemble"
"${mpi[@]}" ./build/release/examples/sim_surrogate --out "$out"
mkdir -p "$out/beta" "$out/crps"
"${mpi[@]}" ./build/release/examples/sim_surrogate --beta 0.5 --out "$out/beta"
"${mpi[@]}" ./build/release/examples/sim_surrogate --loss crps --members 8 --out "$out/crps"
echo "== the sharded losses' reproducible mode: the first objective on 1, 2 and 3 ranks (the same bits)"
mkdir -p "$out/reproducible"
for np in 1 2 3; do
  "${mpi[@]:0:${#mpi[@]}-1}" "$np" ./build/release/examples/sim_surrogate --short --reproducible --progress lines \
    --log-every 1000 --out "$out/reproducible" | grep "first objective" | sed "s/^/$np rank(s): /"
done
echo "== 2/2 vocabulary-parallel language-model head (mpirun -np 2)"
"${mpi[@]}" ./build/release/examples/lm_head_vocab_parallel --out "$out" | tee "$out/lm_head.log"
# The same head in PyTorch (tools/torch_lm_head.py: same data, model, batches,
# optimiser, steps and held-out evaluations, 2 threads against the 2 ranks).
py=${KLOSS_TORCH_PYTHON:-python3}
kloss_rate=$(sed -n 's/^lm_head_vocab_parallel: .* s, \([0-9.]*\) tokens\/s.*/\1/p' "$out/lm_head.log")
if "$py" -c "import torch, h5py, numpy" 2>/dev/null; then
  echo "== PyTorch's unfused head on the same work ($py, 2 threads)"
  "$py" tools/torch_lm_head.py --threads 2 | tee "$out/torch_lm_head.log"
  torch_rate=$(sed -n 's/^torch_lm_head: .* s, \([0-9.]*\) tokens\/s.*/\1/p' "$out/torch_lm_head.log")
  if [ -n "$kloss_rate" ] && [ -n "$torch_rate" ]; then
    awk -v k="$kloss_rate" -v t="$torch_rate" 'BEGIN { printf "LM head: kloss %.0f tokens/s (2 ranks), PyTorch %.0f tokens/s (2 threads): kloss %.2fx PyTorch\n", k, t, k / t }'
  fi
else
  echo "LM head: kloss ${kloss_rate:-?} tokens/s; no PyTorch to compare with ($py lacks torch, h5py or numpy):"
  echo "  python3 -m venv /opt/torch && /opt/torch/bin/pip install torch h5py numpy"
  echo "  then KLOSS_TORCH_PYTHON=/opt/torch/bin/python bash scripts/main-job.sh"
fi
echo "main job done: results in $out (sim_surrogate.csv/.png, beta/ and crps/sim_surrogate.csv/.png, lm_head.csv/.png)"
