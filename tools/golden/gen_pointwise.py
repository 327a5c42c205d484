# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the element-wise losses (kloss/pointwise.hpp):
mse_loss, l1_loss, smooth_l1_loss, huber_loss, soft_margin_loss, binary_cross_entropy,
binary_cross_entropy_with_logits, kl_div, poisson_nll_loss,
gaussian_nll_loss, quantile_loss, crps_gaussian - every op x dtype x reduction x option, with broadcast
arguments and the edge cases (beta = 0, probabilities 0 and 1 in BCE,
logits of magnitude 1e4, zero and log targets in kl_div, Stirling's term,
clamped var); crps_gaussian with kloss's weights and masks, and
binary_cross_entropy(_with_logits) with kloss's masks (docs/weights.md;
add_crps_gaussian_masked, add_bce_masked). References from PyTorch 2.15 in float64 on inputs rounded to the
case dtype; gradients from autograd with a random grad_output, the
target's too where torch differentiates it (binary_cross_entropy(_with_logits),
kl_div, poisson_nll_loss, gaussian_nll_loss).

  cd tools/golden && /usr/bin/python3 -c "import gen_pointwise as g; g.main('../../data/golden')"
"""
import math
import os
import warnings

import torch
import torch.nn.functional as F

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances

warnings.simplefilter("ignore")  # torch warns about broadcasting and kl_div's 'mean'

REDUCTIONS = ["none", "mean", "sum"]


def rot(k, di):
    """The reduction of the k-th variant for the di-th dtype: variants that
    do not take every reduction rotate through them across dtypes, so each
    op x option x broadcast meets every reduction and every dtype (pairwise
    coverage keeps the file under 1 MB)."""
    return REDUCTIONS[(k + di) % 3]


def uniform(gen, shape, lo, hi):
    return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)


# HDF5's newest format for the installed library (1.10): groups store
# their links in the object header, about 4x smaller for hundreds of small
# cases. Same layout and schema.
LAYOUT = {"libver": "latest"}


class Writer:
    def __init__(self, g, gen):
        self.g = g
        self.gen = gen
        self.count = 0

    def case(self, name, op, dtype, inputs, diff, call, reduction, options=None, grads=True, atol_scale=1.0):
        """inputs: name -> float64 tensor (rounded here); diff: differentiable
        input names; call(**tensors) -> loss. atol: the dtype's, raised to
        rtol x the largest magnitude of the case's results x atol_scale
        (sums and cancellations, e.g. e^x - y x + Stirling, err relative to
        the terms' scale, not to the element's value)."""
        ins = {k: rounded(v, dtype) for k, v in inputs.items()}
        leaves = {k: v.clone().requires_grad_(k in diff) for k, v in ins.items()}
        out = call(**leaves)
        expected_grads = None
        go = None
        if grads:
            go = rounded(uniform(self.gen, out.shape, 0.5, 1.5), dtype)
            gs = torch.autograd.grad(out, [leaves[k] for k in diff], go)
            expected_grads = dict(zip(diff, gs))
        rtol, atol = tolerances(dtype)
        mags = [out.detach().abs()] + ([g.abs() for g in expected_grads.values()] if grads else [])
        finite = [m[torch.isfinite(m)] for m in mags]
        big = max([float(m.max()) if m.numel() else 0.0 for m in finite] + [1.0])
        atol = max(atol, rtol * big * atol_scale)
        self.g.add_case("%s_%s_%s" % (op, name, dtype), op, dtype, ins, out.detach(),
                        grads=expected_grads, grad_output=go, reduction=reduction, options=options,
                        rtol=rtol, atol=atol)
        self.count += 1


def main(out_dir):
    gen = torch.Generator().manual_seed(20261122)
    with golden_file(out_dir, "pointwise.h5", **LAYOUT) as g:
        w = Writer(g, gen)
        for di, dtype in enumerate(DTYPES):
            add_regression(w, gen, dtype, di)
            add_bce(w, gen, dtype, di)
            add_bce_logits(w, gen, dtype, di)
            add_kl_div(w, gen, dtype, di)
            add_poisson(w, gen, dtype, di)
            add_gaussian(w, gen, dtype, di)
        # Ops added later draw from their own generator, so the cases above
        # keep their values: one seed per family of cases, in the order added.
        later = [(20261125, add_soft_margin), (20261201, add_gaussian_var_dims), (20261202, add_gaussian_beta),
                 (20261203, add_weighted), (20261204, add_quantile), (20261205, add_crps_gaussian),
                 (20261206, add_quantiles), (20261207, add_crps_gaussian_masked), (20261208, add_bce_masked)]
        for seed, add in later:
            w.gen = torch.Generator().manual_seed(seed)
            for di, dtype in enumerate(DTYPES):
                add(w, w.gen, dtype, di)
    print("wrote %d cases to %s (%d bytes)" % (w.count, g.path, os.path.getsize(g.path)))


def add_regression(w, gen, dtype, di):
    """mse / l1 / smooth_l1 / huber: same shape, broadcast both ways, rank 0,
    ties (input == target) and beta = 0."""
    x = uniform(gen, (3, 5), -3, 3)
    y = uniform(gen, (3, 5), -3, 3)
    xb = uniform(gen, (3, 1, 4), -3, 3)
    yb = uniform(gen, (5, 1), -3, 3)
    ops = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 1.0}), ("smooth_l1_loss", {"beta": 0.5}),
           ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {"delta": 1.0}), ("huber_loss", {"delta": 2.5})]
    for k, (op, opts) in enumerate(ops):
        fn = getattr(F, op)
        tag = "_".join("%s%g" % kv for kv in opts.items())
        for red in REDUCTIONS:
            call = lambda input, target, red=red: fn(input, target, reduction=red, **opts)
            w.case("same_%s_%s" % (tag, red), op, dtype, {"input": x, "target": y}, ["input", "target"], call, red, opts)
            if red == rot(k, di):
                w.case("bcast_%s_%s" % (tag, red), op, dtype, {"input": xb, "target": yb}, ["input", "target"], call,
                       red, opts)
        # ties: input == target in places (gradient conventions at 0 and at +-beta)
        xt = torch.tensor([[0.0, 1.0, -1.0, 0.5, 2.0], [0.25, -0.5, 3.0, 0.0, -2.0]], dtype=torch.float64)
        yt = torch.tensor([[0.0, 0.0, 0.0, 0.5, 1.0], [0.25, 0.5, 0.0, 1.0, -1.0]], dtype=torch.float64)
        call = lambda input, target: fn(input, target, reduction="none", **opts)
        w.case("ties_%s" % tag, op, dtype, {"input": xt, "target": yt}, ["input", "target"], call, "none", opts)
    # rank-0 input and target
    for op in ("mse_loss", "huber_loss"):
        fn = getattr(F, op)
        w.case("rank0", op, dtype, {"input": torch.tensor(1.75, dtype=torch.float64),
                                    "target": torch.tensor(-0.5, dtype=torch.float64)},
               ["input", "target"], lambda input, target: fn(input, target, reduction="sum"), "sum")


def add_bce(w, gen, dtype, di):
    x = uniform(gen, (3, 5), 0.02, 0.98)
    y = uniform(gen, (3, 5), 0, 1)
    wc = uniform(gen, (5,), 0.5, 2)
    wr = uniform(gen, (3, 1), 0.5, 2)
    for red in REDUCTIONS:
        w.case("plain_" + red, "binary_cross_entropy", dtype, {"input": x, "target": y}, ["input", "target"],
               lambda input, target, red=red: F.binary_cross_entropy(input, target, reduction=red), red)
        for k, (wn, wt) in enumerate((("wclass", wc), ("wrow", wr))):
            if k == 1 and red != rot(0, di):
                continue
            w.case("%s_%s" % (wn, red), "binary_cross_entropy", dtype, {"input": x, "target": y, "weight": wt},
                   ["input", "target"],
                   lambda input, target, weight, red=red: F.binary_cross_entropy(input, target, weight,
                                                                                 reduction=red), red)
    # probabilities exactly 0 and 1: logs clamped at -100; gradient
    # (x - y) / max(x (1 - x), 1e-12) is +-1e12 where x is 0 or 1 and y is
    # not - beyond float16's range, so float16 checks the forward only.
    xe = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5, 0.0, 1.0], dtype=torch.float64)
    ye = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.25], dtype=torch.float64)
    for red in ("none", rot(1, di) if rot(1, di) != "none" else "sum"):
        w.case("zero_one_" + red, "binary_cross_entropy", dtype, {"input": xe, "target": ye}, ["input", "target"],
               lambda input, target, red=red: F.binary_cross_entropy(input, target, reduction=red), red,
               grads=dtype != "float16", atol_scale=0.0)  # gradients of 1e12 must not loosen the forward


def add_bce_logits(w, gen, dtype, di):
    x = uniform(gen, (3, 5), -6, 6)
    y = uniform(gen, (3, 5), 0, 1)
    wc = uniform(gen, (5,), 0.5, 2)
    pw = uniform(gen, (5,), 0.5, 3)
    wr = uniform(gen, (3, 1), 0.5, 2)
    op = "binary_cross_entropy_with_logits"
    for red in REDUCTIONS:
        for k, (tag, extra) in enumerate((("plain", {}), ("weight", {"weight": wc}), ("posw", {"pos_weight": pw}),
                                          ("both", {"weight": wr, "pos_weight": pw}))):
            if k > 0 and red != rot(k, di):
                continue
            ins = dict({"input": x, "target": y}, **extra)
            w.case("%s_%s" % (tag, red), op, dtype, ins, ["input", "target"],
                   lambda red=red, **t: F.binary_cross_entropy_with_logits(t["input"], t["target"], t.get("weight"),
                                                                          reduction=red,
                                                                          pos_weight=t.get("pos_weight")), red)
    # |x| ~ 1e4: the stable form gives (1 - y) x + max(-x, 0) exactly.
    xe = torch.tensor([[1e4, -1e4, 1e4, -1e4, 30.0], [-30.0, 9999.0, -9999.0, 0.0, 1e4]], dtype=torch.float64)
    ye = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.25], [0.75, 0.5, 0.5, 1.0, 0.0]], dtype=torch.float64)
    pe = torch.tensor([2.0, 0.5, 3.0, 1.0, 4.0], dtype=torch.float64)
    for red in REDUCTIONS:
        if red not in ("none", rot(2, di)):
            continue
        w.case("huge_" + red, op, dtype, {"input": xe, "target": ye}, ["input", "target"],
               lambda input, target, red=red: F.binary_cross_entropy_with_logits(input, target, reduction=red), red)
        w.case("huge_posw_" + red, op, dtype, {"input": xe, "target": ye, "pos_weight": pe}, ["input", "target"],
               lambda input, target, pos_weight, red=red: F.binary_cross_entropy_with_logits(
                   input, target, reduction=red, pos_weight=pos_weight), red)


def add_kl_div(w, gen, dtype, di):
    x = torch.log_softmax(uniform(gen, (3, 5), -2, 2), dim=1)
    p = torch.softmax(uniform(gen, (3, 5), -2, 2), dim=1)
    p[0, 1] = 0.0  # xlogy(0, 0) = 0
    p[2, 4] = 0.0
    lp = torch.log_softmax(uniform(gen, (3, 5), -2, 2), dim=1)
    pb = torch.softmax(uniform(gen, (5,), -2, 2), dim=0)
    for red in REDUCTIONS + ["batchmean"]:
        for lt, tgt in ((False, p), (True, lp)):
            w.case("lt%d_%s" % (lt, red), "kl_div", dtype, {"input": x, "target": tgt}, ["input", "target"],
                   lambda input, target, red=red, lt=lt: F.kl_div(input, target, reduction=red, log_target=lt), red,
                   {"log_target": lt})
        if red != (REDUCTIONS + ["batchmean"])[di]:
            continue
        w.case("bcast_" + red, "kl_div", dtype, {"input": x, "target": pb}, ["input", "target"],
               lambda input, target, red=red: F.kl_div(input, target, reduction=red), red)
    w.case("rank0_batchmean", "kl_div", dtype, {"input": torch.tensor(-1.25, dtype=torch.float64),
                                                 "target": torch.tensor(0.5, dtype=torch.float64)}, ["input", "target"],
           lambda input, target: F.kl_div(input, target, reduction="batchmean"), "batchmean")


def add_poisson(w, gen, dtype, di):
    xl = uniform(gen, (2, 7), -2, 2)
    xr = uniform(gen, (2, 7), 0.1, 4)
    y = torch.tensor([[0, 1, 2, 3, 5, 8, 13], [1.5, 0, 4, 2, 1, 6, 0.5]], dtype=torch.float64)
    yb = torch.tensor([0, 1, 2, 3, 5, 8, 13], dtype=torch.float64)
    for red in REDUCTIONS:
        for log_input in (True, False):
            for full in (False, True):
                if red != "none" and red != rot(2 * log_input + full, di):
                    continue
                xs = xl if log_input else xr
                opts = {"log_input": log_input, "full": full}
                if not log_input:
                    opts["eps"] = 0.01 if full else 1e-8
                w.case("li%d_full%d_%s" % (log_input, full, red), "poisson_nll_loss", dtype,
                       {"input": xs, "target": y}, ["input", "target"],
                       lambda input, target, red=red, o=dict(opts): F.poisson_nll_loss(input, target, reduction=red,
                                                                                       **o), red, opts)
        if red != rot(0, di):
            continue
        w.case("bcast_full_" + red, "poisson_nll_loss", dtype, {"input": xl, "target": yb}, ["input", "target"],
               lambda input, target, red=red: F.poisson_nll_loss(input, target, full=True, reduction=red), red,
               {"full": True})


def add_gaussian(w, gen, dtype, di):
    x = uniform(gen, (3, 4), -2, 2)
    y = uniform(gen, (3, 4), -2, 2)
    yb = uniform(gen, (4,), -2, 2)
    vs = uniform(gen, (3, 4), 0.25, 2)
    v1 = uniform(gen, (3,), 0.25, 2)
    v31 = uniform(gen, (3, 1), 0.25, 2)
    op = "gaussian_nll_loss"
    for red in REDUCTIONS:
        for full in (False, True):
            for k, (tag, var) in enumerate((("same", vs), ("fewer", v1), ("last1", v31))):
                if red != rot(k + 3 * full, di):
                    continue
                w.case("%s_full%d_%s" % (tag, full, red), op, dtype, {"input": x, "target": y, "var": var},
                       ["input", "target", "var"],
                       lambda input, target, var, red=red, full=full: F.gaussian_nll_loss(
                           input, target, var, full=full, reduction=red), red, {"full": full})
        if red != rot(1, di):
            continue
        w.case("bcast_target_" + red, op, dtype, {"input": x, "target": yb, "var": vs}, ["input", "target", "var"],
               lambda input, target, var, red=red: F.gaussian_nll_loss(input, target, var, reduction=red), red)
        # var 0 and below eps: clamped forward, gradient still flows (torch
        # clamps under no_grad). eps 0.01 keeps 1/eps^2 in range for 16-bit.
        vz = torch.tensor([[0.0, 0.001, 0.5, 1.0], [0.005, 2.0, 0.0, 0.25], [1.5, 0.0, 0.02, 0.75]],
                          dtype=torch.float64)
        w.case("clamped_" + red, op, dtype, {"input": x * 0.1, "target": y * 0.1, "var": vz}, ["input", "target", "var"],
               lambda input, target, var, red=red: F.gaussian_nll_loss(input, target, var, eps=0.01, reduction=red),
               red, {"eps": 0.01})


def add_gaussian_var_dims(w, gen, dtype, di):
    """gaussian_nll_loss's var with one dimension 1 other than the last
    (torch accepts one mismatched dimension of size 1 anywhere): [1, D]
    against [N, D], [N, 1, H] against [N, C, H]."""
    op = "gaussian_nll_loss"
    x = uniform(gen, (3, 4), -2, 2)
    y = uniform(gen, (3, 4), -2, 2)
    v14 = uniform(gen, (1, 4), 0.25, 2)
    x3 = uniform(gen, (2, 3, 4), -2, 2)
    y3 = uniform(gen, (2, 3, 4), -2, 2)
    v214 = uniform(gen, (2, 1, 4), 0.25, 2)
    for red in REDUCTIONS:
        w.case("var_first1_" + red, op, dtype, {"input": x, "target": y, "var": v14}, ["input", "target", "var"],
               lambda input, target, var, red=red: F.gaussian_nll_loss(input, target, var, reduction=red), red)
        w.case("var_middle1_" + red, op, dtype, {"input": x3, "target": y3, "var": v214}, ["input", "target", "var"],
               lambda input, target, var, red=red: F.gaussian_nll_loss(input, target, var, reduction=red), red)


def _gluonts_beta_nll(input, target, var, beta, full, reduction):
    """beta-NLL by gluonts (an independent implementation, PyPI `gluonts`):
    NormalOutput(beta).loss, -log N(target; input, sqrt(var)) times
    var.detach()^beta, element-wise (with log(2 pi) / 2, as gluonts'
    log_prob; `full` False takes that constant's share back out), reduced as
    torch's losses reduce."""
    from gluonts.torch.distributions import NormalOutput
    nll = NormalOutput(beta=beta).loss(target, (input, var.sqrt()))
    if not full:
        nll = nll - 0.5 * math.log(2 * math.pi) * var.detach() ** beta
    if reduction == "mean":
        return nll.mean()
    if reduction == "sum":
        return nll.sum()
    return nll


def add_gaussian_beta(w, gen, dtype, di):
    """gaussian_nll_loss with beta (beta-NLL, Seitzer et al. 2022): the
    element's loss times var^beta, the factor detached; gluonts'
    NormalOutput(beta) the reference. var above eps (gluonts has no clamp),
    var of input's shape and without its last dimension."""
    op = "gaussian_nll_loss"
    x = uniform(gen, (3, 4), -2, 2)
    y = uniform(gen, (3, 4), -2, 2)
    vs = uniform(gen, (3, 4), 0.25, 2)
    v1 = uniform(gen, (3,), 0.25, 2)
    for red in REDUCTIONS:
        for beta, full, tag, var in ((0.5, True, "same", vs), (1.0, False, "same", vs), (0.25, True, "fewer", v1)):
            if tag == "fewer":
                call = (lambda input, target, var, red=red, beta=beta, full=full:
                        _gluonts_beta_nll(input, target, var[:, None].expand_as(input), beta, full, red))
            else:
                call = (lambda input, target, var, red=red, beta=beta, full=full:
                        _gluonts_beta_nll(input, target, var, beta, full, red))
            w.case("beta%g_%s_full%d_%s" % (beta, tag, full, red), op, dtype, {"input": x, "target": y, "var": var},
                   ["input", "target", "var"], call, red, {"full": full, "beta": beta})


def add_weighted(w, gen, dtype, di):
    """PyTorch 2.15's `weight=` on mse_loss, l1_loss and huber_loss: weight
    of the input's size; `mean` divides by the sum of the weights (mse, l1)
    or by the element count (huber); with a target that broadcasts the
    input, the weight broadcasts as the input does (and mse / l1's mean
    still divides by the weight's own sum, as torch's). Gradients w.r.t.
    input, target and weight."""
    x = uniform(gen, (3, 4), -2, 2)
    y = uniform(gen, (3, 4), -2, 2)
    wt = uniform(gen, (3, 4), 0, 2)
    wt[0, 1] = 0.0  # a masked element
    xs = uniform(gen, (4,), -2, 2)
    ws = uniform(gen, (4,), 0.25, 2)
    calls = {"mse_loss": lambda red: (lambda input, target, weight: F.mse_loss(input, target, reduction=red,
                                                                               weight=weight)),
             "l1_loss": lambda red: (lambda input, target, weight: F.l1_loss(input, target, reduction=red,
                                                                             weight=weight)),
             "huber_loss": lambda red: (lambda input, target, weight: F.huber_loss(input, target, reduction=red,
                                                                                   delta=0.75, weight=weight))}
    for op, make in calls.items():
        opts = {"delta": 0.75} if op == "huber_loss" else None
        for red in REDUCTIONS:
            w.case("weight_" + red, op, dtype, {"input": x, "target": y, "weight": wt}, ["input", "target", "weight"],
                   make(red), red, opts)
            w.case("weight_bcast_input_" + red, op, dtype, {"input": xs, "target": y, "weight": ws},
                   ["input", "target", "weight"], make(red), red, opts)


def add_soft_margin(w, gen, dtype, di):
    """soft_margin_loss: +-1 targets, a target broadcast over rows and
    non-sign targets (torch checks none)."""
    x = uniform(gen, (3, 5), -4, 4)
    y = torch.where(uniform(gen, (3, 5), 0, 1) < 0.5, -1.0, 1.0).to(torch.float64)
    yb = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.5], dtype=torch.float64)
    op = "soft_margin_loss"
    for red in REDUCTIONS:
        w.case("signs_" + red, op, dtype, {"input": x, "target": y}, ["input"],
               lambda input, target, red=red: F.soft_margin_loss(input, target, reduction=red), red)
        if red == rot(0, di):
            w.case("bcast_" + red, op, dtype, {"input": x, "target": yb}, ["input"],
                   lambda input, target, red=red: F.soft_margin_loss(input, target, reduction=red), red)


