# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Self-test golden file for kloss-validate: a handful of mse_loss cases in
every dtype and reduction, with a rank-0 input, a broadcast target, an empty
input, a forward-only case and a non-default index_dtype attribute, so that
ctest has real cases to validate from the first op on. Writes
<out_dir>/selftest.h5 (schema kloss-golden/1, docs/golden-schema.md).

Run: cd tools/golden && /usr/bin/python3 -c "import gen_selftest as g; g.main('../../data/golden')"
"""
import os

import torch
import torch.nn.functional as F

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded

REDUCTIONS = ["none", "mean", "sum"]


def _case(g, name, dtype, input_shape, target_shape, reduction, gen, backward=True, attr_reduction=True,
          index_dtype=None):
    x = rounded(torch.randn(tuple(input_shape), generator=gen, dtype=torch.float64), dtype)
    t = rounded(torch.randn(tuple(target_shape), generator=gen, dtype=torch.float64), dtype)
    x.requires_grad_(True)
    t.requires_grad_(True)
    out = F.mse_loss(x, t, reduction=reduction) if x.shape == t.shape else _broadcast_mse(x, t, reduction)
    grads = grad_output = None
    if backward:
        grad_output = rounded(torch.randn(tuple(out.shape), generator=gen, dtype=torch.float64), dtype)
        gx, gt = torch.autograd.grad(out, (x, t), grad_output)
        grads = {"input": gx, "target": gt}
    g.add_case(name, "mse_loss", dtype, {"input": x, "target": t}, out, grads=grads, grad_output=grad_output,
               reduction=reduction if attr_reduction else None, index_dtype=index_dtype)


def _broadcast_mse(x, t, reduction):
    # torch warns about (but computes) broadcasting in mse_loss; spell it out.
    d = (x - t) ** 2
    return {"none": d, "mean": d.mean(), "sum": d.sum()}[reduction]


def main(out_dir):
    gen = torch.Generator().manual_seed(20261122)
    with golden_file(out_dir, "selftest.h5") as g:
        for dtype in DTYPES:
            for red in REDUCTIONS:
                _case(g, f"mse_{dtype}_{red}_3x5", dtype, (3, 5), (3, 5), red, gen)
            _case(g, f"mse_{dtype}_mean_rank0", dtype, (), (), "mean", gen)
            _case(g, f"mse_{dtype}_none_rank0", dtype, (), (), "none", gen)
            _case(g, f"mse_{dtype}_none_broadcast_target", dtype, (4, 3), (3,), "none", gen)
            _case(g, f"mse_{dtype}_sum_broadcast_target", dtype, (2, 3, 4), (3, 1), "sum", gen)
        # torch's default reduction (absent attribute means mean)
        _case(g, "mse_float32_default_reduction", "float32", (7,), (7,), "mean", gen, attr_reduction=False)
        # forward only: no grad_output, no expected gradients
        _case(g, "mse_float64_forward_only", "float64", (2, 3), (2, 3), "sum", gen, backward=False)
        # empty input: mean is NaN as in torch, sum is 0
        _case(g, "mse_float64_mean_empty", "float64", (0, 3), (0, 3), "mean", gen)
        _case(g, "mse_float32_sum_empty", "float32", (0,), (0,), "sum", gen)
        # index_dtype is allowed on any case; mse_loss has no index input
        _case(g, "mse_float64_none_index_dtype_int32", "float64", (5,), (5,), "none", gen, index_dtype="int32")


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)


def write_fuzz_corpus(out_dir):
    """Seed corpus of the reader's fuzzer (unit_tests/fuzz/corpus): tiny
    files, each a valid golden file exercising another part of the reader
    (variable- and fixed-length strings, integer targets, the vocabulary
    slices of cross_entropy, fused_linear_cross_entropy and embedding, a
    rank-0 output, an option of each type). Values are arbitrary: only the
    reader runs on them. Run: cd tools/golden && /usr/bin/python3 -c
    "import gen_selftest as g; g.write_fuzz_corpus('../../unit_tests/fuzz/corpus')"."""
    import h5py
    import numpy as np
    os.makedirs(out_dir, exist_ok=True)

    def case(f, name, op, inputs, output, grads=None, attrs=None, fixed=False):
        g = f["cases"].create_group(name)
        strattr = (lambda k, v: g.attrs.create(k, np.bytes_(v))) if fixed else (lambda k, v: g.attrs.__setitem__(k, v))
        strattr("op", op)
        strattr("dtype", "float32")
        for k, v in (attrs or {}).items():
            if isinstance(v, str):
                strattr(k, v)
            else:
                g.attrs[k] = v
        g.attrs["rtol"] = np.float64(1e-5)
        g.attrs["atol"] = np.float64(1e-6)
        ins, ex = g.create_group("inputs"), g.create_group("expected")
        for k, v in inputs.items():
            ins.create_dataset(k, data=v)
        ex.create_dataset("output", data=np.float64(output) if np.ndim(output) == 0 else output)
        for k, v in (grads or {}).items():
            ex.create_dataset("grad_" + k, data=v)

    def new(name):
        f = h5py.File(os.path.join(out_dir, name), "w")
        f.attrs["schema"] = "kloss-golden/1"
        f.create_group("cases")
        return f

    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    with new("mse_vlen.h5") as f:
        case(f, "m", "mse_loss", {"input": a, "target": a + 1, "grad_output": np.float64(1)}, 1.0,
             grads={"input": a, "target": -a}, attrs={"reduction": "mean"})
    with new("mse_fixed_rank0.h5") as f:
        case(f, "m", "mse_loss", {"input": np.float64(2), "target": np.float64(1)}, 1.0,
             attrs={"reduction": "sum", "beta": np.float64(0.5), "p": np.int64(2), "log_target": np.bool_(True)},
             fixed=True)
    with new("cross_entropy_vocab.h5") as f:
        case(f, "ce", "cross_entropy", {"input": a, "target": np.array([2, 0], dtype=np.int64),
                                        "weight": np.ones(3), "grad_output": np.ones(2)},
             np.ones(2), grads={"input": a}, attrs={"reduction": "none", "ignore_index": np.int64(-100),
                                                    "index_dtype": "int32"})
        case(f, "ce_probs", "cross_entropy", {"input": a, "target": a / 15}, 0.5)
    with new("fused_embedding_vocab.h5") as f:
        w = np.arange(12, dtype=np.float64).reshape(4, 3)
        case(f, "fl", "fused_linear_cross_entropy",
             {"input": a, "weight": w, "bias": np.zeros(4), "ce_weight": np.ones(4),
              "target": np.array([3, 1], dtype=np.int64), "grad_output": np.float64(1)},
             2.0, grads={"input": a, "weight": w, "bias": np.zeros(4)})
        case(f, "emb", "embedding", {"input": np.array([[0, 3]], dtype=np.int64), "weight": w,
                                     "grad_output": np.ones((1, 2, 3))},
             np.ones((1, 2, 3)), grads={"weight": w}, attrs={"padding_idx": np.int64(-1)})
