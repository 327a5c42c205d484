# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""What the generators gen_<family>.py share: the package's writer
(kloss.golden.GoldenFile, from this checkout's python/kloss/golden.py
whatever kloss is installed) and the few helpers that are theirs alone.
Run them all with tools/make_golden.py; they need torch and h5py, not
libkloss_c.

Conventions every generator follows (docs/golden-schema.md):
  * inputs are created in float64, rounded to the case dtype
    (`rounded(t, dtype)`), and the reference is computed by torch in float64
    from the rounded values;
  * the file is a kloss.golden.GoldenFile typed by the values alone
    (`golden_file`: registry=False): floating datasets float64, integer ones
    int64; options named exactly as torch's keywords, ints and booleans
    int64, reals float64, strings strings;
  * `tolerances(dtype)` gives the default rtol/atol per dtype.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from kloss.golden import DTYPES, GoldenFile, tolerances  # noqa: E402,F401

# Where the generators write when run as scripts: the committed data/golden.
DEFAULT_OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "golden")
TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64,
                "float16": torch.float16, "bfloat16": torch.bfloat16}


def rounded(t, dtype):
    """float64 tensor whose values are representable in `dtype` (torch's
    rounding; kloss.golden.rounded is its NumPy twin)."""
    return t.to(torch.float64).to(TORCH_DTYPES[dtype]).to(torch.float64)


def golden_file(out_dir, name, **layout):
    """A GoldenFile writing out_dir/name (out_dir made where missing), typed
    by the values alone; `layout`: GoldenFile's layout options (libver,
    compact, track_times, compact_attrs)."""
    os.makedirs(out_dir, exist_ok=True)
    return GoldenFile(os.path.join(out_dir, name), registry=False, **layout)


def ce_options(eps, zl, cap):
    """cross_entropy's float options (label_smoothing, z_loss, softcap) as a
    case stores them: the non-zero ones."""
    opts = {}
    if eps:
        opts["label_smoothing"] = eps
    if zl:
        opts["z_loss"] = zl
    if cap:
        opts["softcap"] = cap
    return opts
