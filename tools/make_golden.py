#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Regenerates every committed golden file: runs tools/golden/gen_*.py, each
writing data/golden/<family>.h5 through this checkout's kloss.golden
(python/kloss/golden.py; tools/golden/golden_writer.py puts it on the path,
and no libkloss_c is needed). Run with a Python that has torch and h5py
(/usr/bin/python3 with python3-torch and python3-h5py); the generators of
the losses torch lacks need their references too (gen_pointwise.py:
scikit-learn, scoringrules, properscoring; gen_ensemble.py: scoringrules,
properscoring; gen_grid.py: neuraloperator). Deterministic (fixed
seeds)."""
import glob
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "golden"))
out_dir = os.path.join(here, "..", "data", "golden")
os.makedirs(out_dir, exist_ok=True)
for path in sorted(glob.glob(os.path.join(here, "golden", "gen_*.py"))):
    print("==", os.path.basename(path))
    mod = runpy.run_path(path)
    mod["main"](out_dir)