def pinball(input, target, quantile, reduction):
    """The pinball loss as neuraloperator's PointwiseQuantileLoss writes it
    (torch.max of the two branches: at a tie autograd splits the gradient,
    q - 1/2)."""
    d = target - input
    loss = torch.max(quantile * d, (quantile - 1) * d)
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def check_pinball(input, target, quantile, reduction, out):
    """The value against scikit-learn's mean_pinball_loss (an independent
    implementation): per element for none, the mean (times the count for
    sum) otherwise."""
    from sklearn.metrics import mean_pinball_loss
    import numpy as np
    x, y = torch.broadcast_tensors(input.detach(), target.detach())
    xs, ys = x.reshape(-1).numpy(), y.reshape(-1).numpy()
    if reduction == "none":
        want = np.array([mean_pinball_loss([b], [a], alpha=quantile) for a, b in zip(xs, ys)]).reshape(x.shape)
    else:
        want = mean_pinball_loss(ys, xs, alpha=quantile) * (xs.size if reduction == "sum" else 1)
    got = out.detach().numpy()
    assert np.allclose(got, want, rtol=1e-12, atol=1e-14), (got, want)


def add_quantile(w, gen, dtype, di):
    """quantile_loss (pinball): quantiles 0.1 / 0.5 / 0.9 / 0.975, same shape,
    several predictions against one target (broadcast), ties (the gradient's
    tie convention), rank 0. Values checked against scikit-learn's
    mean_pinball_loss; gradients from autograd of neuraloperator's form."""
    x = uniform(gen, (3, 5), -3, 3)
    y = uniform(gen, (3, 5), -3, 3)
    xb = uniform(gen, (4, 3), -3, 3)
    yb = uniform(gen, (4, 1), -3, 3)
    xt = torch.tensor([[0.0, 1.0, -1.0, 0.5], [2.0, -0.5, 3.0, 0.0]], dtype=torch.float64)
    yt = torch.tensor([[0.0, 0.0, 1.0, 0.5], [1.0, -0.5, 0.0, 1.0]], dtype=torch.float64)
    op = "quantile_loss"
    for k, q in enumerate((0.1, 0.5, 0.9, 0.975)):
        opts = {"quantile": q}
        for red in REDUCTIONS:
            def call(input, target, red=red, q=q):
                out = pinball(input, target, q, red)
                check_pinball(rounded(input.detach(), dtype), rounded(target.detach(), dtype), q, red, out)
                return out
            w.case("same_q%g_%s" % (q, red), op, dtype, {"input": x, "target": y}, ["input", "target"], call, red,
                   opts)
            if red == rot(k, di):
                w.case("bcast_q%g_%s" % (q, red), op, dtype, {"input": xb, "target": yb}, ["input", "target"], call,
                       red, opts)
        call = lambda input, target, q=q: pinball(input, target, q, "none")
        w.case("ties_q%g" % q, op, dtype, {"input": xt, "target": yt}, ["input", "target"], call, "none", opts)
    w.case("rank0", op, dtype, {"input": torch.tensor(1.75, dtype=torch.float64),
                                "target": torch.tensor(-0.5, dtype=torch.float64)},
           ["input", "target"], lambda input, target: pinball(input, target, 0.25, "sum"), "sum", {"quantile": 0.25})


