# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the embedding family (embedding, embedding_bag) in the
kloss-golden/1 schema: every mode, option and layout, for the four dtypes
and both index dtypes. References from torch 1.13 in float64 on inputs
rounded to the case dtype; gradients from autograd with a random
grad_output (also rounded). `weight` is stored as given, before torch's
in-place max_norm renormalisation.

Run: cd tools/golden && /usr/bin/python3 -c "import gen_embedding as g; g.main('../../data/golden')"

torch 1.13's CPU embedding_bag backward with scale_grad_by_freq divides
some rows by another row's count when the rows' counts differ (input
[1,1,4,4,0,1] gives row 4 a factor 1/3; [2,2,2,3,3] gives row 3 1/3).
kloss divides by the true count (unit_tests/test_embedding.cpp checks
unequal counts against a float64 formula); the embedding_bag
scale_grad_by_freq cases here use inputs whose rows all occur equally
often, where torch is right, and the generator checks every such case
against the formula.
"""

import numpy as np
import torch
import torch.nn.functional as F

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded

INDEX_DTYPES = ["int64", "int32"]
MODES = {"sum": 0, "mean": 1, "max": 2}


def rand(shape, dtype, gen, lo=-1.0, hi=1.0):
    t = torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    return rounded(t, dtype)


def randint(hi, shape, gen):
    return torch.randint(0, hi, shape, generator=gen, dtype=torch.int64)


def embedding_case(g, name, dtype, index_dtype, gen, shape, V, D, ext=None, **opts):
    idx = randint(V, shape, gen)
    w0 = rand((V, D), dtype, gen, -2.0, 2.0)
    w = w0.clone().requires_grad_(True)
    torch_opts = dict(opts)
    out = F.embedding(idx, w, **torch_opts)
    go = rand(out.shape, dtype, gen)
    out.backward(go)
    gw = w.grad.to_dense() if w.grad.is_sparse else w.grad
    if opts.get("scale_grad_by_freq"):
        check_freq_embedding(idx, go, V, D, opts.get("padding_idx"), gw)
    attrs = {k: v for k, v in opts.items() if v is not None}
    attrs.update(ext or {})
    g.add_case(name, "embedding", dtype, {"input": idx, "weight": w0}, out, grads={"weight": gw},
               grad_output=go, index_dtype=index_dtype, options=attrs)


def check_freq_embedding(idx, go, V, D, pad, gw):
    flat = idx.reshape(-1).numpy()
    counts = np.bincount(flat, minlength=V)
    ref = np.zeros((V, D))
    gof = go.reshape(-1, D).numpy()
    p = None if pad is None else (pad + V) % V
    for i, r in enumerate(flat):
        if r != p:
            ref[r] += gof[i] / counts[r]
    assert np.allclose(ref, gw.numpy(), rtol=1e-12, atol=1e-12), "torch embedding freq mismatch"


def bag_reference_grad(idx, offsets, ilo, mode, V, D, pad, go, psw):
    """float64 grad_weight of sum / mean with the true per-row counts."""
    flat = idx.reshape(-1).numpy()
    n = flat.size
    if idx.dim() == 2:
        L = idx.shape[1]
        bags = [(b * L, (b + 1) * L) for b in range(idx.shape[0])]
    else:
        o = offsets.numpy().tolist()
        B = len(o) - 1 if ilo else len(o)
        bags = [(o[b], o[b + 1] if (ilo or b + 1 < len(o)) else n) for b in range(B)]
    counts = np.bincount(flat, minlength=V)
    p = None if pad is None else (pad + V) % V
    ref = np.zeros((V, D))
    gon = go.numpy()
    for b, (s, e) in enumerate(bags):
        c = sum(1 for i in range(s, e) if flat[i] != p)
        for i in range(s, e):
            r = flat[i]
            if r == p:
                continue
            scale = psw.reshape(-1)[i].item() if psw is not None else (1.0 / c if mode == "mean" else 1.0)
            ref[r] += scale * gon[b] / counts[r]
    return ref


def bag_inputs(layout, V, gen):
    """(input, offsets or None, include_last_offset) of a layout."""
    if layout == "offsets":  # 1-D with an empty bag in the middle and at the end
        idx = randint(V, (13,), gen)
        return idx, torch.tensor([0, 4, 4, 9, 13]), False
    if layout == "last_offset":  # include_last_offset (last offset = N: torch 1.13 corrupts its heap when
        idx = randint(V, (11,), gen)  # entries follow the last offset, so no case has such a tail)
        return idx, torch.tensor([0, 3, 3, 11]), True
    if layout == "equal_counts":  # 4 distinct rows 3 times each, shuffled (see the module docstring)
        rows = torch.randperm(V, generator=gen)[:4].repeat(3)
        return rows[torch.randperm(12, generator=gen)], torch.tensor([0, 4, 4, 9]), False
    if layout == "fixed":  # 2-D [4, 3]
        return randint(V, (4, 3), gen), None, False
    raise ValueError(layout)


def bag_case(g, name, dtype, index_dtype, gen, layout, V, D, mode, psw=False, ext=None, **opts):
    for attempt in range(50):
        idx, offsets, ilo = bag_inputs(layout, V, gen)
        if opts.get("padding_idx") is not None:
            # make sure the padding row occurs
            idx.view(-1)[1] = (opts["padding_idx"] + V) % V
        w0 = rand((V, D), dtype, gen, -2.0, 2.0)
        w = w0.clone().requires_grad_(True)
        p = rand(idx.shape, dtype, gen, -2.0, 2.0).requires_grad_(True) if psw else None
        out = F.embedding_bag(idx, w, offsets, mode=mode, per_sample_weights=p, include_last_offset=ilo, **opts)
        go = rand(out.shape, dtype, gen)
        out.backward(go)
        gw = w.grad.to_dense() if w.grad.is_sparse else w.grad
        if opts.get("scale_grad_by_freq"):
            ref = bag_reference_grad(idx, offsets, ilo, mode, V, D, opts.get("padding_idx"), go, p.detach() if psw else None)
            if not np.allclose(ref, gw.numpy(), rtol=1e-12, atol=1e-12):
                continue  # torch's count bug (module docstring): draw another input
        break
    else:
        raise RuntimeError("no input on which torch's scale_grad_by_freq agrees with the formula: " + name)
    inputs = {"input": idx, "weight": w0}
    grads = {"weight": gw}
    if offsets is not None:
        inputs["offsets"] = offsets
    if psw:
        inputs["per_sample_weights"] = p.detach()
        grads["per_sample_weights"] = p.grad
    attrs = {k: v for k, v in opts.items() if v is not None}
    attrs["mode"] = mode
    attrs.update(ext or {})
    if ilo:
        attrs["include_last_offset"] = True
    g.add_case(name, "embedding_bag", dtype, inputs, out, grads=grads, grad_output=go, index_dtype=index_dtype,
               options=attrs)


# The full set for float64 and float32 with int64 indices; a core subset for
# the 16-bit types; int32 indices for a small subset of every dtype (the file
# stays near 1 MB: HDF5 spends ~8 KB per case).
CORE = {"embedding_plain", "embedding_padding_negative", "embedding_freq_padding", "embedding_max_norm",
        "embedding_sparse", "bag_sum_offsets", "bag_mean_offsets", "bag_max_offsets", "bag_sum_padding",
        "bag_mean_padding", "bag_max_padding", "bag_sum_fixed", "bag_mean_fixed", "bag_max_fixed",
        "bag_sum_psw_offsets", "bag_sum_freq"}
INT32 = {"embedding_plain", "bag_sum_offsets", "bag_mean_offsets", "bag_max_offsets"}


class Selector:
    """Wraps GoldenFile: drops the cases a (dtype, index dtype) does not keep."""

    def __init__(self, g, dtype, it):
        self.g, self.dtype, self.it = g, dtype, it

    def add_case(self, name, *args, **kw):
        base = name.rsplit("_", 2)[0]
        if self.it == "int32":
            keep = base in INT32
        else:
            keep = self.dtype in ("float64", "float32") or base in CORE
        if keep:
            self.g.add_case(name, *args, **kw)


def main(out_dir):
    gen = torch.Generator().manual_seed(20261122)
    with golden_file(out_dir, "embedding.h5") as gf:
        for dtype in DTYPES:
            for it in INDEX_DTYPES:
                g = Selector(gf, dtype, it)
                tag = f"{dtype}_{it}"
                V, D = 11, 7
                embedding_case(g, f"embedding_plain_{tag}", dtype, it, gen, (3, 5), V, D)
                embedding_case(g, f"embedding_1d_{tag}", dtype, it, gen, (13,), V, D)
                embedding_case(g, f"embedding_scalar_{tag}", dtype, it, gen, (), V, D)
                embedding_case(g, f"embedding_empty_{tag}", dtype, it, gen, (0,), V, D)
                embedding_case(g, f"embedding_3d_{tag}", dtype, it, gen, (2, 3, 4), 5, 3)
                embedding_case(g, f"embedding_padding_{tag}", dtype, it, gen, (4, 6), V, D, padding_idx=3)
                embedding_case(g, f"embedding_padding_negative_{tag}", dtype, it, gen, (4, 6), V, D, padding_idx=-2)
                embedding_case(g, f"embedding_freq_{tag}", dtype, it, gen, (5, 7), 6, D, scale_grad_by_freq=True)
                embedding_case(g, f"embedding_freq_padding_{tag}", dtype, it, gen, (5, 7), 6, D,
                               scale_grad_by_freq=True, padding_idx=-1)
                embedding_case(g, f"embedding_max_norm_{tag}", dtype, it, gen, (9,), V, D, max_norm=1.5)
                embedding_case(g, f"embedding_max_norm_p1_{tag}", dtype, it, gen, (9,), V, D, max_norm=2.0,
                               norm_type=1.0)
                embedding_case(g, f"embedding_max_norm_pinf_{tag}", dtype, it, gen, (9,), V, D, max_norm=1.0,
                               norm_type=float("inf"))
                embedding_case(g, f"embedding_sparse_{tag}", dtype, it, gen, (4, 5), V, D, sparse=True,
                               padding_idx=0)
                embedding_case(g, f"embedding_wide_{tag}", dtype, it, gen, (37,), 5, 41)
                # kloss extension option: the sorted, bitwise reproducible backward.
                embedding_case(g, f"embedding_deterministic_{tag}", dtype, it, gen, (6, 7), 6, D,
                               ext={"deterministic": True}, scale_grad_by_freq=True, padding_idx=1)

                V, D = 9, 5
                for mode in MODES:
                    for layout in ["offsets", "last_offset", "fixed"]:
                        bag_case(g, f"bag_{mode}_{layout}_{tag}", dtype, it, gen, layout, V, D, mode)
                    bag_case(g, f"bag_{mode}_padding_{tag}", dtype, it, gen, "offsets", V, D, mode, padding_idx=-3)
                    bag_case(g, f"bag_{mode}_padding_fixed_{tag}", dtype, it, gen, "fixed", V, D, mode, padding_idx=2)
                    bag_case(g, f"bag_{mode}_max_norm_{tag}", dtype, it, gen, "offsets", V, D, mode, max_norm=1.0)
                    if mode != "max":
                        bag_case(g, f"bag_{mode}_freq_{tag}", dtype, it, gen, "equal_counts", V, D, mode,
                                 scale_grad_by_freq=True)
                        bag_case(g, f"bag_{mode}_sparse_{tag}", dtype, it, gen, "last_offset", V, D, mode, sparse=True)
                for mode in MODES:
                    bag_case(g, f"bag_{mode}_deterministic_{tag}", dtype, it, gen, "offsets", V, D, mode,
                             ext={"deterministic": True}, padding_idx=0)
                for layout in ["offsets", "fixed"]:
                    bag_case(g, f"bag_sum_psw_{layout}_{tag}", dtype, it, gen, layout, V, D, "sum", psw=True)
                bag_case(g, f"bag_sum_psw_padding_{tag}", dtype, it, gen, "offsets", V, D, "sum", psw=True,
                         padding_idx=4)
                bag_case(g, f"bag_sum_psw_freq_{tag}", dtype, it, gen, "equal_counts", V, D, "sum", psw=True,
                         scale_grad_by_freq=True)


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)
