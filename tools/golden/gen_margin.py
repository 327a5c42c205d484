# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the margin family (kloss-golden/1, docs/golden-schema.md):
hinge_embedding_loss, margin_ranking_loss, triplet_margin_loss,
cosine_embedding_loss, multi_margin_loss, multilabel_margin_loss,
multilabel_soft_margin_loss; every op x dtype x reduction x option, both
index dtypes where targets are class indices, odd sizes and unbatched
forms. References: torch 1.13 in float64 from inputs rounded to the case
dtype; gradients from autograd with a random grad_output.

Run: cd tools/golden && /usr/bin/python3 -c "import gen_margin as g; g.main('../../data/golden')"
"""

import torch
import torch.nn.functional as F

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances  # noqa: F401

REDUCTIONS = ["none", "mean", "sum"]


# HDF5's newest object format (compact groups and headers), small datasets
# inside their object header: the same schema at about a third of the size,
# which keeps this family's ~500 small cases near the 1 MB budget.
LAYOUT = {"libver": "latest", "compact": True}


def reds_for(i, dtype="float64"):
    """All three reductions for a family's first (default-option) config;
    for each further config two rotating ones (one for the 16-bit dtypes),
    so every option meets every reduction without multiplying the size."""
    if i == 0:
        return REDUCTIONS
    if dtype in ("float16", "bfloat16"):
        return [REDUCTIONS[i % 3]]
    return [REDUCTIONS[i % 3], REDUCTIONS[(i + 1) % 3]]


def _tol(dtype, scale=1.0):
    rtol, atol = tolerances(dtype)
    return rtol * scale, atol * scale


class Gen:
    def __init__(self, g):
        self.g = g
        self.n = 0
        self.gen = torch.Generator().manual_seed(20261122)

    def randn(self, *shape, scale=1.0):
        return torch.randn(tuple(shape), generator=self.gen, dtype=torch.float64) * scale

    def signs(self, *shape):
        return torch.randint(0, 2, shape, generator=self.gen).to(torch.float64) * 2 - 1

    def case(self, op, dtype, red, fn, floats, others=None, diff=(), options=None, index_dtype=None, tol_scale=1.0,
             name_extra=""):
        """floats: dict name -> float64 tensor (rounded here); others: dict of
        index/±1 tensors stored as is; fn(**inputs) -> output."""
        inputs = {k: rounded(v, dtype) for k, v in floats.items()}
        for k, v in (others or {}).items():
            inputs[k] = v
        leaves = {}
        call = {}
        for k, v in inputs.items():
            if k in diff:
                leaves[k] = v.clone().requires_grad_(True)
                call[k] = leaves[k]
            else:
                call[k] = v
        out = fn(**call, reduction=red)
        grads = None
        go = None
        if diff:
            go = rounded(self.randn(*out.shape, scale=1.0) * 0.5 + 1.0, dtype)
            gs = torch.autograd.grad(out, [leaves[k] for k in diff], go, allow_unused=True)
            grads = {k: (gv if gv is not None else torch.zeros_like(leaves[k])) for k, gv in zip(diff, gs)}
        rtol, atol = _tol(dtype, tol_scale)
        self.n += 1
        name = "%s_%03d_%s_%s%s" % (op, self.n, dtype, red, name_extra)
        self.g.add_case(name, op, dtype, inputs, out.detach(), grads=grads, grad_output=go, reduction=red,
                        index_dtype=index_dtype, options=options, rtol=rtol, atol=atol)


def gen_hinge(G):
    for dtype in DTYPES:
        for i, (shape, margin) in enumerate([((13,), None), ((3, 7), 0.5), ((41,), 2.0)]):
            for red in reds_for(i, dtype):
                x = G.randn(*shape, scale=1.5)
                if len(shape) == 1 and shape[0] == 13:
                    x[0] = 1.0  # exactly at the margin: torch 2.15's clamp_min passes no gradient
                t = G.signs(*shape)
                opts = {} if margin is None else {"margin": margin}
                G.case("hinge_embedding_loss", dtype, red,
                       lambda input, target, reduction: F.hinge_embedding_loss(input, target, reduction=reduction,
                                                                               **opts),
                       {"input": x}, {"target": t}, diff=("input",), options=opts)
        # target broadcast over the input's rows
        x = G.randn(4, 5)
        t = G.signs(5)
        G.case("hinge_embedding_loss", dtype, "mean",
               lambda input, target, reduction: F.hinge_embedding_loss(input, target, reduction=reduction),
               {"input": x}, {"target": t}, diff=("input",), name_extra="_bcast")


def gen_margin_ranking(G):
    for dtype in DTYPES:
        for i, (shape, margin) in enumerate([((13,), None), ((41,), 0.5), ((2, 3, 5), -0.25)]):
            for red in reds_for(i, dtype):
                x1, x2, t = G.randn(*shape), G.randn(*shape), G.signs(*shape)
                opts = {} if margin is None else {"margin": margin}
                G.case("margin_ranking_loss", dtype, red,
                       lambda input1, input2, target, reduction: F.margin_ranking_loss(
                           input1, input2, target, reduction=reduction, **opts),
                       {"input1": x1, "input2": x2}, {"target": t}, diff=("input1", "input2"), options=opts)


def gen_triplet(G):
    for dtype in DTYPES:
        scale = 1.0 if dtype in ("float32", "float64") else 2.0
        configs = [((7, 13), {}), ((13,), {"swap": True}), ((5, 9), {"p": 1.0, "margin": 0.5}),
                   ((6, 8), {"p": 3.0, "swap": True}), ((4, 11), {"p": 1.5, "eps": 1e-3, "margin": 2.0}),
                   ((3, 6), {"p": float("inf")}), ((41, 3), {"swap": True, "margin": 0.1}), ((2, 3, 5), {}),
                   ((3, 1), {"p": 2.0})]
        for i, (shape, opts) in enumerate(configs):
            for red in reds_for(i, dtype):
                a, p, n = G.randn(*shape), G.randn(*shape), G.randn(*shape)
                if opts.get("swap"):
                    # some rows where the swap distance is the smaller one
                    p = (n + 0.1 * G.randn(*shape)) if len(shape) == 1 else p
                    if len(shape) == 2:
                        p[0] = n[0] + 0.1 * G.randn(shape[1])
                G.case("triplet_margin_loss", dtype, red,
                       lambda anchor, positive, negative, reduction: F.triplet_margin_loss(
                           anchor, positive, negative, reduction=reduction, **opts),
                       {"anchor": a, "positive": p, "negative": n}, diff=("anchor", "positive", "negative"),
                       options=opts, tol_scale=scale)


def gen_cosine(G):
    for dtype in DTYPES:
        scale = 1.0 if dtype in ("float32", "float64") else 2.0
        for i, (N, D, margin) in enumerate([(7, 13, None), (13, 5, 0.3), (None, 9, None), (41, 3, -0.2)]):
            for red in reds_for(i, dtype):
                if N is None:
                    x1, x2 = G.randn(D), G.randn(D)
                    t = torch.tensor(-1.0 if red == "sum" else 1.0, dtype=torch.float64)
                else:
                    x1, x2, t = G.randn(N, D), G.randn(N, D), G.signs(N)
                opts = {} if margin is None else {"margin": margin}
                G.case("cosine_embedding_loss", dtype, red,
                       lambda input1, input2, target, reduction: F.cosine_embedding_loss(
                           input1, input2, target, reduction=reduction, **opts),
                       {"input1": x1, "input2": x2}, {"target": t}, diff=("input1", "input2"), options=opts,
                       tol_scale=scale)


def gen_cosine_zero_vector(G):
    # A zero row: torch's EPSILON keeps the loss finite (its gradient, about
    # 1e6 x, is ill-conditioned, so these cases check the forward only).
    for dtype in DTYPES:
        x1, x2, t = G.randn(3, 5), G.randn(3, 5), G.signs(3)
        x1[1] = 0.0
        G.case("cosine_embedding_loss", dtype, "none",
               lambda input1, input2, target, reduction: F.cosine_embedding_loss(input1, input2, target,
                                                                                reduction=reduction),
               {"input1": x1, "input2": x2}, {"target": t}, name_extra="_zero_row")


def gen_multi_margin(G):
    for dtype in DTYPES:
        for idt in ("int64", "int32"):
            configs = [((7, 5), {}), ((13, 9), {"p": 2}), ((6, 4), {"margin": 0.5, "weight": True}),
                       ((5, 11), {"p": 2, "margin": 2.0, "weight": True}), ((6,), {})]
            if idt == "int64":
                configs += [((41, 3), {"margin": 0.25}), ((1, 1), {})]
            for i, (shape, o) in enumerate(configs):
              for red in (reds_for(i, dtype) if idt == "int64" else [REDUCTIONS[i % 3]]):
                    x = G.randn(*shape)
                    C = shape[-1]
                    N = shape[0] if len(shape) == 2 else 1
                    tgt = torch.randint(0, C, (N,) if len(shape) == 2 else (), generator=G.gen)
                    opts = {k: v for k, v in o.items() if k != "weight"}
                    floats = {"input": x}
                    if o.get("weight"):
                        floats["weight"] = G.randn(C).abs() + 0.5

                    def fn(input, target, reduction, weight=None, opts=opts):
                        return F.multi_margin_loss(input, target, weight=weight, reduction=reduction, **opts)
                    G.case("multi_margin_loss", dtype, red, fn, floats, {"target": tgt}, diff=("input",),
                           options=opts, index_dtype=idt)


def gen_multilabel_margin(G):
    for dtype in DTYPES:
        for idt in ("int64", "int32"):
            for i, shape in enumerate([(7, 6), (13, 9), (5,), (3, 1)]):
              for red in (reds_for(i, dtype) if idt == "int64" else [REDUCTIONS[i % 3]]):
                    x = G.randn(*shape)
                    C = shape[-1]
                    rows = shape[0] if len(shape) == 2 else 1
                    tg = torch.empty(rows, C, dtype=torch.int64)
                    for r in range(rows):
                        k = int(torch.randint(0, C + 1, (), generator=G.gen))
                        labels = torch.randperm(C, generator=G.gen)[:k]
                        if k >= 2 and r == 1:
                            labels[1] = labels[0]  # a repeated label counts twice, as in torch
                        row = torch.randint(-1, C, (C,), generator=G.gen)  # garbage after the -1 (torch needs it in [-1, C))
                        row[:k] = labels
                        if k < C:
                            row[k] = -1
                        tg[r] = row
                    if len(shape) == 1:
                        tg = tg[0]
                    G.case("multilabel_margin_loss", dtype, red,
                           lambda input, target, reduction: F.multilabel_margin_loss(input, target, reduction=reduction),
                           {"input": x}, {"target": tg}, diff=("input",), index_dtype=idt)


def gen_multilabel_soft_margin(G):
    for dtype in DTYPES:
        for i, (shape, weight) in enumerate([((7, 6), False), ((13, 9), True), ((5,), False), ((2, 3, 4), True),
                                             ((41, 3), False)]):
            for red in reds_for(i, dtype):
                x = G.randn(*shape, scale=3.0)
                t = torch.randint(0, 2, shape, generator=G.gen).to(torch.float64)
                if shape == (13, 9):
                    t[0] = torch.rand(9, generator=G.gen, dtype=torch.float64)  # soft targets
                floats = {"input": x, "target": t}
                if weight:
                    floats["weight"] = G.randn(shape[-1]).abs() + 0.25

                def fn(input, target, reduction, weight=None):
                    return F.multilabel_soft_margin_loss(input, target, weight=weight, reduction=reduction)
                G.case("multilabel_soft_margin_loss", dtype, red, fn, floats, diff=("input",))
        # large |x|: log1p(exp(-|x|)) stays finite
        x = torch.tensor([[30.0, -30.0, 80.0, -80.0, 0.0]], dtype=torch.float64)
        t = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0]], dtype=torch.float64)
        G.case("multilabel_soft_margin_loss", dtype, "none",
               lambda input, target, reduction: F.multilabel_soft_margin_loss(input, target, reduction=reduction),
               {"input": x, "target": t}, diff=("input",), name_extra="_large")


def gen_any_targets(G):
    """hinge_embedding_loss and margin_ranking_loss with targets other than
    1 and -1 (0, 0.5, 2, -3): torch computes its formula there (hinge: both
    branches summed; margin_ranking: the target multiplies)."""
    for dtype in DTYPES:
        for red in ("none", "mean", "sum"):
            x = G.randn(12, scale=1.5)
            t = torch.tensor([1, -1, 0, 0.5, 2, -3] * 2, dtype=torch.float64)
            G.case("hinge_embedding_loss", dtype, red,
                   lambda input, target, reduction: F.hinge_embedding_loss(input, target, reduction=reduction,
                                                                           margin=0.5),
                   {"input": x}, {"target": t}, diff=("input",), options={"margin": 0.5}, name_extra="_anytarget")
            x1, x2 = G.randn(12), G.randn(12)
            G.case("margin_ranking_loss", dtype, red,
                   lambda input1, input2, target, reduction: F.margin_ranking_loss(
                       input1, input2, target, reduction=reduction, margin=0.25),
                   {"input1": x1, "input2": x2}, {"target": t}, diff=("input1", "input2"), options={"margin": 0.25},
                   name_extra="_anytarget")


def main(out_dir):
    with golden_file(out_dir, "margin.h5", **LAYOUT) as g:
        G = Gen(g)
        # (generators added later come last, so the cases before keep their values)
        for ops in (gen_hinge, gen_margin_ranking, gen_triplet, gen_cosine, gen_cosine_zero_vector, gen_multi_margin,
                    gen_multilabel_margin, gen_multilabel_soft_margin, gen_any_targets):
            ops(G)
        print("margin.h5:", G.n, "cases")


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)
