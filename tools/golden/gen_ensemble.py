# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the ensemble scores (kloss/ensemble.hpp): crps_ensemble
with every estimator, members on the first, a middle and the last axis,
every reduction and dtype, tied members, one member, a member equal to the
observation; energy_score and variogram_score with every estimator, every
reduction and dtype, the members' axis first, in the middle or last and
before or after an event block of one or two axes (event_dims as the
string kloss takes, positive or negative axes), several point axes, one
member (standard), two members, tied members and a member equal to the
observation; variogram_score with and without a weight, p 0.5, 1, 1.5, 2.

References: scoringrules' crps_ensemble on its torch backend (float64), so
that autograd gives the gradients: estimator "nrg" (the pairwise form of
the standard CRPS) and "fair"; the almost-fair score is anemoi's convention,
alpha of the fair estimator plus 1 - alpha of the standard one, each from
scoringrules. Values are checked against scoringrules' numpy backend and,
for the standard estimator, properscoring's crps_ensemble.

energy_score and variogram_score: scoringrules' es_ensemble and
vs_ensemble (torch backend, float64, autograd; "nrg" is kloss's standard
estimator, almost_fair alpha of "fair" plus 1 - alpha of "nrg"), checked
against scoringrules' numpy backend and a direct per-point evaluation of
the formulas (ensemble.hpp's). scoringrules takes one variables axis, so
an event block of two axes is reshaped (row-major, as kloss flattens it
and as the weight's [D, D] indexes it) into one axis before the call: a
layout transform of the arrays, not a change of the score. torch's norm
has gradient 0 at a zero vector (tied members, a member on the
observation), kloss's convention. The variogram's |d|^p has no derivative
at d = 0 for p < 1, where autograd gives NaN (and every variogram has the
zero differences of its diagonal a == b), so the p = 0.5 cases check the
forward only, but two (the "masked" ones): their gradients are autograd's
on scoringrules' formula with |d|^p replaced by 0 (gradient 0) where d =
0, kloss's convention, checked against central differences of
scoringrules' numpy forward (the diagonal's differences stay 0 under any
step, and the off-diagonal ones are far from 0). Cases with p >= 1 carry
autograd's gradients of scoringrules itself (at d = 0 they are 0 there).

crps_ensemble with kloss's weights and masks per point (docs/weights.md;
the points are the target's elements): the per-point scores are
scoringrules' (as above), the weighting, masking and reduction are written
in torch from weights.md's definition - a point counts where the mask is
nonzero and, with mask_nonfinite, its target is finite; a counted point's
term is weight x score, another's exactly 0; mean = the terms' sum over
the counted points' weights (NaN when nothing counts, every gradient 0) -
with torch.where twice (the uncounted points' target and weight replaced
before the score, the terms selected after) so that their NaN or infinite
targets and weights reach neither the value nor autograd's gradients
(input, target, weight). The reduced values are checked again against a
numpy evaluation on scoringrules' numpy scores.

  cd tools/golden && /opt/torch/bin/python -W ignore -c "import gen_ensemble as g; g.main('../../data/golden')"
"""
import os
import warnings

import numpy as np
import torch

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances

warnings.simplefilter("ignore")
OP = "crps_ensemble"
ES_OP, VS_OP = "energy_score", "variogram_score"
REDUCTIONS = ["none", "mean", "sum"]
SR_NAME = {"standard": "nrg", "fair": "fair"}


def uniform(gen, shape, lo, hi):
    return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)


def crps(x, y, dim, estimator, alpha):
    """Per point, scoringrules (torch backend) with the members' axis `dim`."""
    import scoringrules
    if estimator == "almost_fair":
        return alpha * crps(x, y, dim, "fair", alpha) + (1 - alpha) * crps(x, y, dim, "standard", alpha)
    return scoringrules.crps_ensemble(y, x, m_axis=dim, estimator=SR_NAME[estimator], backend="torch")


def check(x, y, dim, estimator, alpha, per_point):
    """The values against scoringrules' numpy backend and properscoring."""
    import properscoring
    import scoringrules
    xn, yn = x.detach().numpy(), y.detach().numpy()

    def sr(e):
        return scoringrules.crps_ensemble(yn, xn, m_axis=dim, estimator=SR_NAME[e], backend="numpy")

    def ps(e):
        return properscoring.crps_ensemble(yn, np.moveaxis(xn, dim, -1))

    want = alpha * sr("fair") + (1 - alpha) * sr("standard") if estimator == "almost_fair" else sr(estimator)
    assert np.allclose(per_point.detach().numpy(), want, rtol=1e-12, atol=1e-14)
    if estimator == "standard":
        assert np.allclose(per_point.detach().numpy(), ps("standard"), rtol=1e-10, atol=1e-12)


class Writer:
    def __init__(self, g, gen):
        self.g, self.gen, self.count = g, gen, 0

    def case(self, name, dtype, x, y, dim, estimator, alpha, reduction):
        x, y = rounded(x, dtype), rounded(y, dtype)
        xl, yl = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        per_point = crps(xl, yl, dim, estimator, alpha)
        check(xl, yl, dim, estimator, alpha, per_point)
        out = {"none": per_point, "mean": per_point.mean(), "sum": per_point.sum()}[reduction]
        go = rounded(uniform(self.gen, out.shape, 0.5, 1.5), dtype)
        gx, gy = torch.autograd.grad(out, [xl, yl], go)
        rtol, atol = tolerances(dtype)
        big = max([float(t.abs().max()) for t in (out.detach(), gx, gy) if t.numel()] + [1.0])
        m = x.shape[dim]
        atol = max(atol, rtol * big * m)  # a member's gradient: the difference of terms ~ m times its size
        options = {"estimator": estimator, "member_dim": dim}
        if estimator == "almost_fair":
            options["alpha"] = alpha
        self.g.add_case("%s_%s_%s_%s" % (OP, name, reduction, dtype), OP, dtype, {"input": x, "target": y},
                        out.detach(), grads={"input": gx, "target": gy}, grad_output=go, reduction=reduction,
                        options=options, rtol=rtol, atol=atol)
        self.count += 1


# --- energy_score and variogram_score -------------------------------------

ESTIMATORS = ("standard", "fair", "almost_fair")
# Layouts: input's shape (members' extent included), member_dim and
# event_dims as a case stores them (None: the option absent, kloss's
# default: member_dim -2, event_dims "-1").
LAYOUTS = [
    ((6, 5, 3), None, None),          # [points, m, D]: the defaults
    ((4, 3, 5), 0, "-1"),             # members first
    ((3, 4, 6), -1, "1"),             # members last, the event axis before them
    ((2, 5, 3, 4), 1, "2,3"),         # members before a block of two axes
    ((3, 2, 4, 6), -1, "-3,-2"),      # members after a block of two axes
    ((2, 3, 5, 4), 2, "0,1"),         # the block first, then the members, a point axis last
    ((6, 2, 3, 4), 0, "1,2"),         # members first, the block in the middle, a point axis last
    ((2, 7, 3, 4), 1, "3"),           # points on both sides of the members
]
P_VALUES = (1.0, 2.0, 0.5, 1.5)


class Layout:
    """A multivariate call's geometry: input's shape, the members' axis m and
    the event axes (normalised), target's shape, and the one-variable-axis
    layout scoringrules takes."""

    def __init__(self, shape, member_dim, event_dims):
        r = len(shape)
        self.shape, self.member_dim, self.event_dims = tuple(shape), member_dim, event_dims
        self.m_axis = (-2 if member_dim is None else member_dim) % r
        ev = sorted(int(a) % r for a in ("-1" if event_dims is None else event_dims).split(","))
        assert ev == list(range(ev[0], ev[0] + len(ev))) and self.m_axis not in ev
        self.lo, self.k = ev[0], len(ev)
        self.m = shape[self.m_axis]
        self.D = int(np.prod([shape[a] for a in ev]))
        self.target = tuple(n for a, n in enumerate(shape) if a != self.m_axis)
        self.lo_t = self.lo - 1 if self.m_axis < self.lo else self.lo
        self.points = self.target[:self.lo_t] + self.target[self.lo_t + self.k:]
        # scoringrules' layout: the block as one axis
        self.x1 = shape[:self.lo] + (self.D,) + shape[self.lo + self.k:]
        self.y1 = self.target[:self.lo_t] + (self.D,) + self.target[self.lo_t + self.k:]
        self.m1 = self.m_axis if self.m_axis < self.lo else self.m_axis - (self.k - 1)

    def options(self):
        o = {}
        if self.member_dim is not None:
            o["member_dim"] = self.member_dim
        if self.event_dims is not None:
            o["event_dims"] = self.event_dims
        return o

    def flat(self, x, y):
        """x, y (torch or numpy) in scoringrules' layout."""
        return x.reshape(self.x1), y.reshape(self.y1)

    def direct(self, x, y):
        """x as [points, m, D], y as [points, D] (numpy), for the direct
        per-point evaluation."""
        xs = np.moveaxis(x.reshape(self.x1), (self.m1, self.lo), (-2, -1))
        ys = np.moveaxis(y.reshape(self.y1), self.lo_t, -1)
        return xs.reshape(-1, self.m, self.D), ys.reshape(-1, self.D)


def _est_mix(fn, estimator, alpha):
    """fn(scoringrules estimator) under kloss's estimator."""
    if estimator == "almost_fair":
        return alpha * fn("fair") + (1 - alpha) * fn("nrg")
    return fn(SR_NAME[estimator])


def es_torch(lay, x, y, estimator, alpha):
    """Per point, scoringrules' energy score (torch backend)."""
    import scoringrules
    xf, yf = lay.flat(x, y)
    return _est_mix(lambda e: scoringrules.es_ensemble(yf, xf, lay.m1, lay.lo, estimator=e, backend="torch"),
                    estimator, alpha)


def vs_torch(lay, x, y, w, p, estimator, alpha):
    """Per point, scoringrules' variogram score (torch backend)."""
    import scoringrules
    xf, yf = lay.flat(x, y)
    return _est_mix(lambda e: scoringrules.vs_ensemble(yf, xf, w, lay.m1, lay.lo, p=p, estimator=e,
                                                       backend="torch"), estimator, alpha)


def vs_masked(lay, x, y, w, p, estimator, alpha):
    """scoringrules' vs formula (core/variogram/_score.py) in torch with
    |d|^p taken as 0, with gradient 0, where d = 0 (kloss's convention;
    autograd's is NaN there for p < 1)."""
    xf, yf = lay.flat(x, y)
    fct = torch.movedim(xf, (lay.m1, lay.lo), (-2, -1))  # (... M D)
    obs = torch.movedim(yf, lay.lo_t, -1)                # (... D)
    M = fct.shape[-2]
    w = torch.ones(obs.shape + (lay.D,), dtype=torch.float64) if w is None else w

    def powabs(d):
        zero = d == 0
        return torch.where(zero, torch.zeros_like(d), torch.where(zero, torch.ones_like(d), d).abs() ** p)
    fd = powabs(fct.unsqueeze(-2) - fct.unsqueeze(-1))   # (... M D D)
    od = powabs(obs.unsqueeze(-2) - obs.unsqueeze(-1))   # (... D D)

    def one(e):
        if e == "nrg":
            return (w * (od - fd.sum(-3) / M) ** 2).sum((-2, -1))
        e1 = (w.unsqueeze(-3) * (fd - od.unsqueeze(-3)) ** 2).sum((-2, -1)).sum(-1) / M
        e2 = (w.unsqueeze(-3).unsqueeze(-3) * (fd.unsqueeze(-3) - fd.unsqueeze(-4)) ** 2).sum((-2, -1))
        return e1 - 0.5 * e2.sum((-2, -1)) / (M * (M - 1))
    return _est_mix(one, estimator, alpha)


def direct_score(op, lay, x, y, w, p, estimator, alpha):
    """ensemble.hpp's formulas, point by point (numpy, float64)."""
    xs, ys = lay.direct(x, y)
    m = lay.m
    std, fair = 1 / (2 * m * m), (1 / (2 * m * (m - 1)) if m > 1 else np.nan)
    c = {"standard": std, "fair": fair, "almost_fair": alpha * fair + (1 - alpha) * std}[estimator]
    k = {"standard": 0.0, "fair": 1.0, "almost_fair": alpha}[estimator]
    w = np.ones((lay.D, lay.D)) if w is None else np.asarray(w)
    out = np.empty(len(xs))
    for q, (xq, yq) in enumerate(zip(xs, ys)):
        if op == ES_OP:
            out[q] = (np.mean([np.sqrt(((xq[i] - yq) ** 2).sum()) for i in range(m)])
                      - c * sum(np.sqrt(((xq[i] - xq[j]) ** 2).sum()) for i in range(m) for j in range(m)))
        else:
            f = np.abs(xq[:, :, None] - xq[:, None, :]) ** p          # [m, D, D]
            o = np.abs(yq[:, None] - yq[None, :]) ** p
            s2 = f.var(0, ddof=1) if m > 1 else np.zeros_like(o)
            out[q] = (w * ((o - f.mean(0)) ** 2 - k * s2 / m)).sum()
    return out.reshape(lay.points)


def check_multivariate(op, lay, x, y, w, p, estimator, alpha, per_point):
    """The values against scoringrules' numpy backend and the direct form."""
    import scoringrules
    xf, yf = lay.flat(x.detach().numpy(), y.detach().numpy())
    wn = None if w is None else w.numpy()
    if op == ES_OP:
        want = _est_mix(lambda e: scoringrules.es_ensemble(yf, xf, lay.m1, lay.lo, estimator=e, backend="numpy"),
                        estimator, alpha)
    else:
        want = _est_mix(lambda e: scoringrules.vs_ensemble(yf, xf, wn, lay.m1, lay.lo, p=p, estimator=e,
                                                           backend="numpy"), estimator, alpha)
    got = per_point.detach().numpy()
    assert got.shape == lay.points, (got.shape, lay.points)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-13), (op, got, want)
    direct = direct_score(op, lay, x.detach().numpy(), y.detach().numpy(), wn, p, estimator, alpha)
    assert np.allclose(got, direct, rtol=1e-11, atol=1e-12), (op, got, direct)


