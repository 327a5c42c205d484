#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds kloss and runs the main job on the
# bundled data, under mpirun with 2 ranks:
#  1. sim_surrogate: a 2-D advection-diffusion simulation whose state trains
#     an MLP surrogate online with gaussian_nll_loss (data-parallel);
#  2. lm_head_vocab_parallel: an embedding + LM head over a 50257-token
#     vocabulary sharded over the ranks, trained on data/markov_tokens.h5
#     toward the data's known entropy floor.
# The CSVs and PNGs land in ./out (or $KLOSS_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target sim_surrogate lm_head_vocab_parallel kloss_demo
out=${KLOSS_OUT:-$PWD/out}
mkdir -p "$out"
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
export OPENBLAS_NUM_THREADS=1
echo "== 1/2 simulation-coupled training (mpirun -np 2)"
"${mpi[@]}" ./build/release/examples/sim_surrogate --out "$out"
echo "== 2/2 vocabulary-parallel language-model head (mpirun -np 2)"
"${mpi[@]}" ./build/release/examples/lm_head_vocab_parallel --out "$out"
echo "main job done: results in $out (sim_surrogate.csv/.png, lm_head.csv/.png)"
