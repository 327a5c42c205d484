#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Regenerates every committed golden file: runs tools/golden/gen_*.py, each
writing data/golden/<family>.h5. Run with /usr/bin/python3 (python3-torch,
python3-h5py); the generators of the losses torch lacks need their
references too (gen_ensemble.py: scoringrules, properscoring; gen_grid.py:
neuraloperator), as /opt/torch/bin/python has them. Deterministic (fixed
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
