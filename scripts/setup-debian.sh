#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs what kloss needs on Debian 12, only what is missing: compilers
# (C, C++, gfortran for the Fortran module), CMake, Kokkos + Kokkos Kernels
# (Debian's Trilinos packages), OpenBLAS, oneDNN (the LM head's products), OpenMPI, parallel HDF5,
# GoogleTest, Google Benchmark, clang (fuzzing), python3-matplotlib (the
# examples' figures), doxygen (the API reference).
# PyTorch is not needed to build or test; tools/ generators use
# /usr/bin/python3 with python3-torch + python3-h5py (install by hand).
set -euo pipefail
pkgs=(build-essential gfortran cmake git pkg-config python3-matplotlib python3-venv doxygen
      libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
      libopenblas0-pthread libopenblas-pthread-dev libdnnl-dev
      libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
      libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi
