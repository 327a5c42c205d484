# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes golden-case files in the `kloss-golden/1` schema
(docs/golden-schema.md): one HDF5 file per op family, one group per
case. Used by the per-family generators gen_<family>.py; run them all with
tools/make_golden.py. Needs /usr/bin/python3 with python3-torch and
python3-h5py.

Conventions every generator follows:
  * inputs are created in float64, rounded to the case dtype
    (`rounded(t, dtype)`), and the reference is computed by torch in float64
    from the rounded values;
  * floating datasets are stored as float64, integer ones as int64;
  * options are attributes named exactly as torch's keywords: ints as int64,
    reals as float64, booleans as int64 0/1, strings as strings;
  * `tolerances(dtype)` gives the default rtol/atol per dtype.
"""
import os

import h5py
import numpy as np
import torch

SCHEMA = "kloss-golden/1"
# Where the generators write when run as scripts: the committed data/golden.
DEFAULT_OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "golden")
TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64,
                "float16": torch.float16, "bfloat16": torch.bfloat16}
DTYPES = list(TORCH_DTYPES)

# Default tolerances per dtype (kloss computes 16-bit types in float and
# rounds the result to the dtype; float32 accumulates in float).
TOLERANCES = {"float64": (1e-10, 1e-12), "float32": (2e-5, 1e-6),
              "float16": (6e-3, 1e-3), "bfloat16": (4e-2, 1e-2)}


def tolerances(dtype):
    return TOLERANCES[dtype]


def rounded(t, dtype):
    """float64 tensor whose values are representable in `dtype`."""
    return t.to(torch.float64).to(TORCH_DTYPES[dtype]).to(torch.float64)


class GoldenFile:
    """Context manager: `with GoldenFile(path) as g: g.add_case(...)`."""

    def __init__(self, path):
        self.path = path
        self.names = set()

    def __enter__(self):
        self.f = h5py.File(self.path, "w")
        self.f.attrs["schema"] = SCHEMA
        self.cases = self.f.create_group("cases")
        return self

    def __exit__(self, *exc):
        self.f.close()
        return False

    def add_case(self, name, op, dtype, inputs, output, grads=None, grad_output=None,
                 reduction=None, index_dtype=None, options=None, rtol=None, atol=None,
                 extra_attrs=None):
        """inputs: dict argument name -> torch tensor (floating or integer);
        output: the expected forward result; grads: dict argument name ->
        expected gradient; grad_output: the upstream gradient used."""
        assert name not in self.names, "duplicate case name " + name
        self.names.add(name)
        g = self.cases.create_group(name)
        g.attrs["op"] = op
        g.attrs["dtype"] = dtype
        if index_dtype is not None:
            g.attrs["index_dtype"] = index_dtype
        if reduction is not None:
            g.attrs["reduction"] = reduction
        for k, v in (options or {}).items():
            if isinstance(v, bool):
                g.attrs[k] = np.int64(int(v))
            elif isinstance(v, (int, np.integer)):
                g.attrs[k] = np.int64(v)
            elif isinstance(v, (float, np.floating)):
                g.attrs[k] = np.float64(v)
            else:
                g.attrs[k] = str(v)
        for k, v in (extra_attrs or {}).items():
            g.attrs[k] = v
        d_rtol, d_atol = tolerances(dtype)
        g.attrs["rtol"] = np.float64(d_rtol if rtol is None else rtol)
        g.attrs["atol"] = np.float64(d_atol if atol is None else atol)
        ins = g.create_group("inputs")
        for k, v in inputs.items():
            ins.create_dataset(k, data=_np(v))
        if grad_output is not None:
            ins.create_dataset("grad_output", data=_np(grad_output))
        ex = g.create_group("expected")
        ex.create_dataset("output", data=_np(output))
        for k, v in (grads or {}).items():
            ex.create_dataset("grad_" + k, data=_np(v))


def golden_file(out_dir, name, cls=GoldenFile):
    """`cls` (GoldenFile or a subclass) writing out_dir/name, out_dir made
    where missing."""
    os.makedirs(out_dir, exist_ok=True)
    return cls(os.path.join(out_dir, name))


def _np(t):
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.is_floating_point():
            return t.to(torch.float64).numpy()
        return t.to(torch.int64).numpy()
    a = np.asarray(t)
    if np.issubdtype(a.dtype, np.floating):
        return a.astype(np.float64)
    return a.astype(np.int64)


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


def compact_dataset_writer(original):
    """h5py's Group.create_dataset (`original`) storing small datasets (up
    to 16 KiB) compactly, inside their object header, and without
    timestamps: the same datasets and values in fewer bytes."""
    import h5py
    import numpy as np

    def compact(group, name, data=None, **kw):
        arr = np.asarray(data)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        if arr.nbytes <= 16 * 1024:
            dcpl.set_layout(h5py.h5d.COMPACT)
        return original(group, name, data=arr, dcpl=dcpl, track_times=False, **kw)
    return compact