def check_pinball_columns(input, target, quantiles, reduction, out):
    """A call with a quantile per element against scikit-learn's
    mean_pinball_loss, one call per quantile column (the elements that
    share a q): per element for none; for mean, the mean over the columns
    of their mean_pinball_loss (the columns are equal-sized, so this is
    the mean over the broadcast shape); for sum, each column's times its
    size."""
    from sklearn.metrics import mean_pinball_loss
    import numpy as np
    x, y, q = (t.detach().numpy() for t in torch.broadcast_tensors(input, target, quantiles))
    got = out.detach().numpy()
    if reduction == "none":
        want = np.array([mean_pinball_loss([b], [a], alpha=float(c)) for a, b, c in
                         zip(x.reshape(-1), y.reshape(-1), q.reshape(-1))]).reshape(x.shape)
    else:
        columns = [q == v for v in np.unique(q)]
        sizes = {int(m.sum()) for m in columns}
        assert len(sizes) == 1, "quantile columns of unequal size"
        per = np.array([mean_pinball_loss(y[m], x[m], alpha=float(q[m][0])) for m in columns])
        want = per.mean() if reduction == "mean" else (per * sizes.pop()).sum()
    assert np.allclose(got, want, rtol=1e-12, atol=1e-14), (got, want)


def pinball_quantiles(input, target, quantiles, reduction):
    """pinball() with a quantile per element: torch.max of the two branches,
    input, target and quantiles broadcast together; mean over the broadcast
    shape."""
    d = target - input
    loss = torch.max(quantiles * d, (quantiles - 1) * d)
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def add_quantiles(w, gen, dtype, di):
    """quantile_loss with the `quantiles` input (a quantile per element,
    broadcast): the quantile axis last (input [N, Q], target [N, 1],
    quantiles [Q]), in the middle ([B, Q, N] against target [B, 1, N] and
    quantiles [Q, 1]), and one prediction per row scored at several
    quantiles (input and target [N, 1], quantiles [Q]: the input's gradient
    summed over them) with ties; each layout meets every reduction across
    the dtypes. Values from autograd's torch.max form, checked against
    scikit-learn's mean_pinball_loss per quantile column."""
    op = "quantile_loss"
    q_last = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    q_mid = torch.tensor([[0.05], [0.5], [0.95]], dtype=torch.float64)
    q_wide = torch.tensor([0.1, 0.25, 0.75, 0.9], dtype=torch.float64)
    xw = uniform(gen, (5, 1), -3, 3)
    yw = uniform(gen, (5, 1), -3, 3)
    yw[1], yw[3] = xw[1], xw[3]  # ties: the gradient's 1/2 - q
    layouts = [("last", {"input": uniform(gen, (6, 3), -3, 3), "target": uniform(gen, (6, 1), -3, 3),
                         "quantiles": q_last}),
               ("middle", {"input": uniform(gen, (2, 3, 4), -3, 3), "target": uniform(gen, (2, 1, 4), -3, 3),
                           "quantiles": q_mid}),
               ("wide_ties", {"input": xw, "target": yw, "quantiles": q_wide})]
    for k, (name, inputs) in enumerate(layouts):
        red = rot(k, di)

        def call(input, target, quantiles, red=red):
            out = pinball_quantiles(input, target, quantiles, red)
            check_pinball_columns(input, target, quantiles, red, out)
            return out
        w.case("quantiles_%s_%s" % (name, red), op, dtype, inputs, ["input", "target"], call, red)


