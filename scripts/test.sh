#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Sets up a Debian 12 machine and runs the whole kloss test suite:
#  1. Release build: unit tests, MPI tests under mpirun (1-4 ranks),
#     golden validation (serial and --vocab-parallel), examples (shortened),
#     the downstream find_package test; the Python package, installed by
#     `pip install ./python`, and its pytest.
#  2. One clang AddressSanitizer + UBSan build: the unit tests, run
#     (test_hostile among them: its fixed seed and call count are printed
#     with the tally), and libFuzzer runs of the golden-file reader and of
#     hostile runtime-API calls (60 s each).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
jobs=$(nproc)
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
# ctest runs nproc tests at once (and MPI tests with several ranks): one
# OpenMP thread per process (oneDNN's products, a Kokkos OpenMP build's
# kernels) keeps them from oversubscribing the cores.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

echo "== Release build"
# (the parts the Python package's build turns off by default, named: its
# install below configures this same directory). The element-wise losses'
# device form for hosts (KLOSS_ENABLE_HOST_DEVICE_FORMS, a third of their
# compile) is left to the sanitizer build, which runs its tests.
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DKLOSS_ENABLE_TESTS=ON -DKLOSS_ENABLE_PERF_TESTS=ON \
  -DKLOSS_ENABLE_EXAMPLES=ON -DKLOSS_ENABLE_HOST_DEVICE_FORMS=OFF >/dev/null
cmake --build build/release -j"$jobs"
(cd build/release && ctest --output-on-failure -j"$jobs")

echo "== Python package (python/): pip install ./python, then import kloss and pytest with no KLOSS_* set"
# A fresh venv with the package and its test dependencies from PyPI, no
# torch (a few GB): the PyTorch tests skip, saying why. `pip install
# ./python` builds libkloss_c, kloss-validate and kloss-ops with CMake
# (scikit-build-core) and ships them inside the package; here its build
# directory is build/release, configured alike (and with its generator), so
# nothing compiles twice (scikit-build-core's cache entries only add the
# package's install rules). scikit-build-core clears a build directory's
# cache when it runs from another environment than last time (pip's build
# isolation makes a new one per install): it runs from this venv instead.
python3 -m venv --clear build/pyenv
build/pyenv/bin/pip install -q pytest numpy h5py "scikit-build-core>=0.10"
CMAKE_GENERATOR="Unix Makefiles" build/pyenv/bin/pip install -q --no-build-isolation ./python \
  --config-settings=build-dir="$PWD/build/release"
unset KLOSS_LIBRARY KLOSS_VALIDATE KLOSS_OPS KLOSS_ROOT
(cd /tmp && "$OLDPWD/build/pyenv/bin/python" -c \
  "import kloss, numpy as np; print('import kloss:', kloss.__file__, 'mse_loss', kloss.mse_loss(np.ones(3), np.zeros(3)))")
build/pyenv/bin/python -m pytest -rs -p no:cacheprovider python/tests

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (clang): the unit tests and the libFuzzer runs"
# One build serves both: kloss itself is built with ASan + UBSan, so the
# runtime-API fuzzer's calls into its kernels are checked too. -O1 -g1:
# sanitizer builds of these template-heavy files compile several times
# faster than at -O2 -g, with line numbers kept for the reports; the four
# element-wise instance files at -O0 (4 x 50 s of compile instead of
# 4 x 200 s on 2 cores; everything at -O0 compiles in 40 % of the time
# but runs the tests 3-10x slower). No Fortran here: gfortran's sanitizer
# runtimes are not clang's.
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DKLOSS_POINTWISE_INSTANCE_OPTIONS=-O0 \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKLOSS_ENABLE_SANITIZERS=ON -DKLOSS_ENABLE_FUZZERS=ON \
  -DKLOSS_ENABLE_HOST_DEVICE_FORMS=ON \
  -DKLOSS_ENABLE_FORTRAN=OFF -DKLOSS_ENABLE_PERF_TESTS=OFF -DKLOSS_ENABLE_EXAMPLES=OFF >/dev/null
# only what the `unit` and `fuzz` labels run (no MPI or large tests, tools)
cmake --build build/sanitize -j"$jobs" --target unit_and_fuzz_programs
# OpenMPI's own allocations are not ours to chase: leaks off, errors on.
(cd build/sanitize && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" -L unit)
echo "== libFuzzer runs of the golden-file reader and of the runtime API (60 s each, side by side)"
(cd build/sanitize && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$jobs" -L fuzz)
