# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of fused_linear_cross_entropy in the kloss-golden/1 schema.
The op is in no torch release: the reference is the composition
cross_entropy(input @ weight.T + bias, target, weight=ce_weight, ...) in
float64 (with the kloss extensions z_loss / softcap composed as in
gen_cross_entropy.py), gradients by autograd. float32 and float64 with
both index dtypes, float16 and bfloat16 with int64 indices, class-probability
targets [N, V] (kloss's extension of the schema's fused op, differentiable
as torch differentiates cross_entropy's probabilities; these cases do not
run vocabulary-parallel) in every dtype, every reduction, every option;
N not a multiple of any chunk.

Run:  cd tools/golden && /usr/bin/python3 -c "import gen_fused_linear as g; g.main('../../data/golden')"
"""
import os

import torch

from gen_cross_entropy import LAYOUT, _ce_reference
from golden_writer import ce_options, DEFAULT_OUT_DIR, golden_file, rounded, tolerances


def main(out_dir):
    gen = torch.Generator().manual_seed(4321)
    sets = [
        # name, N, D, V, bias, ce_weight, ignore_frac, smoothing, z_loss, softcap, probability targets
        ("plain", 7, 5, 11, False, False, 0.0, 0.0, 0.0, 0.0, False),
        ("bias_ignore", 9, 4, 13, True, False, 0.3, 0.0, 0.0, 0.0, False),
        ("ce_weight_smooth", 6, 6, 9, True, True, 0.2, 0.1, 0.0, 0.0, False),
        ("z_loss_softcap", 5, 3, 17, True, True, 0.2, 0.05, 1e-2, 2.5, False),
        ("probs", 7, 5, 11, True, False, 0.0, 0.0, 0.0, 0.0, True),
        ("probs_weight_smooth_zl_cap", 6, 4, 13, True, True, 0.0, 0.1, 1e-2, 2.5, True),
    ]
    with golden_file(out_dir, "fused_linear.h5", **LAYOUT) as g:
        for (name, n, d, v, has_b, has_cw, ifrac, eps, zl, cap, probs) in sets:
            for dtype in ["float32", "float64", "float16", "bfloat16"]:
                idts = ["int64"] if probs or dtype in ("float16", "bfloat16") else ["int64", "int32"]
                for idt in idts:
                    for red in ["none", "mean", "sum"]:
                        x = rounded(torch.randn(n, d, generator=gen, dtype=torch.float64), dtype).requires_grad_(True)
                        w = rounded(torch.randn(v, d, generator=gen, dtype=torch.float64) * 0.7,
                                    dtype).requires_grad_(True)
                        b = (rounded(torch.randn(v, generator=gen, dtype=torch.float64) * 0.3,
                                     dtype).requires_grad_(True) if has_b else None)
                        cw = rounded(torch.rand(v, generator=gen, dtype=torch.float64) + 0.25, dtype) if has_cw else None
                        if probs:  # rows of a distribution with exact zeros, one one-hot row
                            p = torch.rand(n, v, generator=gen, dtype=torch.float64)
                            p[p < 0.3] = 0
                            p[1] = 0
                            p[1, 2] = 1
                            t = rounded(p / p.sum(dim=1, keepdim=True), dtype).requires_grad_(True)
                        else:
                            t = torch.randint(0, v, (n,), generator=gen)
                            if ifrac:
                                mask = torch.rand(n, generator=gen) < ifrac
                                mask[0] = True
                                t[mask] = -100
                        z = x @ w.T + (b if b is not None else 0)
                        out = _ce_reference(z, t, cw, red, -100, eps, zl, cap, probs)
                        go = rounded(torch.rand(out.shape, generator=gen, dtype=torch.float64) + 0.5, dtype)
                        wrt = [x, w] + ([b] if b is not None else []) + ([t] if probs else [])
                        gs = torch.autograd.grad(out, wrt, go)
                        inputs = {"input": x, "weight": w, "target": t}
                        grads = {"input": gs[0], "weight": gs[1]}
                        if b is not None:
                            inputs["bias"] = b
                            grads["bias"] = gs[2]
                        if probs:
                            grads["target"] = gs[-1]
                        if cw is not None:
                            inputs["ce_weight"] = cw
                        opts = {}
                        opts.update(ce_options(eps, zl, cap))
                        rtol, atol = tolerances(dtype)
                        if dtype == "float32":  # gemm accumulation order differs from torch's
                            rtol, atol = 1e-4, 1e-5
                        tag = f"{dtype}_{red}" if probs else f"{dtype}_{idt}_{red}"
                        g.add_case(f"flce_{name}_{tag}", "fused_linear_cross_entropy", dtype, inputs,
                                   out, grads=grads, grad_output=go, reduction=red, index_dtype=idt, options=opts,
                                   rtol=rtol, atol=atol)
    print(g.path, os.path.getsize(g.path), "bytes,", len(g.names), "cases")


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)