def crps_normal(input, target, std, reduction):
    """The closed form as PhysicsNeMo writes it on torch (float64 constants),
    for autograd's gradients; its values are checked against scoringrules'
    crps_normal (numpy backend: its torch backend rounds 1/sqrt(pi) to
    float32) and properscoring's crps_gaussian."""
    z = (target - input) / std
    pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2)))
    loss = std * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def add_crps_gaussian(w, gen, dtype, di):
    """crps_gaussian: same shapes, one std per column and one observation per
    row (broadcast), an observation at the mean (z = 0), far in the tails
    (|z| ~ 30: the score is |y - mu| less sigma / sqrt(pi)), narrow stds.
    Values checked against scoringrules and properscoring; gradients from
    autograd (float64)."""
    import numpy as np
    import properscoring
    import scoringrules
    x = uniform(gen, (3, 5), -2, 2)
    y = uniform(gen, (3, 5), -2, 2)
    s = uniform(gen, (3, 5), 0.2, 2)
    xb = uniform(gen, (4, 3), -2, 2)
    yb = uniform(gen, (4, 1), -2, 2)
    sb = uniform(gen, (3,), 0.3, 1.5)
    xe = torch.tensor([0.0, 1.0, -2.0, 0.5, 3.0, 0.0], dtype=torch.float64)
    ye = torch.tensor([0.0, 31.0, -2.0, -29.5, 3.5, 1e-3], dtype=torch.float64)
    se = torch.tensor([1.0, 1.0, 0.01, 1.0, 0.125, 4.0], dtype=torch.float64)
    op = "crps_gaussian"

    def call(red):
        def f(input, target, std):
            out = crps_normal(input, target, std, red)
            xx, yy, ss = (t.detach().numpy() for t in torch.broadcast_tensors(input, target, std))
            for want in (scoringrules.crps_normal(yy, xx, ss, backend="numpy"),
                         properscoring.crps_gaussian(yy, mu=xx, sig=ss)):
                want = {"none": want, "mean": want.mean(), "sum": want.sum()}[red]
                assert np.allclose(out.detach().numpy(), want, rtol=1e-12, atol=1e-14), (out, want)
            return out
        return f
    for k, red in enumerate(REDUCTIONS):
        w.case("same_" + red, op, dtype, {"input": x, "target": y, "std": s}, ["input", "target", "std"], call(red),
               red)
        if red == rot(k, di):
            w.case("bcast_" + red, op, dtype, {"input": xb, "target": yb, "std": sb}, ["input", "target", "std"],
                   call(red), red)
    w.case("edges", op, dtype, {"input": xe, "target": ye, "std": se}, ["input", "target", "std"], call("none"),
           "none")