def _central_differences(fn, arrays, go, h=1e-6):
    """d sum(go * fn(*arrays)) / d arrays[i], central differences (numpy)."""
    out = []
    for n, a in enumerate(arrays):
        g = np.zeros_like(a)
        for i in np.ndindex(*a.shape):
            vals = []
            for s in (h, -h):
                args = [b.copy() for b in arrays]
                args[n][i] += s
                vals.append(float((go * fn(*args)).sum()))
            g[i] = (vals[0] - vals[1]) / (2 * h)
        out.append(g)
    return out


class MultivariateWriter:
    def __init__(self, g, gen):
        self.g, self.gen, self.count = g, gen, 0

    def case(self, op, name, dtype, lay, x, y, estimator, reduction, alpha=0.95, w=None, p=None, masked=False):
        """One case; gradients but for variogram_score with p < 1 (unless
        masked: the masked form's gradients, checked by central
        differences)."""
        x, y = rounded(x, dtype), rounded(y, dtype)
        w = None if w is None else rounded(w, dtype)
        grads = op == ES_OP or p >= 1 or masked
        xl, yl = x.clone().requires_grad_(grads), y.clone().requires_grad_(grads)
        if op == ES_OP:
            per_point = es_torch(lay, xl, yl, estimator, alpha)
        elif masked:
            per_point = vs_masked(lay, xl, yl, w, p, estimator, alpha)
        else:
            per_point = vs_torch(lay, xl, yl, w, p, estimator, alpha)
        check_multivariate(op, lay, xl, yl, w, p, estimator, alpha, per_point)
        out = {"none": per_point, "mean": per_point.mean(), "sum": per_point.sum()}[reduction]
        rtol, atol = tolerances(dtype)
        go, gx, gy, case_grads = None, None, None, None
        if grads:
            go = rounded(uniform(self.gen, out.shape, 0.5, 1.5), dtype)
            gx, gy = torch.autograd.grad(out, [xl, yl], go)
            assert torch.isfinite(gx).all() and torch.isfinite(gy).all()
            case_grads = {"input": gx, "target": gy}
            if masked:
                import scoringrules
                wn = None if w is None else w.numpy()

                def fwd(xn, yn):
                    xf, yf = lay.flat(xn, yn)
                    per = _est_mix(lambda e: scoringrules.vs_ensemble(yf, xf, wn, lay.m1, lay.lo, p=p, estimator=e,
                                                                      backend="numpy"), estimator, alpha)
                    return {"none": per, "mean": per.mean(), "sum": per.sum()}[reduction]
                nx, ny = _central_differences(fwd, [x.numpy().copy(), y.numpy().copy()], go.numpy())
                assert np.allclose(gx.numpy(), nx, rtol=1e-5, atol=1e-6) and np.allclose(gy.numpy(), ny, rtol=1e-5,
                                                                                              atol=1e-6)
        big = max([float(t.abs().max()) for t in (per_point.detach(), gx, gy) if t is not None and t.numel()]
                  + [1.0])
        # a point's score and a member's gradient: differences of sums of up
        # to m (and, for the variogram, D) terms of that size, accumulated in
        # float for every dtype but float64 (the 16-bit results are rounded
        # once, at the end: rtol)
        acc_rtol = tolerances("float64" if dtype == "float64" else "float32")[0]
        atol = max(atol, acc_rtol * big * max(lay.m, lay.D if op == VS_OP else 1))
        options = {"estimator": estimator}
        options.update(lay.options())
        if estimator == "almost_fair":
            options["alpha"] = alpha
        if op == VS_OP:
            options["p"] = float(p)
        inputs = {"input": x, "target": y}
        if w is not None:
            inputs["weight"] = w
        self.g.add_case("%s_%s_%s_%s" % (op, name, reduction, dtype), op, dtype, inputs, out.detach(),
                        grads=case_grads, grad_output=go, reduction=reduction, options=options, rtol=rtol, atol=atol)
        self.count += 1


