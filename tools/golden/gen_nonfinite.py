# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases with non-finite inputs (NaN, +inf, -inf) for every op family
(kloss-golden/1, docs/golden-schema.md), written to
data/golden/nonfinite.h5: forward values and autograd's gradients exactly as
torch 1.13 gives them in float64 from inputs rounded to the case dtype,
including NaN and infinite outputs and gradients.

What is covered, per family:
  * pointwise: NaN / +-inf in input, target, var, weight, pos_weight, and
    inf - inf between input and target; every op, every reduction.
  * margin: NaN / +-inf in every floating input of the seven ops, at and
    away from the target class, with both target signs.
  * cross_entropy / nll_loss: a NaN logit in a row, -inf in non-target
    classes (runs long enough to fill whole lanes of kloss's row loop), -inf
    at the target, +inf logits, all -inf rows, rows ignored by
    ignore_index holding NaN / inf, label smoothing, class weights (NaN /
    inf too), probability targets, every reduction; some class ranges are
    -inf so that a whole rank's vocabulary slice is -inf in the
    vocabulary-parallel runs.
  * ctc_loss: -inf log-probs (impossible labels), NaN and +inf inside and
    past an input length.
  * embedding / embedding_bag: NaN / inf rows of the table, every mode (max
    mode with NaN first and later in a bag), max_norm (norm_type 2, 1, inf)
    over inf and NaN rows, per_sample_weights with NaN.
  * fused_linear_cross_entropy: inf in the input rows and in the weight.

Where torch's value is an artefact of how it composes the op and kloss gives
the mathematical value instead (see the family docs, "Non-finite values"):
  * rows ignored by ignore_index whose logits hold NaN or +inf get NaN
    gradients in torch (log_softmax's backward multiplies the zero upstream
    gradient by exp(NaN)), 0 in kloss: those cross_entropy and
    fused_linear_cross_entropy cases check the forward only;
  * a probability target of 0 at a -inf logit: torch's
    -(p * log_softmax).sum() gives NaN (0 * -inf), kloss adds 0: no case
    has one (unit_tests/test_cross_entropy.cpp checks kloss's value).
NaN probabilities and NaN binary_cross_entropy targets, which kloss refuses
(InvalidArgument), are left out too. 16-bit dtypes have reduction none only.

Run: cd tools/golden && /usr/bin/python3 -c "import gen_nonfinite as g; g.main('../../data/golden')"
"""
import os
import warnings

import torch
import torch.nn.functional as F

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances

warnings.simplefilter("ignore")

NAN, INF = float("nan"), float("inf")
REDUCTIONS = ["none", "mean", "sum"]


# HDF5's newest object format, small datasets inside their object header,
# no timestamps anywhere: the same schema in fewer bytes, and the same bytes
# on every run.
LAYOUT = {"libver": "latest", "compact": True, "track_times": False}


class Gen:
    def __init__(self, g):
        self.g = g
        self.gen = torch.Generator().manual_seed(20261125)
        self.counts = {}

    def randn(self, *shape, scale=1.0):
        return torch.randn(tuple(shape), generator=self.gen, dtype=torch.float64) * scale

    def uniform(self, shape, lo, hi):
        return lo + (hi - lo) * torch.rand(tuple(shape), generator=self.gen, dtype=torch.float64)

    def case(self, family, name, op, dtype, fn, floats, others=None, diff=(), reduction=None, options=None,
             index_dtype=None, grads=True, rtol=None, atol=None, extra=None):
        """floats: name -> float64 tensor (rounded to dtype here); others:
        index tensors stored as they are; fn(**inputs) -> output (the
        reduction and options bound by the caller); diff: the differentiable
        inputs whose autograd gradients are stored unless grads is False.
        16-bit dtypes keep reduction none only (the reductions accumulate in
        float / double whatever the dtype; float32 covers them)."""
        if dtype in ("float16", "bfloat16") and reduction not in (None, "none"):
            return
        inputs = {k: rounded(v, dtype) for k, v in floats.items()}
        inputs.update(others or {})
        call = {k: (v.clone().requires_grad_(True) if k in diff else v) for k, v in inputs.items()}
        out = fn(**call)
        expected, go = None, None
        if grads and diff:
            go = rounded(self.uniform(out.shape, 0.5, 1.5), dtype)
            gs = torch.autograd.grad(out, [call[k] for k in diff], go, allow_unused=True)
            expected = {k: (v if v is not None else torch.zeros_like(call[k])) for k, v in zip(diff, gs)}
        d_rtol, d_atol = tolerances(dtype)
        full = "%s_%s_%s%s" % (family, name, dtype, "_" + reduction if reduction else "")
        self.g.add_case(full, op, dtype, inputs, out.detach(), grads=expected, grad_output=go, reduction=reduction,
                        index_dtype=index_dtype, options=options, rtol=d_rtol if rtol is None else rtol,
                        atol=d_atol if atol is None else atol, extra_attrs=extra)
        self.counts[family] = self.counts.get(family, 0) + 1


# --- pointwise --------------------------------------------------------------------------

def gen_pointwise(G):
    # input / target [3, 5]: row 0 non-finite inputs, row 1 non-finite
    # targets, row 2 both (inf - inf, inf - inf of equal sign, NaN - NaN),
    # the last two columns finite everywhere.
    x = G.randn(3, 5)
    y = G.randn(3, 5)
    x[0, 0], x[0, 1], x[0, 2] = NAN, INF, -INF
    y[1, 0], y[1, 1], y[1, 2] = NAN, INF, -INF
    x[2, 0], y[2, 0] = INF, INF
    x[2, 1], y[2, 1] = INF, -INF
    x[2, 2], y[2, 2] = NAN, NAN
    regression = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.0}),
                  ("huber_loss", {}), ("huber_loss", {"delta": 2.0})]
    for dtype in DTYPES:
        for red in REDUCTIONS:
            for op, opts in regression:
                tag = op.replace("_loss", "") + "".join("_%s%g" % kv for kv in opts.items())
                G.case("pointwise", tag, op, dtype,
                       lambda input, target, op=op, red=red, opts=opts: getattr(F, op)(input, target, reduction=red,
                                                                                        **opts),
                       {"input": x, "target": y}, diff=("input", "target"), reduction=red, options=opts)

            # binary_cross_entropy: input in [0, 1] (torch rejects NaN input,
            # kloss too; kloss also refuses NaN targets); NaN / inf in the
            # weight, broadcast over rows.
            xb = G.uniform((3, 4), 0.05, 0.95)
            yb = G.uniform((3, 4), 0, 1)
            wb = torch.tensor([1.5, NAN, INF, 0.5], dtype=torch.float64)
            G.case("pointwise", "bce_weight", "binary_cross_entropy", dtype,
                   lambda input, target, weight, red=red: F.binary_cross_entropy(input, target, weight, reduction=red),
                   {"input": xb, "target": yb, "weight": wb}, diff=("input",), reduction=red)

            # binary_cross_entropy_with_logits: +-inf and NaN logits against
            # targets 0, 1, 0.5; NaN target; NaN / inf pos_weight and weight.
            xl = G.randn(3, 5, scale=2.0)
            yl = G.uniform((3, 5), 0, 1)
            xl[0, 0], yl[0, 0] = INF, 1.0
            xl[0, 1], yl[0, 1] = INF, 0.0
            xl[0, 2], yl[0, 2] = -INF, 0.0
            xl[0, 3], yl[0, 3] = -INF, 1.0
            xl[0, 4], yl[0, 4] = INF, 0.5
            xl[1, 0] = NAN
            yl[1, 1] = NAN
            xl[1, 2] = -INF
            op = "binary_cross_entropy_with_logits"
            G.case("pointwise", "bce_logits", op, dtype,
                   lambda input, target, red=red: F.binary_cross_entropy_with_logits(input, target, reduction=red),
                   {"input": xl, "target": yl}, diff=("input",), reduction=red)
            pw = torch.tensor([2.0, 0.5, 3.0, INF, NAN], dtype=torch.float64)
            G.case("pointwise", "bce_logits_posw", op, dtype,
                   lambda input, target, pos_weight, red=red: F.binary_cross_entropy_with_logits(
                       input, target, reduction=red, pos_weight=pos_weight),
                   {"input": xl, "target": yl, "pos_weight": pw}, diff=("input",), reduction=red)
            wl = torch.tensor([[1.0], [NAN], [INF]], dtype=torch.float64)
            xw = G.randn(3, 5)
            yw = G.uniform((3, 5), 0, 1)
            G.case("pointwise", "bce_logits_weight", op, dtype,
                   lambda input, target, weight, red=red: F.binary_cross_entropy_with_logits(
                       input, target, weight, reduction=red),
                   {"input": xw, "target": yw, "weight": wl}, diff=("input",), reduction=red)

        for red in REDUCTIONS + ["batchmean"]:
            # kl_div, probability targets: -inf log-prob with target 0 and
            # with target > 0, NaN and +inf input, NaN and inf target.
            xk = torch.log_softmax(G.randn(3, 5), dim=1)
            pk = torch.softmax(G.randn(3, 5), dim=1)
            xk[0, 0], pk[0, 0] = -INF, 0.0
            xk[0, 1] = -INF
            xk[0, 2] = NAN
            xk[0, 3] = INF
            pk[1, 0] = NAN
            pk[1, 1] = INF
            pk[1, 2], xk[1, 2] = INF, -INF
            G.case("pointwise", "kl_div", "kl_div", dtype,
                   lambda input, target, red=red: F.kl_div(input, target, reduction=red),
                   {"input": xk, "target": pk}, diff=("input",), reduction=red)
            # log_target: target -inf (probability 0) against finite and -inf
            # input; -inf input against a finite target; NaN and +inf.
            xt = torch.log_softmax(G.randn(3, 5), dim=1)
            lt = torch.log_softmax(G.randn(3, 5), dim=1)
            lt[0, 0] = -INF
            lt[0, 1], xt[0, 1] = -INF, -INF
            xt[0, 2] = -INF
            xt[0, 3] = NAN
            lt[1, 0] = NAN
            lt[1, 1] = INF
            xt[1, 2] = INF
            G.case("pointwise", "kl_div_log_target", "kl_div", dtype,
                   lambda input, target, red=red: F.kl_div(input, target, reduction=red, log_target=True),
                   {"input": xt, "target": lt}, diff=("input",), reduction=red, options={"log_target": True})

        for red in REDUCTIONS:
            # poisson_nll_loss, log input: +-inf and NaN input against
            # targets 0 and > 0, inf and NaN targets; full adds Stirling's term.
            xp = G.randn(3, 5)
            yp = torch.tensor([[0, 1, 2, 3, 5], [0, 4, 2.5, 1, 7], [3, 0, 2, 6, 1]], dtype=torch.float64)
            xp[0, 0], xp[0, 1], xp[0, 2], xp[0, 3] = INF, INF, -INF, -INF  # targets 0, 1, 2, 3
            xp[1, 0], xp[1, 1] = NAN, -INF  # targets 0, 4
            yp[2, 0], yp[2, 1], yp[2, 2] = INF, NAN, INF
            xp[2, 2] = INF
            for full in (False, True):
                G.case("pointwise", "poisson_log_full%d" % full, "poisson_nll_loss", dtype,
                       lambda input, target, red=red, full=full: F.poisson_nll_loss(input, target, full=full,
                                                                                    reduction=red),
                       {"input": xp, "target": yp}, diff=("input",), reduction=red, options={"full": full})
            # rate input: 0 (log(eps)), +inf, NaN; inf target.
            xr = G.uniform((2, 5), 0.2, 3)
            yr = torch.tensor([[0, 1, 2, 3, 5], [2, 0, 1, 4, 2]], dtype=torch.float64)
            xr[0, 0], xr[0, 1], xr[0, 2] = 0.0, INF, NAN
            xr[1, 0], yr[1, 0] = INF, 2.0
            yr[1, 1], xr[1, 1] = INF, 0.0
            yr[1, 2] = INF
            G.case("pointwise", "poisson_rate", "poisson_nll_loss", dtype,
                   lambda input, target, red=red: F.poisson_nll_loss(input, target, log_input=False, eps=0.01,
                                                                     reduction=red),
                   {"input": xr, "target": yr}, diff=("input",), reduction=red,
                   options={"log_input": False, "eps": 0.01})
            # gaussian_nll_loss: inf / NaN input and target, inf / NaN var,
            # var 0 (clamped at eps).
            xg = G.randn(3, 4)
            yg = G.randn(3, 4)
            vg = G.uniform((3, 4), 0.25, 2)
            xg[0, 0], xg[0, 1] = INF, NAN
            yg[0, 2] = -INF
            vg[1, 0], vg[1, 1] = INF, NAN
            xg[1, 2], vg[1, 2] = INF, INF
            vg[1, 3] = 0.0
            for full in (False, True):
                G.case("pointwise", "gaussian_full%d" % full, "gaussian_nll_loss", dtype,
                       lambda input, target, var, red=red, full=full: F.gaussian_nll_loss(
                           input, target, var, full=full, eps=0.01, reduction=red),
                       {"input": xg, "target": yg, "var": vg}, diff=("input", "var"), reduction=red,
                       options={"full": full, "eps": 0.01})


# --- margin -------------------------------------------------------------------------------

def pair_cases(G, name, op, dtype, red, margin, input1, input2, target):
    """Cases `name` (default margin) and `name`_m (`margin`) of the margin
    family's `op`(input1, input2, target), torch.nn.functional's op of that
    name, differentiated in both inputs."""
    fn = getattr(F, op)
    for opts in ({}, {"margin": margin}):
        G.case("margin", name + ("_m" if opts else ""), op, dtype,
               lambda input1, input2, target, opts=opts: fn(input1, input2, target, reduction=red, **opts),
               {"input1": input1, "input2": input2}, {"target": target}, diff=("input1", "input2"), reduction=red,
               options=opts)


def gen_margin(G):
    for dtype in DTYPES:
        for red in REDUCTIONS:
            # hinge_embedding_loss: NaN, +inf, -inf under both target signs.
            xh = G.randn(10)
            th = torch.tensor([1, -1, 1, -1, 1, -1, 1, -1, 1, -1], dtype=torch.float64)
            xh[0] = xh[1] = NAN
            xh[2] = xh[3] = INF
            xh[4] = xh[5] = -INF
            G.case("margin", "hinge", "hinge_embedding_loss", dtype,
                   lambda input, target, red=red: F.hinge_embedding_loss(input, target, reduction=red),
                   {"input": xh}, {"target": th}, diff=("input",), reduction=red)

            # margin_ranking_loss: NaN, +-inf on either side, inf - inf.
            a = G.randn(8)
            b = G.randn(8)
            tr = torch.tensor([1, -1, 1, -1, 1, -1, 1, -1], dtype=torch.float64)
            a[0], b[1] = NAN, NAN
            a[2], b[3] = INF, INF
            a[4], b[5] = -INF, -INF
            a[6], b[6] = INF, INF
            pair_cases(G, "ranking", "margin_ranking_loss", dtype, red, 0.5, a, b, tr)

            # triplet_margin_loss: NaN anchor, inf positive, inf negative, inf
            # anchor (both distances inf), -inf negative, a finite row.
            an, po, ne = G.randn(6, 4), G.randn(6, 4), G.randn(6, 4)
            an[0, 1] = NAN
            po[1, 2] = INF
            ne[2, 0] = INF
            an[3, 3] = INF
            ne[4, 1] = -INF
            for tag, opts in (("p2", {}), ("p1", {"p": 1.0}), ("pinf_swap", {"p": INF, "swap": True}),
                              ("swap", {"swap": True})):
                G.case("margin", "triplet_" + tag, "triplet_margin_loss", dtype,
                       lambda anchor, positive, negative, red=red, opts=opts: F.triplet_margin_loss(
                           anchor, positive, negative, reduction=red, **opts),
                       {"anchor": an, "positive": po, "negative": ne}, diff=("anchor", "positive", "negative"),
                       reduction=red, options=opts)

            # cosine_embedding_loss: NaN, +inf in one or both inputs, -inf.
            c1, c2 = G.randn(6, 4), G.randn(6, 4)
            tc = torch.tensor([1, -1, 1, -1, 1, -1], dtype=torch.float64)
            c1[0, 0] = NAN
            c2[1, 1] = INF
            c1[2, 2] = c2[2, 2] = INF
            c1[3, 3] = -INF
            pair_cases(G, "cosine", "cosine_embedding_loss", dtype, red, 0.3, c1, c2, tc)

            # multi_margin_loss: rows with NaN / -inf / +inf away from and at
            # the target, and a finite row; p = 1 and 2; a class weight.
            xm = G.randn(7, 5)
            tm = torch.tensor([0, 1, 2, 3, 4, 0, 2])
            xm[0, 2] = NAN
            xm[1, 1] = NAN
            xm[2, 0] = -INF
            xm[3, 3] = -INF
            xm[4, 1] = INF
            xm[5, 0] = INF
            wm = G.uniform((5,), 0.5, 2)
            wm[0] = NAN  # row 5's target: its terms are all 0, and torch weighs terms, so its loss stays 0
            wm[3] = INF  # row 3's target
            for tag, opts, w in (("p1", {}, None), ("p2", {"p": 2}, None), ("weight", {"margin": 0.5}, wm)):
                floats = {"input": xm}
                if w is not None:
                    floats["weight"] = w
                G.case("margin", "multi_" + tag, "multi_margin_loss", dtype,
                       lambda input, target, weight=None, red=red, opts=opts: F.multi_margin_loss(
                           input, target, weight=weight, reduction=red, **opts),
                       floats, {"target": tm}, diff=("input",), reduction=red, options=opts, index_dtype="int64")

            # multilabel_margin_loss: NaN / +-inf at a target and at a
            # non-target.
            xl = G.randn(6, 5)
            tl = torch.tensor([[0, 2, -1, 0, 0], [1, -1, 0, 0, 0], [3, 4, -1, 0, 0], [0, 1, 2, -1, 0],
                               [4, -1, 0, 0, 0], [2, 3, -1, 1, 1]])
            xl[0, 1] = NAN  # non-target
            xl[1, 1] = NAN  # target
            xl[2, 0] = -INF  # non-target
            xl[3, 2] = -INF  # target
            xl[4, 3] = INF  # non-target
            G.case("margin", "multilabel", "multilabel_margin_loss", dtype,
                   lambda input, target, red=red: F.multilabel_margin_loss(input, target, reduction=red),
                   {"input": xl}, {"target": tl}, diff=("input",), reduction=red, index_dtype="int64")

            # multilabel_soft_margin_loss: +-inf against targets 0 and 1, NaN,
            # a NaN class weight.
            xs = G.randn(4, 5, scale=2.0)
            ts = torch.tensor([[1, 0, 0, 1, 1], [0, 1, 1, 0, 0], [1, 1, 0, 0, 1], [0, 0, 1, 1, 0]],
                              dtype=torch.float64)
            xs[0, 0], xs[0, 1], xs[0, 2], xs[0, 3] = INF, INF, -INF, -INF
            xs[1, 0] = NAN
            G.case("margin", "multilabel_soft", "multilabel_soft_margin_loss", dtype,
                   lambda input, target, red=red: F.multilabel_soft_margin_loss(input, target, reduction=red),
                   {"input": xs, "target": ts}, diff=("input",), reduction=red)
            ws = torch.tensor([1.0, 0.5, NAN, 2.0, 1.0], dtype=torch.float64)
            xs2 = G.randn(3, 5)
            ts2 = torch.tensor([[1, 0, 0, 1, 1], [0, 1, 1, 0, 0], [1, 1, 0, 0, 1]], dtype=torch.float64)
            G.case("margin", "multilabel_soft_weight", "multilabel_soft_margin_loss", dtype,
                   lambda input, target, weight, red=red: F.multilabel_soft_margin_loss(
                       input, target, weight=weight, reduction=red),
                   {"input": xs2, "target": ts2, "weight": ws}, diff=("input",), reduction=red)


# --- cross_entropy / nll_loss ----------------------------------------------------------------

C_CE = 20  # 16 lanes in kloss's host row loop: a row with classes 0..15 at -inf leaves lanes with only -inf


def ce_rows(G):
    """Logits [10, 20] and targets: one non-finite pattern per row."""
    x = G.randn(10, C_CE, scale=2.0)
    t = torch.tensor([3, 5, 7, 2, 9, 0, 4, 6, 11, 1])
    x[0, 8] = NAN                       # NaN away from the target
    x[1, 0:16] = -INF                   # -inf in 16 non-target classes (whole lanes)
    x[1, 5] = 0.5
    x[2, 7] = -INF                      # -inf at the target
    x[3, 10] = INF                      # +inf away from the target
    x[4, 9] = INF                       # +inf at the target
    x[5, :] = -INF                      # every class -inf
    # row 6 finite
    x[7, 6] = NAN                       # NaN at the target
    x[8, :] = -INF                      # only the target finite
    x[8, 11] = 1.25
    x[9, 10:20] = -INF                  # the upper half -inf (a whole rank's slice at 2 and 3 ranks)
    x[9, 0:3] = -INF                    # the first rank's slice at 3 ranks (classes 0..6) partly
    return x, t


def ce_finite_rows(G):
    """Logits [8, 20]: -inf away from the targets only, rows ignored by
    ignore_index holding NaN / inf; the loss stays finite."""
    x = G.randn(8, C_CE, scale=2.0)
    t = torch.tensor([3, -100, 7, 2, -100, 0, 4, -100])
    x[0, 0:16] = -INF
    x[0, 3] = 1.0
    x[1, 2] = NAN                       # ignored
    x[2, 10:20] = -INF                  # whole rank slices at 2 and 3 ranks
    x[3, 0:7] = -INF                    # the first rank's slice at 3 ranks
    x[4, :] = INF                       # ignored
    x[5, 1:20] = -INF                   # only the target finite: loss 0
    x[7, :] = -INF                      # ignored
    x[7, 3] = NAN
    return x, t


def ce_ref(input, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    return F.cross_entropy(input, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)


def gen_cross_entropy(G):
    for dtype in DTYPES:
        x, t = ce_rows(G)
        xf, tf = ce_finite_rows(G)
        w = G.uniform((C_CE,), 0.5, 2)
        for red in REDUCTIONS:
            for tag, opts, weighted in (("plain", {}, False), ("smooth", {"label_smoothing": 0.1}, False),
                                        ("weight_smooth", {"label_smoothing": 0.2}, True)):
                floats = {"input": x}
                if weighted:
                    floats["weight"] = w
                G.case("ce", "rows_" + tag, "cross_entropy", dtype,
                       lambda input, target, weight=None, red=red, opts=opts: ce_ref(input, target, weight, red,
                                                                                     **opts),
                       floats, {"target": t}, diff=("input",), reduction=red, options=opts, index_dtype="int64")
                # Ignored rows holding NaN / inf: torch's forward; its
                # gradient there is NaN (log_softmax's backward), kloss's 0:
                # forward only (module docstring). The same rows with
                # ignore_index rows made finite check the gradients.
                floats_f = dict(floats, input=xf)
                G.case("ce", "finite_" + tag, "cross_entropy", dtype,
                       lambda input, target, weight=None, red=red, opts=opts: ce_ref(input, target, weight, red,
                                                                                     **opts),
                       floats_f, {"target": tf}, diff=("input",), reduction=red, options=opts, index_dtype="int64",
                       grads=False)
                xg = xf.clone()
                xg[tf == -100] = G.randn(3, C_CE)
                floats_g = dict(floats, input=xg)
                G.case("ce", "neginf_" + tag, "cross_entropy", dtype,
                       lambda input, target, weight=None, red=red, opts=opts: ce_ref(input, target, weight, red,
                                                                                     **opts),
                       floats_g, {"target": tf}, diff=("input",), reduction=red, options=opts, index_dtype="int64")
            # a custom ignore_index that is a class, ignored rows with NaN
            xi = xf.clone()
            ti = tf.clone()
            ti[ti == -100] = 5
            G.case("ce", "ignore_custom", "cross_entropy", dtype,
                   lambda input, target, red=red: ce_ref(input, target, None, red, ignore_index=5),
                   {"input": xi}, {"target": ti}, diff=("input",), reduction=red, options={"ignore_index": 5},
                   index_dtype="int32", grads=False)
            # class weights with NaN / inf entries (class 13 NaN is no row's
            # target; class 4's inf is row 6's)
            wn = w.clone()
            wn[13] = NAN
            wn[4] = INF
            G.case("ce", "weight_nonfinite", "cross_entropy", dtype,
                   lambda input, target, weight, red=red: ce_ref(input, target, weight, red),
                   {"input": G.randn(8, C_CE), "weight": wn}, {"target": torch.tensor([3, 5, 7, 2, 9, 0, 4, 6])},
                   diff=("input",), reduction=red, index_dtype="int64")
            # probability targets: a -inf logit where the probability is not
            # 0 (+inf), NaN and +inf logits. Not here: kloss refuses NaN
            # probabilities (InvalidArgument), and a -inf logit of zero
            # probability adds 0 in kloss, 0 * -inf = NaN in torch (see the
            # docs; unit_tests/test_cross_entropy.cpp checks kloss's value).
            xp = G.randn(5, 6)
            p = torch.softmax(G.randn(5, 6), dim=1)
            xp[1, 2] = -INF
            xp[2, 3] = NAN
            xp[3, 0] = INF
            G.case("ce", "probs", "cross_entropy", dtype,
                   lambda input, target, red=red: F.cross_entropy(input, target, reduction=red),
                   {"input": xp, "target": p}, diff=("input",), reduction=red)
            # K-dimensional input [2, 20, 3]
            xk = G.randn(2, C_CE, 3)
            tk = torch.tensor([[1, 4, 7], [2, 9, 0]])
            xk[0, 5, 0] = NAN
            xk[0, 4, 1] = -INF
            xk[1, 0:16, 1] = -INF
            xk[1, 9, 1] = 0.0
            xk[1, 3, 2] = INF
            G.case("ce", "kdim", "cross_entropy", dtype,
                   lambda input, target, red=red: ce_ref(input, target, None, red),
                   {"input": xk}, {"target": tk}, diff=("input",), reduction=red, index_dtype="int64")
            # nll_loss on log-probabilities: NaN at and away from the target,
            # -inf / +inf at the target, a weight; ignored rows with NaN are
            # never read (torch's gradient there is 0 too).
            xn = torch.log_softmax(G.randn(8, 6), dim=1)
            tn = torch.tensor([0, 1, 2, 3, 4, -100, 5, -100])
            xn[0, 3] = NAN
            xn[1, 1] = NAN
            xn[2, 2] = -INF
            xn[3, 3] = INF
            xn[4, 0] = -INF
            xn[5, :] = NAN
            xn[7, 2] = INF
            wn6 = G.uniform((6,), 0.5, 2)
            for tag, weighted in (("plain", False), ("weight", True)):
                floats = {"input": xn}
                if weighted:
                    floats["weight"] = wn6
                G.case("nll", tag, "nll_loss", dtype,
                       lambda input, target, weight=None, red=red: F.nll_loss(input, target, weight=weight,
                                                                              reduction=red),
                       floats, {"target": tn}, diff=("input",), reduction=red, index_dtype="int64")
            xn2 = xn.clone()
            xn2[:5] = torch.log_softmax(G.randn(5, 6), dim=1)
            xn2[0, 4] = NAN  # away from the target
            xn2[1, 0] = -INF
            G.case("nll", "finite", "nll_loss", dtype,
                   lambda input, target, red=red: F.nll_loss(input, target, reduction=red),
                   {"input": xn2}, {"target": tn}, diff=("input",), reduction=red, index_dtype="int64")


# --- ctc ----------------------------------------------------------------------------------

def gen_ctc(G):
    T, N, C = 7, 5, 4
    base = torch.log_softmax(G.randn(T, N, C), dim=2)
    targets = torch.tensor([[1, 2, 1], [2, 3, 0], [1, 1, 0], [3, 2, 1], [2, 0, 0]])
    il = torch.tensor([7, 6, 7, 5, 7])
    tl = torch.tensor([3, 2, 2, 3, 1])
    lp = base.clone()
    lp[:, 0, 1] = -INF      # label 1 impossible in sequence 0: infeasible, loss +inf
    lp[2, 1, 3] = -INF      # one impossible frame of a label: still feasible
    lp[3, 2, 0] = NAN       # NaN inside the input length
    lp[6, 1, 2] = NAN       # NaN past sequence 1's input length (6): ignored
    lp[1, 3, 2] = INF       # +inf inside the length
    lp[:, 4, 0] = -INF      # blank impossible: only the path of label 2 on every frame remains
    lp[2, 4, 3] = NAN       # NaN at a class no path of sequence 4 reads: only its gradient is NaN
    for dtype in DTYPES:
        for red in REDUCTIONS:
            for zi in (False, True):
                G.case("ctc", "zi%d" % zi, "ctc_loss", dtype,
                       lambda log_probs, targets, input_lengths, target_lengths, red=red, zi=zi: F.ctc_loss(
                           log_probs, targets, input_lengths, target_lengths, reduction=red, zero_infinity=zi),
                       {"log_probs": lp}, {"targets": targets, "input_lengths": il, "target_lengths": tl},
                       diff=("log_probs",), reduction=red, options={"blank": 0, "zero_infinity": zi},
                       index_dtype="int64")


# --- embedding ----------------------------------------------------------------------------

def gen_embedding(G):
    V, D = 7, 5
    w = G.randn(V, D)
    w[1, 0] = 3.0  # above max_norm in every norm, but for the NaN beside it
    w[1, 2] = NAN
    w[3, 0] = INF
    w[4, 4] = -INF
    w[5, :] = NAN
    idx = torch.tensor([[1, 0, 3, 3], [4, 5, 2, 1]])
    bag_idx = torch.tensor([1, 0, 2, 0, 1, 3, 4, 6, 2, 5, 6])
    offsets = torch.tensor([0, 2, 5, 8])  # bags: [1 0] [2 0 1] [3 4 6] [2 5 6]
    for dtype in DTYPES:
        G.case("embedding", "plain", "embedding", dtype,
               lambda input, weight: F.embedding(input, weight),
               {"weight": w}, {"input": idx}, diff=("weight",), index_dtype="int64")
        G.case("embedding", "padding", "embedding", dtype,
               lambda input, weight: F.embedding(input, weight, padding_idx=3),
               {"weight": w}, {"input": idx}, diff=("weight",), index_dtype="int64", options={"padding_idx": 3})
        # max_norm renormalises the looked-up rows in place: an inf row's
        # norm is inf, its scale 0, inf * 0 = NaN; a NaN row's norm is NaN
        # and is left alone.
        G.case("embedding", "max_norm", "embedding", dtype,
               lambda input, weight: F.embedding(input, weight.clone(), max_norm=1.0),
               {"weight": w}, {"input": idx}, diff=("weight",), index_dtype="int64", options={"max_norm": 1.0})
        for tag, p in (("p1", 1.0), ("pinf", INF)):  # torch's norms keep a NaN (its max too)
            G.case("embedding", "max_norm_" + tag, "embedding", dtype,
                   lambda input, weight, p=p: F.embedding(input, weight.clone(), max_norm=1.0, norm_type=p),
                   {"weight": w}, {"input": idx}, diff=("weight",), index_dtype="int64",
                   options={"max_norm": 1.0, "norm_type": p})
        for mode in ("sum", "mean", "max"):
            G.case("embedding", "bag_" + mode, "embedding_bag", dtype,
                   lambda input, weight, offsets, mode=mode: F.embedding_bag(input, weight, offsets, mode=mode),
                   {"weight": w}, {"input": bag_idx, "offsets": offsets}, diff=("weight",), index_dtype="int64",
                   options={"mode": mode})
        # max mode, NaN first in a bag and after a finite value; +inf and -inf
        wmax = G.randn(V, D)
        wmax[0, 0] = NAN
        wmax[1, 1] = NAN
        wmax[2, 2] = INF
        wmax[3, 3] = -INF
        bi = torch.tensor([[0, 2, 3], [2, 1, 4], [3, 5, 6], [6, 0, 1]])
        G.case("embedding", "bag_max_fixed", "embedding_bag", dtype,
               lambda input, weight: F.embedding_bag(input, weight, mode="max"),
               {"weight": wmax}, {"input": bi}, diff=("weight",), index_dtype="int64", options={"mode": "max"})
        psw = G.uniform((11,), 0.5, 1.5)
        psw[4] = NAN
        psw[7] = INF
        G.case("embedding", "bag_sum_psw", "embedding_bag", dtype,
               lambda input, weight, offsets, per_sample_weights: F.embedding_bag(
                   input, weight, offsets, mode="sum", per_sample_weights=per_sample_weights),
               {"weight": G.randn(V, D), "per_sample_weights": psw}, {"input": bag_idx, "offsets": offsets},
               diff=("weight", "per_sample_weights"), index_dtype="int64", options={"mode": "sum"})


# --- fused_linear_cross_entropy -----------------------------------------------------------------

def gen_fused_linear(G):
    N, D, V = 6, 4, 9
    x = G.randn(N, D)
    w = G.randn(V, D, scale=0.7)
    b = G.randn(V, scale=0.3)
    t = torch.tensor([0, 3, 5, 8, 2, -100])
    x[1, 2] = INF                           # row 1's logits +-inf: its loss and every dW, db NaN
    xn = x.clone()
    xn[1, 2] = 0.5
    xn[5, 0] = NAN                          # only in an ignored row (forward only: see the docstring)
    w2 = G.randn(V, D, scale=0.7)
    w2[7, 1] = INF                          # class 7's logit +-inf in every row
    x2 = G.randn(N, D)
    x2[:, 1] = x2[:, 1].abs() + 0.1          # so that class 7's logit is +inf in every row ...
    x2[2, 1] = -1.0                          # ... but row 2's, which is -inf
    t2 = torch.tensor([0, 3, 5, 8, 2, 7])    # no ignored row: torch's gradient of an ignored +inf row is NaN
    for dtype in ("float64", "float32", "float16", "bfloat16"):
        for red in REDUCTIONS:
            for tag, xx, ww, tt in (("inf_input", x, w, t), ("inf_weight", x2, w2, t2), ("nan_ignored", xn, w, t)):
                G.case("flce", tag, "fused_linear_cross_entropy", dtype,
                       lambda input, weight, target, bias, red=red: F.cross_entropy(input @ weight.T + bias, target,
                                                                           reduction=red),
                       {"input": xx, "weight": ww, "bias": b}, {"target": tt}, diff=("input", "weight", "bias"),
                       reduction=red, index_dtype="int64", grads=tag != "nan_ignored")


def main(out_dir):
    with golden_file(out_dir, "nonfinite.h5", **LAYOUT) as g:
        G = Gen(g)
        for family in (gen_pointwise, gen_margin, gen_cross_entropy, gen_ctc, gen_embedding, gen_fused_linear):
            family(G)
    print(g.path, os.path.getsize(g.path), "bytes,", sum(G.counts.values()), "cases:",
          ", ".join("%s %d" % kv for kv in G.counts.items()))
    return g.path


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)