def masked_crps_normal(input, target, std, weight, mask, nonfinite, reduction):
    """crps_gaussian with kloss's weights and masks (docs/weights.md), over
    the elements of the broadcast of input, target and std: an element
    counts where mask (broadcast) is nonzero and, with `nonfinite`, its
    target is finite; a counted element's term is weight x score, another's
    exactly 0; mean = the terms' sum over the counted elements' weights
    (0 / 0 = NaN where nothing counts). The score is crps_normal's torch
    closed form; torch.where before it (an uncounted target becomes 0, an
    uncounted weight 1) and after it (the terms) keeps NaN and infinite
    targets and weights out of the value and of autograd's gradients."""
    shape = torch.broadcast_shapes(input.shape, target.shape, std.shape)
    counted = torch.ones(shape, dtype=torch.bool)
    if mask is not None:
        counted = counted & (mask != 0).expand(shape)
    if nonfinite:
        counted = counted & torch.isfinite(target).expand(shape)
    target_safe = torch.where(counted, target, torch.zeros_like(target))
    score = crps_normal(input, target_safe, std, "none")
    w = torch.ones((), dtype=torch.float64) if weight is None else weight
    w_safe = torch.where(counted, w, torch.ones_like(w))
    terms = torch.where(counted, w_safe * score, torch.zeros_like(score))
    if reduction == "none":
        return terms, counted
    if reduction == "sum":
        return terms.sum(), counted
    return terms.sum() / torch.where(counted, w_safe, torch.zeros_like(w_safe)).sum(), counted