def _weight(gen, d):
    """A [D, D] weight: not symmetric (kloss must flatten the block as the
    weight indexes it), one pair weighted 0."""
    w = uniform(gen, (d, d), 0.25, 2.0)
    w[0, d - 1] = 0.0
    return w


def multivariate_cases(g, gen):
    """energy_score's and variogram_score's cases (see the docstring)."""
    w = MultivariateWriter(g, gen)
    # Random members and observations: 24 cases per op over (dtype,
    # estimator, layout, reduction); each layout meets every estimator and
    # reduction and three of the dtypes. variogram_score: each layout meets
    # three of P_VALUES (p = 0.5 forward only) and is weighted in one or two
    # of its three cases.
    for op in (ES_OP, VS_OP):
        for i in range(24):
            dtype = DTYPES[(i + i // 8) % 4]
            estimator = ESTIMATORS[i % 3]
            lay = Layout(*LAYOUTS[i % 8])
            red = REDUCTIONS[(i // 8) % 3]
            x, y = uniform(gen, lay.shape, -1, 1), uniform(gen, lay.target, -1, 1)
            alpha = 0.7 if i % 6 == 2 else 0.95
            if op == ES_OP:
                w.case(op, "layout%d_%s" % (i % 8, estimator), dtype, lay, x, y, estimator, red, alpha)
            else:
                p = P_VALUES[(i + i // 8) % 4 if i % 8 < 4 else (i + 1 + i // 8) % 4]
                weight = _weight(gen, lay.D) if (i // 2 + i // 8) % 2 else None
                w.case(op, "layout%d_%s_p%g%s" % (i % 8, estimator, p, "_w" if weight is not None else ""), dtype,
                       lay, x, y, estimator, red, alpha, w=weight, p=p)
    for di, dtype in enumerate(DTYPES):
        # ties: point 0's members 0 and 1 are one vector, member 2 is the
        # observation; point 1's members 1 and 3 one vector, member 0 the
        # observation; point 2 all members one vector. variogram_score (p
        # = 1): equal event values within a member and in the observation
        # too (differences of 0, gradient 0).
        lay = Layout((3, 4, 3), None, None)
        x = torch.tensor([[[0.5, -1.0, 2.0], [0.5, -1.0, 2.0], [1.0, 0.25, -0.5], [-2.0, 1.5, 0.0]],
                          [[0.75, 0.75, -1.0], [1.0, -1.0, 0.5], [0.0, 2.0, 1.0], [1.0, -1.0, 0.5]],
                          [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]], dtype=torch.float64)
        y = torch.tensor([[1.0, 0.25, -0.5], [0.75, 0.75, -1.0], [-1.0, 0.5, 0.5]], dtype=torch.float64)
        for k, estimator in enumerate(ESTIMATORS):
            if dtype == "float64" or k == di % 3:
                w.case(ES_OP, "ties_" + estimator, dtype, lay, x, y, estimator, "none", 0.5)
                w.case(VS_OP, "ties_" + estimator + "_p1", dtype, lay, x, y, estimator, "none", 0.5,
                       w=_weight(gen, 3) if k % 2 else None, p=1.0)
        # one member (standard: the fair estimators need two)
        red = REDUCTIONS[di % 3]
        lay = Layout((7, 1, 3), None, None)
        w.case(ES_OP, "one_member", dtype, lay, uniform(gen, lay.shape, -1, 1), uniform(gen, lay.target, -1, 1),
               "standard", red)
        p = P_VALUES[di]
        w.case(VS_OP, "one_member_p%g" % p, dtype, Layout((5, 1, 4), 1, "2"), uniform(gen, (5, 1, 4), -1, 1),
               uniform(gen, (5, 4), -1, 1), "standard", red, p=p)
        # two members, members last after a block of two axes
        lay = Layout((3, 2, 3, 2), -1, "1,2")
        estimator = ("fair", "almost_fair", "standard", "fair")[di]
        w.case(ES_OP, "two_members_" + estimator, dtype, lay, uniform(gen, lay.shape, -1, 1),
               uniform(gen, lay.target, -1, 1), estimator, REDUCTIONS[(di + 1) % 3])
        p = (2.0, 1.0, 1.5, 2.0)[di]
        w.case(VS_OP, "two_members_%s_p%g" % (estimator, p), dtype, lay, uniform(gen, lay.shape, -1, 1),
               uniform(gen, lay.target, -1, 1), estimator, REDUCTIONS[(di + 2) % 3], w=_weight(gen, 6), p=p)
    # a common offset far from 0 (temperatures in kelvin): the scores and
    # their gradients depend on differences only
    lay = Layout((4, 6, 5), None, None)
    w.case(ES_OP, "offset280_fair", "float32", lay, 280 + uniform(gen, lay.shape, -1, 1),
           280 + uniform(gen, lay.target, -1, 1), "fair", "none")
    w.case(VS_OP, "offset280_fair_p1.5", "float32", lay, 280 + uniform(gen, lay.shape, -1, 1),
           280 + uniform(gen, lay.target, -1, 1), "fair", "none", p=1.5)
    # p = 0.5 with gradients: the masked form (docstring)
    lay = Layout(*LAYOUTS[3])
    w.case(VS_OP, "masked_layout3_fair_p0.5_w", "float64", lay, uniform(gen, lay.shape, -1, 1),
           uniform(gen, lay.target, -1, 1), "fair", "none", w=_weight(gen, lay.D), p=0.5, masked=True)
    lay = Layout(*LAYOUTS[0])
    w.case(VS_OP, "masked_layout0_almost_fair_p0.5", "float32", lay, uniform(gen, lay.shape, -1, 1),
           uniform(gen, lay.target, -1, 1), "almost_fair", "mean", p=0.5, masked=True)
    return w.count


# --- crps_ensemble with weights and masks ----------------------------------

def counted_points(y, mask, nonfinite):
    """Whether each point (target element) counts: mask (broadcast to the
    points) nonzero, and with `nonfinite` a finite target."""
    counted = torch.ones(y.shape, dtype=torch.bool)
    if mask is not None:
        counted = counted & (mask != 0).expand(y.shape)
    if nonfinite:
        counted = counted & torch.isfinite(y)
    return counted


def masked_terms(score_of, y, weight, counted):
    """weights.md's terms: weight x score(y) where a point counts, exactly 0
    elsewhere, the uncounted targets and weights replaced (by 0 and 1)
    before they meet the score, so that no NaN reaches autograd."""
    y_safe = torch.where(counted, y, torch.zeros_like(y))
    score = score_of(y_safe)
    w = torch.ones((), dtype=torch.float64) if weight is None else weight
    w_safe = torch.where(counted, w, torch.ones_like(w))
    terms = torch.where(counted, w_safe * score, torch.zeros_like(score))
    denominator = torch.where(counted, w_safe, torch.zeros_like(w_safe)).sum()
    return terms, denominator, score


def masked_reduce(terms, denominator, reduction):
    """none: the terms; sum: their sum; mean: that over the counted points'
    weights (0 / 0 = NaN where nothing counts)."""
    return {"none": terms, "sum": terms.sum(), "mean": terms.sum() / denominator}[reduction]


def check_masked(per_point_np, weight, counted, reduction, out):
    """The reduced value against a numpy evaluation of weights.md's
    definition on scoringrules' numpy scores (per_point_np)."""
    c = counted.numpy()
    w = np.broadcast_to(np.ones(()) if weight is None else weight.detach().numpy(), c.shape)
    with np.errstate(invalid="ignore"):
        terms = np.where(c, w * np.where(c, per_point_np, 0.0), 0.0)
        want = {"none": terms, "sum": terms.sum(), "mean": terms.sum() / np.where(c, w, 0.0).sum()}[reduction]
    assert np.allclose(out.detach().numpy(), want, rtol=1e-12, atol=1e-14, equal_nan=True), (out, want)


class MaskedWriter:
    def __init__(self, g, gen):
        self.g, self.gen, self.count = g, gen, 0

    def case(self, name, dtype, x, y, dim, estimator, reduction, weight=None, mask=None, nonfinite=None,
             alpha=0.9):
        """One weighted / masked crps_ensemble case: gradients for input,
        target and (given) weight. nonfinite: the option mask_nonfinite
        (None: absent, kloss's default false)."""
        x, y = rounded(x, dtype), rounded(y, dtype)
        weight = None if weight is None else rounded(weight, dtype)
        mask = None if mask is None else rounded(mask, dtype)
        counted = counted_points(y, mask, bool(nonfinite))
        xl, yl = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        wl = None if weight is None else weight.clone().requires_grad_(True)
        terms, denominator, per_point = masked_terms(lambda ys: crps(xl, ys, dim, estimator, alpha), yl, wl, counted)
        y_safe = torch.where(counted, y, torch.zeros_like(y))
        check(xl, y_safe, dim, estimator, alpha, per_point)
        out = masked_reduce(terms, denominator, reduction)
        xn, yn = x.numpy(), y_safe.numpy()
        sr = {e: scoringrules_np(xn, yn, dim, e) for e in ("standard", "fair")}
        per_np = alpha * sr["fair"] + (1 - alpha) * sr["standard"] if estimator == "almost_fair" else sr[estimator]
        check_masked(per_np, weight, counted, reduction, out)
        go = rounded(uniform(self.gen, out.shape, 0.5, 1.5), dtype)
        leaves = [xl, yl] + ([wl] if wl is not None else [])
        gs = torch.autograd.grad(out, leaves, go)
        assert all(torch.isfinite(t).all() for t in gs)
        if not counted.any():
            assert all((t == 0).all() for t in gs)  # a mean over nothing depends on nothing
        grads = dict(zip(["input", "target", "weight"], gs))
        rtol, atol = tolerances(dtype)
        mags = [out.detach()] + list(gs)
        big = max([float(t[torch.isfinite(t)].abs().max()) for t in mags if torch.isfinite(t).any()] + [1.0])
        atol = max(atol, rtol * big * x.shape[dim])  # as Writer.case
        options = {"estimator": estimator, "member_dim": dim}
        if estimator == "almost_fair":
            options["alpha"] = alpha
        if nonfinite is not None:
            options["mask_nonfinite"] = bool(nonfinite)
        inputs = {"input": x, "target": y}
        if weight is not None:
            inputs["weight"] = weight
        if mask is not None:
            inputs["mask"] = mask
        self.g.add_case("%s_masked_%s_%s_%s" % (OP, name, reduction, dtype), OP, dtype, inputs, out.detach(),
                        grads=grads, grad_output=go, reduction=reduction, options=options, rtol=rtol, atol=atol)
        self.count += 1


def scoringrules_np(x, y, dim, estimator):
    """scoringrules' crps_ensemble per point on its numpy backend."""
    import scoringrules
    return scoringrules.crps_ensemble(y, x, m_axis=dim, estimator=SR_NAME[estimator], backend="numpy")


def masked_cases(g, gen):
    """crps_ensemble with weights and masks per point (the module docstring):
    each layout below with every reduction, the estimator rotating so that
    every layout meets every estimator and every reduction every estimator;
    8, 20 and 130 members (kloss's blocked, counted and sorted paths), more
    than one block of 16 points. Layouts: a per-point weight with zeros; a
    weight per column ([5] against [4, 5] points), per row ([4, 1]) with a
    mask per column ([1, 6], one 0 and one 0.5: any nonzero value counts)
    and a rank-0 weight; a mask per point of 0, 1, -2 and 0.25 without a
    weight; mask_nonfinite with NaN, +inf and -inf targets, alone with a
    broadcast weight, with a per-point weight and a mask per row, with a
    rank-0 weight on the sorted path; a mask that hides NaN and infinite
    targets and a NaN weight (mask_nonfinite false, explicitly); every point
    masked and every target non-finite (mean NaN, every gradient 0). Then
    one float32 and one bfloat16 case."""
    w = MaskedWriter(g, gen)
    nan, inf = float("nan"), float("inf")

    def u(*shape, lo=-2.0, hi=2.0):
        return uniform(gen, shape, lo, hi)

    def layouts():
        # name, x, y, member_dim, keywords of MaskedWriter.case
        wp = u(4, 5, lo=0.25, hi=2.0)
        wp[1, 2] = wp[3, 0] = 0.0
        yield "wpoint_m8", u(4, 5, 8), u(4, 5), -1, {"weight": wp}
        yield "wcol_m20", u(20, 4, 5), u(4, 5), 0, {"weight": u(5, lo=0.25, hi=2.0)}
        mk = torch.tensor([[1.0, 1.0, 0.0, 1.0, 0.5, 1.0]], dtype=torch.float64)
        yield "wrow_mcol_m5", u(4, 5, 6), u(4, 6), 1, {"weight": u(4, 1, lo=0.25, hi=2.0), "mask": mk}
        mp = torch.tensor([[1.0, 0.0, -2.0], [0.25, 1.0, 0.0]], dtype=torch.float64)
        yield "mpoint_m130", u(2, 130, 3), u(2, 3), 1, {"mask": mp}
        y = u(5, 4)
        y[0, 1], y[2, 3], y[4, 0] = nan, inf, -inf
        yield "nonfinite_wcol_m8", u(5, 8, 4), y, 1, {"weight": u(4, lo=0.25, hi=2.0), "nonfinite": True}
        y = u(6, 3)
        y[1, 1], y[4, 2] = nan, -inf
        wq = u(6, 3, lo=0.25, hi=2.0)
        wq[5, 0] = 0.0
        mr = torch.ones(6, 1, dtype=torch.float64)
        mr[3, 0] = 0.0
        yield "nonfinite_wpoint_mrow_m20", u(20, 6, 3), y, 0, {"weight": wq, "mask": mr, "nonfinite": True}
        y = u(3, 2)
        y[2, 0] = nan
        yield "nonfinite_wscalar_m130", u(3, 2, 130), y, -1, {"weight": torch.tensor(1.75, dtype=torch.float64),
                                                              "nonfinite": True}
        y = u(6)
        y[1], y[4] = nan, inf
        wh = u(6, lo=0.25, hi=2.0)
        wh[2] = nan
        mh = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
        yield "mask_hides_nan_m8", u(6, 8), y, -1, {"weight": wh, "mask": mh, "nonfinite": False}
        yield "all_masked_m5", u(3, 4, 5), u(3, 4), -1, {"weight": u(3, 4, lo=0.25, hi=2.0),
                                                         "mask": torch.zeros(1, dtype=torch.float64)}
        y = torch.tensor([[nan, inf], [-inf, nan]], dtype=torch.float64)
        yield "all_nonfinite_m20", u(2, 20, 2), y, 1, {"nonfinite": True}

    for k, (name, x, y, dim, kw) in enumerate(layouts()):
        for r, red in enumerate(REDUCTIONS):
            estimator = ESTIMATORS[(k + r) % 3]
            w.case("%s_%s" % (name, estimator), "float64", x, y, dim, estimator, red, **kw)
    # the narrower types: a weight per column, a mask per row, a NaN target
    for dtype, estimator, red, m in (("float32", "almost_fair", "mean", 20), ("bfloat16", "fair", "sum", 8)):
        y = u(4, 5)
        y[2, 1] = nan
        mr = torch.tensor([[1.0], [0.0], [1.0], [1.0]], dtype=torch.float64)
        w.case("wcol_mrow_nonfinite_m%d_%s" % (m, estimator), dtype, u(4, 5, m), y, -1, estimator, red,
               weight=u(5, lo=0.25, hi=2.0), mask=mr, nonfinite=True)
    return w.count


# --- energy_score and variogram_score with weights and masks per point ------

def masked_multivariate_cases(g, gen):
    """energy_score and variogram_score with weights and masks per point (an
    event vector; variogram_score's weight per point is `point_weight`, its
    `weight` the pair weights): scoringrules' es_ensemble / vs_ensemble
    (torch backend) per point, weighted and masked in torch as
    masked_terms does for crps_ensemble (a point counts where its mask is
    nonzero and, with mask_nonfinite, every element of its observed vector
    is finite; the target of a point that does not count replaced by 0
    before it meets the score), autograd gradients for input, target and
    the weight per point; values checked against weights.md's definition
    on scoringrules' numpy scores. Layouts: a weight per column and a mask
    per row; a weight per point with a zero and NaN / infinite elements in
    observed vectors under mask_nonfinite; an event block of two axes with
    a scalar weight and a NaN; every point masked (mean NaN, gradients 0);
    each with every reduction, the estimator rotating; one float32 case."""
    nan, inf = float("nan"), float("inf")
    count = 0

    def u(*shape, lo=-2.0, hi=2.0):
        return uniform(gen, shape, lo, hi)

    def case(op, name, dtype, lay, x, y, estimator, reduction, weight=None, mask=None, nonfinite=None, pair=None,
             p=1.0, alpha=0.9):
        nonlocal count
        x, y = rounded(x, dtype), rounded(y, dtype)
        weight = None if weight is None else rounded(weight, dtype)
        mask = None if mask is None else rounded(mask, dtype)
        pair = None if pair is None else rounded(pair, dtype)
        yv = torch.movedim(y.reshape(lay.y1), lay.lo_t, -1).reshape(lay.points + (lay.D,))
        counted = torch.ones(lay.points, dtype=torch.bool)
        if mask is not None:
            counted = counted & (mask != 0).expand(lay.points)
        if nonfinite:
            counted = counted & torch.isfinite(yv).all(-1)
        xl, yl = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        wl = None if weight is None else weight.clone().requires_grad_(True)
        y_safe = torch.where(torch.isfinite(yl), yl, torch.zeros_like(yl)) if nonfinite else yl
        if op == ES_OP:
            per_point = es_torch(lay, xl, y_safe, estimator, alpha)
        else:
            per_point = vs_torch(lay, xl, y_safe, pair, p, estimator, alpha)
        check_multivariate(op, lay, xl, y_safe, pair, p, estimator, alpha, per_point)
        w = torch.ones((), dtype=torch.float64) if wl is None else wl
        w_safe = torch.where(counted, w, torch.ones_like(w))
        terms = torch.where(counted, w_safe * per_point, torch.zeros_like(per_point))
        out = masked_reduce(terms, torch.where(counted, w_safe, torch.zeros_like(w_safe)).sum(), reduction)
        check_masked(per_point.detach().numpy(), weight, counted, reduction, out)
        go = rounded(uniform(gen, out.shape, 0.5, 1.5), dtype)
        leaves = [xl, yl] + ([wl] if wl is not None else [])
        gs = torch.autograd.grad(out, leaves, go)
        assert all(torch.isfinite(t).all() for t in gs)
        if not counted.any():
            assert all((t == 0).all() for t in gs)  # a mean over nothing depends on nothing
        wname = "weight" if op == ES_OP else "point_weight"
        grads = dict(zip(["input", "target", wname], gs))
        rtol, atol = tolerances(dtype)
        mags = [out.detach()] + list(gs)
        big = max([float(t[torch.isfinite(t)].abs().max()) for t in mags if torch.isfinite(t).any()] + [1.0])
        acc_rtol = tolerances("float64" if dtype == "float64" else "float32")[0]
        atol = max(atol, acc_rtol * big * max(lay.m, lay.D if op == VS_OP else 1))
        options = {"estimator": estimator}
        options.update(lay.options())
        if estimator == "almost_fair":
            options["alpha"] = alpha
        if op == VS_OP:
            options["p"] = float(p)
        if nonfinite is not None:
            options["mask_nonfinite"] = bool(nonfinite)
        inputs = {"input": x, "target": y}
        if pair is not None:
            inputs["weight"] = pair
        if weight is not None:
            inputs[wname] = weight
        if mask is not None:
            inputs["mask"] = mask
        g.add_case("%s_masked_%s_%s_%s" % (op, name, reduction, dtype), op, dtype, inputs, out.detach(), grads=grads,
                   grad_output=go, reduction=reduction, options=options, rtol=rtol, atol=atol)
        count += 1

    def layouts():
        # name, input shape, member_dim, event_dims, keywords of case (y: a function of target's shape)
        mr = torch.tensor([[1.0], [0.0], [1.0]], dtype=torch.float64)
        yield "wcol_mrow", (3, 4, 5, 3), 1, None, {"weight": u(5, lo=0.25, hi=2.0), "mask": mr}
        wp = u(3, 5, lo=0.25, hi=2.0)
        wp[2, 2] = 0.0

        def holes(y):
            y[0, 1, 0], y[2, 3, 2], y[1, 4, 1] = nan, inf, -inf
            return y
        yield "wpoint_nonfinite", (3, 6, 5, 3), 1, None, {"weight": wp, "nonfinite": True, "y": holes}

        def hole(y):
            y[1, 2, 0] = nan
            return y
        yield "block_wscalar_nonfinite", (2, 3, 4, 5), 2, "0,1", {"weight": torch.tensor(1.5, dtype=torch.float64),
                                                                  "nonfinite": True, "y": hole}
        yield "all_masked", (3, 4, 5, 3), 1, None, {"weight": u(3, 5, lo=0.25, hi=2.0),
                                                    "mask": torch.zeros(3, 1, dtype=torch.float64)}

    for k, (name, shape, dim, ev, kw) in enumerate(layouts()):
        lay = Layout(shape, dim, ev)
        for op in (ES_OP, VS_OP):
            for r, red in enumerate(REDUCTIONS):
                estimator = ESTIMATORS[(k + r) % 3]
                args = {a: v for a, v in kw.items() if a != "y"}
                x, y = u(*shape), u(*lay.target)
                if "y" in kw:
                    y = kw["y"](y)
                # (pair weights but under the mean: variogram_score's weight and point_weight together)
                pair = _weight(gen, lay.D) if op == VS_OP and r != 1 else None
                case(op, "%s_%s" % (name, estimator), "float64", lay, x, y, estimator, red, pair=pair, **args)
    lay = Layout((4, 5, 6, 3), 1, None)
    y = u(*lay.target)
    y[2, 1, 0] = nan
    for op in (ES_OP, VS_OP):
        case(op, "wcol_mrow_nonfinite_fair", "float32", lay, u(4, 5, 6, 3), y, "fair", "mean",
             weight=u(6, lo=0.25, hi=2.0), mask=torch.tensor([[1.0], [0.0], [1.0], [1.0]], dtype=torch.float64),
             nonfinite=True)
    return count


def main(out_dir):
    gen = torch.Generator().manual_seed(20261206)
    # (HDF5's newest object format, small datasets compact, no timestamps:
    # the same cases in fewer bytes, the same bytes on every run)
    from gen_nonfinite import LAYOUT
    with golden_file(out_dir, "ensemble.h5", **LAYOUT) as g:
        w = Writer(g, gen)
        for di, dtype in enumerate(DTYPES):
            for k, estimator in enumerate(("standard", "fair", "almost_fair")):
                alpha = 0.95
                # members last ([points, m], m = 8), first ([m, 3, 4]) and in the middle ([2, m, 5])
                for dim, shape in ((-1, (6, 8)), (0, (5, 3, 4)), (1, (2, 16, 5))):
                    x = uniform(gen, shape, -2, 2)
                    ys = list(shape)
                    del ys[dim]
                    y = uniform(gen, tuple(ys), -2, 2)
                    red = REDUCTIONS[(k + di + dim) % 3]
                    w.case("dim%d_%s" % (dim, estimator), dtype, x, y, dim, estimator, alpha, red)
            # ties among members and a member on the observation
            x = torch.tensor([[1.0, 1.0, 1.0, 3.0, 0.5], [0.25, 0.25, -1.0, -1.0, 2.0]], dtype=torch.float64)
            y = torch.tensor([1.0, 0.25], dtype=torch.float64)
            for estimator in ("standard", "fair", "almost_fair"):
                w.case("ties_" + estimator, dtype, x, y, -1, estimator, 0.5, "none")
            # one member: the absolute error
            w.case("one_member", dtype, uniform(gen, (7, 1), -2, 2), uniform(gen, (7,), -2, 2), 1, "standard", 0.95,
                   REDUCTIONS[di % 3])
        # (a generator of their own: crps_ensemble's cases stay as they were)
        count = w.count + multivariate_cases(g, torch.Generator().manual_seed(20261207))
        # (and one more for the weighted and masked crps_ensemble cases)
        count += masked_cases(g, torch.Generator().manual_seed(20261208))
        # (and one more for the weighted and masked energy_score and variogram_score cases)
        count += masked_multivariate_cases(g, torch.Generator().manual_seed(20261209))
    print("wrote %d cases to %s (%d bytes)" % (count, g.path, os.path.getsize(g.path)))


if __name__ == "__main__":
    import sys
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT_DIR)