def check_masked_crps_normal(input, target, std, weight, counted, reduction, out):
    """The value against weights.md's definition evaluated in numpy on
    scoringrules' crps_normal (numpy backend) and properscoring's
    crps_gaussian, each scoring the counted elements only."""
    import numpy as np
    import properscoring
    import scoringrules
    xx, yy, ss = (t.detach().numpy() for t in torch.broadcast_tensors(input, target, std))
    c = counted.numpy()
    w = np.broadcast_to(np.ones(()) if weight is None else weight.detach().numpy(), c.shape)
    for score_of in (lambda x, y, s: scoringrules.crps_normal(y, x, s, backend="numpy"),
                     lambda x, y, s: properscoring.crps_gaussian(y, mu=x, sig=s)):
        score = np.zeros(c.shape)
        score[c] = score_of(xx[c], yy[c], ss[c])
        terms = np.where(c, w * score, 0.0)
        with np.errstate(invalid="ignore"):
            want = {"none": terms, "sum": terms.sum(), "mean": terms.sum() / np.where(c, w, 0.0).sum()}[reduction]
        assert np.allclose(out.detach().numpy(), want, rtol=1e-12, atol=1e-14, equal_nan=True), (out, want)


def add_crps_gaussian_masked(w, gen, dtype, di):
    """crps_gaussian with kloss's weights and masks (masked_crps_normal;
    gradients for input, target, std and weight from autograd, float64):
    a weight per element with zeros; a weight per column against an output
    broadcast from input [4, 3], target [4, 1] and std [3]; a weight per row
    ([4, 1]) with a mask per column ([1, 5], one 0 and one 0.5: any nonzero
    value counts); a mask per element of 0, 1, -1 and 2 without a weight, std
    per column; mask_nonfinite with NaN, +inf and -inf targets and a weight
    per column; mask_nonfinite with a NaN in a broadcast target ([4, 1]: a
    whole row uncounted), a weight [1, 3] and a mask per row; a rank-0 weight
    with a mask; a mask that hides NaN and infinite targets and a NaN weight
    (mask_nonfinite false, explicitly); every element masked and every
    target non-finite (mean NaN, every gradient 0). float64 meets every
    layout with every reduction; the other dtypes each layout with one
    reduction, rotating (rot). Values checked against scoringrules'
    crps_normal and properscoring's crps_gaussian."""
    op = "crps_gaussian"
    nan, inf = float("nan"), float("inf")

    def u(*shape, lo=-2.0, hi=2.0):
        return uniform(gen, shape, lo, hi)

    def t(rows):
        return torch.tensor(rows, dtype=torch.float64)

    layouts = []
    wp = u(3, 5, lo=0.25, hi=2.0)
    wp[0, 1] = wp[2, 3] = 0.0
    layouts.append(("wsame", {"input": u(3, 5), "target": u(3, 5), "std": u(3, 5, lo=0.2, hi=2.0), "weight": wp},
                    None))
    layouts.append(("wcol_bcast", {"input": u(4, 3), "target": u(4, 1), "std": u(3, lo=0.3, hi=1.5),
                                   "weight": u(3, lo=0.25, hi=2.0)}, None))
    layouts.append(("wrow_mcol", {"input": u(4, 5), "target": u(4, 5), "std": u(4, 5, lo=0.2, hi=2.0),
                                  "weight": u(4, 1, lo=0.25, hi=2.0), "mask": t([[1.0, 0.0, 1.0, 0.5, 1.0]])}, None))
    layouts.append(("msame", {"input": u(3, 4), "target": u(3, 4), "std": u(4, lo=0.2, hi=2.0),
                              "mask": t([[1.0, 0.0, -1.0, 1.0], [0.0, 2.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]])}, None))
    y = u(4, 5)
    y[0, 2], y[1, 4], y[3, 0] = nan, inf, -inf
    layouts.append(("nonfinite_wcol", {"input": u(4, 5), "target": y, "std": u(4, 5, lo=0.2, hi=2.0),
                                       "weight": u(5, lo=0.25, hi=2.0)}, True))
    y = u(4, 1)
    y[2, 0] = nan
    layouts.append(("nonfinite_bcast_target", {"input": u(4, 3), "target": y, "std": u(4, 3, lo=0.2, hi=2.0),
                                               "weight": u(1, 3, lo=0.25, hi=2.0),
                                               "mask": t([[0.0], [1.0], [1.0], [1.0]])}, True))
    layouts.append(("wscalar_msame", {"input": u(2, 5), "target": u(2, 5), "std": u(2, 5, lo=0.2, hi=2.0),
                                      "weight": t(1.75), "mask": t([[1.0, 1.0, 0.0, 1.0, 1.0],
                                                                    [0.0, 1.0, 1.0, 1.0, 0.0]])}, None))
    y = u(6)
    y[1], y[4] = nan, -inf
    wh = u(6, lo=0.25, hi=2.0)
    wh[2] = nan
    layouts.append(("mask_hides_nan", {"input": u(6), "target": y, "std": u(6, lo=0.2, hi=2.0), "weight": wh,
                                       "mask": t([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])}, False))
    layouts.append(("all_masked", {"input": u(3, 4), "target": u(3, 4), "std": u(3, 4, lo=0.2, hi=2.0),
                                   "weight": u(3, 4, lo=0.25, hi=2.0), "mask": t([0.0])}, None))
    layouts.append(("all_nonfinite", {"input": u(2, 2), "target": t([[nan, inf], [-inf, nan]]),
                                      "std": u(2, 2, lo=0.2, hi=2.0)}, True))
    for k, (name, inputs, nonfinite) in enumerate(layouts):
        diff = [a for a in ("input", "target", "std", "weight") if a in inputs]
        opts = None if nonfinite is None else {"mask_nonfinite": nonfinite}
        for red in REDUCTIONS:
            if dtype != "float64" and red != rot(k, di):
                continue

            def call(input, target, std, weight=None, mask=None, red=red, nonfinite=nonfinite):
                out, counted = masked_crps_normal(input, target, std, weight, mask, nonfinite, red)
                check_masked_crps_normal(input, target, std, weight, counted, red, out)
                return out
            w.case("masked_%s_%s" % (name, red), op, dtype, inputs, diff, call, red, opts)


def masked_bce(op, input, target, weight, pos_weight, mask, nonfinite, reduction):
    """binary_cross_entropy(_with_logits) with kloss's masks (docs/weights.md)
    over torch's own: an element counts where mask (broadcast) is nonzero
    and, with `nonfinite`, its target is finite; a counted element's term is
    torch's (its weight= and pos_weight= included), another's exactly 0;
    mean = the terms' sum over the counted elements' count (torch's weighted
    mean is over every element's; 0 / 0 = NaN where nothing counts).
    torch.where before the loss (an uncounted input and target become 0.5,
    an uncounted weight 1) and after it keeps values outside the domain and
    non-finite targets out of the value and of autograd's gradients."""
    shape = input.shape
    counted = torch.ones(shape, dtype=torch.bool)
    if mask is not None:
        counted = counted & (mask != 0).expand(shape)
    if nonfinite:
        counted = counted & torch.isfinite(target).expand(shape)
    half = torch.full((), 0.5, dtype=torch.float64)
    x = torch.where(counted, input, half)
    y = torch.where(counted, target, half)
    wt = None if weight is None else torch.where(counted, weight.expand(shape), torch.ones((), dtype=torch.float64))
    if op == "binary_cross_entropy":
        terms = F.binary_cross_entropy(x, y, weight=wt, reduction="none")
    else:
        terms = F.binary_cross_entropy_with_logits(x, y, weight=wt, pos_weight=pos_weight, reduction="none")
    terms = torch.where(counted, terms, torch.zeros((), dtype=torch.float64))
    if reduction == "none":
        return terms
    if reduction == "sum":
        return terms.sum()
    return terms.sum() / counted.sum()


def add_bce_masked(w, gen, dtype, di):
    """binary_cross_entropy and binary_cross_entropy_with_logits with kloss's
    masks (masked_bce; gradients for input and target from autograd,
    float64): a mask per element of 0, 1, -1 and 2 (any nonzero value
    counts); torch's weight per element with a mask per column; a weight
    per column with a mask per row; mask_nonfinite with NaN, +inf and -inf
    targets and a weight per column; a mask that hides an input outside
    [0, 1] and a NaN target (mask_nonfinite false, explicitly: the [0, 1]
    check reads the counted elements alone); mask_nonfinite on finite
    targets (torch's mean); every element masked (mean NaN, every gradient
    0); for the logits also pos_weight per column with a mask, and with a
    weight and mask_nonfinite. float64 meets every layout with every
    reduction; the other dtypes each layout with one reduction, rotating
    (rot)."""
    nan, inf = float("nan"), float("inf")

    def t(rows):
        return torch.tensor(rows, dtype=torch.float64)

    for op in ("binary_cross_entropy", "binary_cross_entropy_with_logits"):
        logits = op != "binary_cross_entropy"

        def x(*shape):
            return uniform(gen, shape, -4.0, 4.0) if logits else uniform(gen, shape, 0.05, 0.95)

        def y(*shape):
            return uniform(gen, shape, 0.0, 1.0)

        def wts(*shape):
            return uniform(gen, shape, 0.25, 2.0)

        layouts = [("msame", {"input": x(3, 4), "target": y(3, 4),
                              "mask": t([[1.0, 0.0, -1.0, 1.0], [0.0, 2.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]])}, None),
                   ("wsame_mcol", {"input": x(4, 5), "target": y(4, 5), "weight": wts(4, 5),
                                   "mask": t([[1.0, 0.0, 1.0, 0.5, 1.0]])}, None),
                   ("wcol_mrow", {"input": x(4, 5), "target": y(4, 5), "weight": wts(5),
                                  "mask": t([[0.0], [1.0], [1.0], [1.0]])}, None)]
        yn = y(4, 5)
        yn[0, 2], yn[1, 4], yn[3, 0] = nan, inf, -inf
        layouts.append(("nonfinite_wcol", {"input": x(4, 5), "target": yn, "weight": wts(5)}, True))
        xb, yb = x(6), y(6)
        xb[2] = 1.5 if not logits else xb[2]
        yb[4] = nan
        layouts.append(("mask_hides_bad", {"input": xb, "target": yb, "mask": t([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])},
                        False))
        layouts.append(("nonfinite_none_there", {"input": x(3, 4), "target": y(3, 4)}, True))
        layouts.append(("all_masked", {"input": x(3, 4), "target": y(3, 4), "weight": wts(3, 4), "mask": t([0.0])},
                        None))
        if logits:
            layouts.append(("posw_mcol", {"input": x(4, 5), "target": y(4, 5), "pos_weight": uniform(gen, (5,), 0.5, 3),
                                          "mask": t([[1.0, 1.0, 0.0, 1.0, 1.0]])}, None))
            yp = y(3, 5)
            yp[1, 1] = nan
            layouts.append(("posw_w_nonfinite", {"input": x(3, 5), "target": yp, "weight": wts(3, 1),
                                                 "pos_weight": uniform(gen, (5,), 0.5, 3)}, True))
        for k, (name, inputs, nonfinite) in enumerate(layouts):
            opts = None if nonfinite is None else {"mask_nonfinite": nonfinite}
            for red in REDUCTIONS:
                if dtype != "float64" and red != rot(k, di):
                    continue

                def call(input, target, weight=None, pos_weight=None, mask=None, red=red, nonfinite=nonfinite,
                         op=op):
                    return masked_bce(op, input, target, weight, pos_weight, mask, nonfinite, red)
                w.case("masked_%s_%s" % (name, red), op, dtype, inputs, ["input", "target"], call, red, opts)


if __name__ == "__main__":
    import sys
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT_DIR)
