# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""float64 NumPy references of every registered op's forward, written from
torch's documented formulas (torch.nn.functional), for the tests that run
without PyTorch. forward(op, inputs, options) -> ndarray. The ops torch
lacks from their own definitions (crps_ensemble, energy_score,
variogram_score: scoringrules' formulas; the grid losses: neuraloperator's);
energy_score's and variogram_score's gradients also analytically
(multivariate_grads). kloss's weights and masks on the element-wise losses
and the ensemble scores (docs/weights.md) from that document's definition
(masked)."""
import math

import numpy as np


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.array(loss.sum())
    return np.array(loss.mean() if loss.size else np.nan)


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _log1pexp(z):
    return np.logaddexp(0.0, z)


# The element-wise losses that take kloss's weights and masks (and the
# ensemble scores, per point: crps_ensemble's the target's elements,
# energy_score's and variogram_score's its event vectors), those of them
# that take torch 2.15's weight= (docs/weights.md), and the BCE pair, which
# keeps torch's weight and takes kloss's mask
MASKABLE = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss", "quantile_loss",
            "gaussian_nll_loss", "crps_gaussian", "crps_ensemble", "kl_div", "poisson_nll_loss", "energy_score",
            "variogram_score", "binary_cross_entropy", "binary_cross_entropy_with_logits")
TORCH_WEIGHT = ("mse_loss", "l1_loss", "huber_loss")
BCE = ("binary_cross_entropy", "binary_cross_entropy_with_logits")
# The masked means over the counted elements' count (torch's weighted
# means of these ops are over every element's)
MEAN_OVER_COUNT = ("huber_loss",) + BCE


def weight_name(op):
    """The input holding kloss's weight of op: `weight`, but variogram_score's
    `point_weight` (its `weight` is the pair weights)."""
    return "point_weight" if op == "variogram_score" else "weight"


def masked(op, inputs, options):
    """Whether call (op, inputs, options) takes kloss's weights and masks
    rather than torch's own form: a mask, mask_nonfinite, or a weight that is
    not torch 2.15's weight= (the input's shape, on mse_loss, l1_loss or
    huber_loss; any weight on gaussian_nll_loss and the others)."""
    if op not in MASKABLE:
        return False
    if inputs.get("mask") is not None or options.get("mask_nonfinite", False):
        return True
    w = inputs.get(weight_name(op))
    return w is not None and op not in BCE and (op not in TORCH_WEIGHT or np.shape(w) != np.shape(inputs["input"]))


def _unmasked_loss(op, inputs, o):
    """The op's own unreduced loss of a masked call (weight and mask left
    out): one per element (the ensemble scores: per point), NaN or infinite
    at a non-finite target."""
    plain = {k: v for k, v in inputs.items() if k not in (weight_name(op), "mask")}
    o = {k: v for k, v in o.items() if k != "mask_nonfinite"}
    with np.errstate(invalid="ignore", over="ignore"):  # (the loss at a NaN target, not taken)
        return np.asarray(forward(op, plain, dict(o, reduction="none")), dtype=np.float64)


def _counted(op, inputs, options, shape):
    """Which elements of `shape` (the unreduced output's) count: the mask's
    nonzero ones and (mask_nonfinite) those of a finite target
    (energy_score, variogram_score: a point whose every observed event
    element is finite)."""
    counted = np.ones(shape, dtype=bool)
    if inputs.get("mask") is not None:
        counted &= np.broadcast_to(np.asarray(inputs["mask"]) != 0, shape)
    if options.get("mask_nonfinite", False):
        if op in ("energy_score", "variogram_score"):
            lay = _EnsembleLayout(np.asarray(inputs["input"]), options)
            counted &= np.isfinite(lay.observations(inputs["target"])).all(-1).reshape(shape)
        else:
            counted &= np.broadcast_to(np.isfinite(inputs["target"]), shape)
    return counted


def empty_masked_mean(op, inputs, options):
    """Whether call (op, inputs, options) is a masked mean over no counted
    element: NaN, with every gradient 0 (docs/weights.md; a value that
    depends on nothing, not the derivative of the NaN)."""
    if options.get("reduction", "mean") != "mean" or not masked(op, inputs, options):
        return False
    shape = _unmasked_loss(op, inputs, options).shape
    return not _counted(op, inputs, options, shape).any()


def _masked_forward(op, inputs, o, red):
    """kloss's weights and masks (docs/weights.md): each element's loss l
    (the op's own, unreduced; the ensemble scores' per point), counted
    where the mask is nonzero and (with mask_nonfinite) the target finite
    (energy_score, variogram_score: the whole observed event vector); w l
    where counted, else 0 (not 0 * NaN); the mean over the counted elements'
    weights (huber_loss and the BCE pair: their count), NaN where nothing
    counts."""
    w = inputs.get(weight_name(op))
    loss = _unmasked_loss(op, inputs, o)
    shape = loss.shape
    counted = _counted(op, inputs, o, shape)
    # (broadcast_to refuses a weight that would grow the shape, as kloss does)
    wb = np.broadcast_to(np.asarray(1.0 if w is None else w, dtype=np.float64), shape)
    terms = np.where(counted, wb * np.where(counted, loss, 0.0), 0.0)
    if red == "none":
        return terms
    if red == "sum":
        return np.array(terms.sum())
    den = counted.sum() if op in MEAN_OVER_COUNT else np.where(counted, wb, 0.0).sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.array(terms.sum() / den)


def forward(op, inputs, options):
    o = dict(options)
    red = o.pop("reduction", "mean")
    x = inputs.get("input")
    y = inputs.get("target")
    if masked(op, inputs, o):
        return _masked_forward(op, inputs, o, red)
    if op in ("mse_loss", "l1_loss", "huber_loss") and inputs.get("weight") is not None:
        # torch 2.15's weight=: mean over the sum of the weights (huber: over the count)
        w = inputs["weight"]
        unweighted = forward(op, {"input": x, "target": y}, dict(o, reduction="none"))
        loss = np.broadcast_to(unweighted * w, unweighted.shape)
        if red == "mean" and op != "huber_loss":
            return np.array(loss.sum() / w.sum())
        return _reduce(loss, red)
    if op == "mse_loss":
        return _reduce((x - y) ** 2, red)
    if op == "l1_loss":
        return _reduce(np.abs(x - y), red)
    if op == "smooth_l1_loss":
        beta, d = o.get("beta", 1.0), np.abs(x - y)
        return _reduce(d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), red)
    if op == "huber_loss":
        delta, d = o.get("delta", 1.0), np.abs(x - y)
        return _reduce(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), red)
    if op == "quantile_loss":
        # one q for every element, or the `quantiles` input broadcast with input and target
        qs = inputs.get("quantiles")
        q, e = o.get("quantile", 0.5) if qs is None else qs, y - x
        return _reduce(np.maximum(q * e, (q - 1) * e), red)
    if op == "crps_ensemble":
        m_axis = o.get("member_dim", -1)
        xs = np.moveaxis(x, m_axis, -1)
        m = xs.shape[-1]
        est, alpha = o.get("estimator", "standard"), o.get("alpha", 0.95)
        std, fair = 1 / (2 * m * m), 1 / (2 * m * (m - 1)) if m > 1 else np.nan
        c = {"standard": std, "fair": fair, "almost_fair": alpha * fair + (1 - alpha) * std}[est]
        mae = np.abs(xs - y[..., None]).mean(-1)
        pair = np.abs(xs[..., :, None] - xs[..., None, :]).sum((-1, -2))
        return _reduce(mae - c * pair, red)
    if op in ("energy_score", "variogram_score"):
        lay = _EnsembleLayout(x, o)
        per_point = _multivariate_scores(op, lay.members(x), lay.observations(y), inputs.get("weight"), o)
        return _reduce(per_point.reshape(lay.points), red)
    if op == "crps_gaussian":
        s = inputs["std"]
        z = (y - x) / s
        cdf = 0.5 * np.vectorize(math.erfc)(-z / math.sqrt(2))
        return _reduce(s * (z * (2 * cdf - 1) + 2 * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
                            - 1 / math.sqrt(math.pi)), red)
    if op == "soft_margin_loss":
        return _reduce(_log1pexp(-y * x), red)
    if op == "binary_cross_entropy":
        w = inputs.get("weight")
        loss = -(y * np.maximum(np.log(x), -100) + (1 - y) * np.maximum(np.log1p(-x), -100))
        return _reduce(loss * (1 if w is None else w), red)
    if op == "binary_cross_entropy_with_logits":
        w, p = inputs.get("weight"), inputs.get("pos_weight")
        lw = 1.0 if p is None else 1 + (p - 1) * y
        loss = (1 - y) * x + lw * _log1pexp(-x)
        return _reduce(loss * (1 if w is None else w), red)
    if op == "kl_div":
        if o.get("log_target", False):
            loss = np.exp(y) * (y - x)
        else:
            loss = np.where(y > 0, y * (np.log(np.where(y > 0, y, 1)) - x), 0.0)
        if red == "batchmean":
            return np.array(loss.sum() / x.shape[0])
        return _reduce(loss, red)
    if op == "poisson_nll_loss":
        if o.get("log_input", True):
            loss = np.exp(x) - y * x
        else:
            loss = x - y * np.log(x + o.get("eps", 1e-8))
        if o.get("full", False):
            ys = np.where(y > 1, y, 2.0)
            loss = loss + np.where(y > 1, ys * np.log(ys) - ys + 0.5 * np.log(2 * np.pi * ys), 0.0)
        return _reduce(loss, red)
    if op == "gaussian_nll_loss":
        var = inputs["var"]
        if var.ndim == x.ndim - 1:
            var = var[..., None]
        v = np.maximum(var, o.get("eps", 1e-6))
        loss = 0.5 * (np.log(v) + (x - y) ** 2 / v)
        if o.get("full", False):
            loss = loss + 0.5 * math.log(2 * math.pi)
        # beta-NLL: times v^beta, of the var in "_beta_var" where given (a
        # factor held fixed while the var is differenced: not differentiated)
        beta = o.get("beta", 0.0)
        if beta:
            vb = o.get("_beta_var", inputs["var"])
            if vb.ndim == x.ndim - 1:
                vb = vb[..., None]
            loss = loss * np.maximum(vb, o.get("eps", 1e-6)) ** beta
        return _reduce(loss, red)
    if op in ("nll_loss", "cross_entropy", "fused_linear_cross_entropy"):
        if op == "fused_linear_cross_entropy":
            b = inputs.get("bias")
            x = x @ inputs["weight"].T + (0 if b is None else b)
            w = inputs.get("ce_weight")
        else:
            w = inputs.get("weight")
        return _class_loss(op, x, y, w, o, red, inputs.get("sample_weight"))
    if op == "hinge_embedding_loss":
        m = o.get("margin", 1.0)
        return _reduce(np.where(y == 1, x, 0.0) + np.where(y == -1, np.maximum(0, m - x), 0.0), red)
    if op == "margin_ranking_loss":
        return _reduce(np.maximum(0, -y * (inputs["input1"] - inputs["input2"]) + o.get("margin", 0.0)), red)
    if op == "triplet_margin_loss":
        p, eps = o.get("p", 2.0), o.get("eps", 1e-6)
        a, pos, neg = inputs["anchor"], inputs["positive"], inputs["negative"]

        def dist(u, v):
            return (np.abs(u - v + eps) ** p).sum(-1) ** (1 / p)
        dn = dist(a, neg)
        if o.get("swap", False):
            dn = np.minimum(dn, dist(pos, neg))
        return _reduce(np.maximum(o.get("margin", 1.0) + dist(a, pos) - dn, 0), red)
    if op == "cosine_embedding_loss":
        x1, x2 = inputs["input1"], inputs["input2"]
        eps = 1e-12
        cos = (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + eps) * ((x2 * x2).sum(-1) + eps))
        loss = np.where(y == 1, 1 - cos, np.maximum(0, cos - o.get("margin", 0.0)))
        return _reduce(loss, red)
    if op == "multi_margin_loss":
        p, m, w = o.get("p", 1), o.get("margin", 1.0), inputs.get("weight")
        n, c = x.shape
        loss = np.zeros(n)
        for i in range(n):
            t = y[i]
            for j in range(c):
                if j != t:
                    z = max(0.0, m - x[i, t] + x[i, j]) ** p
                    loss[i] += z * (1 if w is None else w[t])
        return _reduce(loss / c, red)
    if op == "multilabel_margin_loss":
        n, c = x.shape
        loss = np.zeros(n)
        for i in range(n):
            labels = []
            for t in y[i]:
                if t < 0:
                    break
                labels.append(t)
            for j in labels:
                for k in range(c):
                    if k not in labels:
                        loss[i] += max(0.0, 1 - (x[i, j] - x[i, k]))
        return _reduce(loss / c, red)
    if op == "multilabel_soft_margin_loss":
        w = inputs.get("weight")
        loss = y * _log1pexp(-x) + (1 - y) * _log1pexp(x)
        loss = (loss * (1 if w is None else w)).mean(-1)
        return _reduce(loss, red)
    if op == "ctc_loss":
        return _ctc(inputs, o, red)
    if op == "embedding":
        w = _renormed(inputs["weight"], inputs["input"], o)
        return w[inputs["input"]]
    if op == "embedding_bag":
        return _embedding_bag(inputs, o)
    if op in ("lp_loss", "h1_loss"):
        return _reduce(_grid_loss(op, x, y, o), red)
    raise KeyError(op)


def _axes(v):
    """event_dims as kloss takes it: a comma list string, or ints."""
    if isinstance(v, str):
        return [int(a) for a in v.split(",")]
    return [int(a) for a in (v if isinstance(v, (tuple, list)) else [v])]


class _EnsembleLayout:
    """energy_score's and variogram_score's geometry: input's members axis
    (member_dim) and event block (event_dims, adjacent), the points (the
    other axes, in order). members(x): [points, m, D]; observations(y):
    [points, D], the block flattened row-major; back(): their inverses."""

    def __init__(self, x, o):
        r = x.ndim
        self.md = o.get("member_dim", -2) % r
        self.ev = sorted(a % r for a in _axes(o.get("event_dims", "-1")))
        assert self.md not in self.ev and self.ev == list(range(self.ev[0], self.ev[0] + len(self.ev)))
        k = len(self.ev)
        self.x_src, self.x_dst = [self.md] + self.ev, list(range(r - 1 - k, r))
        self.ev_t = [a - 1 if a > self.md else a for a in self.ev]
        self.y_dst = list(range(r - 1 - k, r - 1))
        moved = np.moveaxis(np.empty(x.shape, dtype=np.uint8), self.x_src, self.x_dst).shape
        self.points, self.m = moved[:r - 1 - k], x.shape[self.md]
        self.D = math.prod(x.shape[a] for a in self.ev)
        self.x_moved, self.y_moved = moved, moved[:r - 1 - k] + moved[r - k:]

    def members(self, x):
        return np.moveaxis(np.asarray(x, dtype=np.float64), self.x_src, self.x_dst).reshape(-1, self.m, self.D)

    def observations(self, y):
        return np.moveaxis(np.asarray(y, dtype=np.float64), self.ev_t, self.y_dst).reshape(-1, self.D)

    def members_back(self, gx):
        return np.moveaxis(gx.reshape(self.x_moved), self.x_dst, self.x_src)

    def observations_back(self, gy):
        return np.moveaxis(gy.reshape(self.y_moved), self.y_dst, self.ev_t)


def _estimator_terms(o, m):
    """(c, k): the energy score's spread coefficient and the variogram's
    weight of the fair correction, of the estimator in options o."""
    est, alpha = o.get("estimator", "standard"), o.get("alpha", 0.95)
    std, fair = 1 / (2 * m * m), (1 / (2 * m * (m - 1)) if m > 1 else np.nan)
    c = {"standard": std, "fair": fair, "almost_fair": alpha * fair + (1 - alpha) * std}[est]
    k = {"standard": 0.0, "fair": 1.0, "almost_fair": alpha}[est]
    return c, k


def _multivariate_scores(op, xs, ys, w, o):
    """Per point: energy score (1/m) sum_i ||x_i - y|| - c sum_ij ||x_i - x_j||;
    variogram score sum_ab w_ab ((o_ab - mu_ab)^2 - k s_ab^2 / m), o_ab =
    |y_a - y_b|^p, f_iab = |x_ia - x_ib|^p, mu and s^2 (unbiased) the
    members' mean and variance of f. xs [P, m, D], ys [P, D]."""
    m = xs.shape[1]
    c, k = _estimator_terms(o, m)
    if op == "energy_score":
        err = np.sqrt(((xs - ys[:, None, :]) ** 2).sum(-1)).mean(-1)
        spread = np.sqrt(((xs[:, :, None, :] - xs[:, None, :, :]) ** 2).sum(-1)).sum((-1, -2))
        return err - c * spread
    p = o.get("p", 0.5)
    w = np.ones((xs.shape[2],) * 2) if w is None else np.asarray(w, dtype=np.float64)
    f = np.abs(xs[:, :, :, None] - xs[:, :, None, :]) ** p   # [P, m, D, D]
    ob = np.abs(ys[:, :, None] - ys[:, None, :]) ** p         # [P, D, D]
    mu = f.mean(1)
    s2 = ((f - mu[:, None]) ** 2).sum(1) / (m - 1) if m > 1 else np.zeros_like(mu)
    return (w * ((ob - mu) ** 2 - k * s2 / m)).sum((-1, -2))


def _unit(d):
    """d / ||d|| over the last axis, 0 where the norm is 0."""
    n = np.sqrt((d * d).sum(-1, keepdims=True))
    return np.where(n > 0, d / np.where(n > 0, n, 1.0), 0.0)


def _dpow(d, p):
    """d/dd |d|^p = p |d|^(p-1) sgn(d), 0 at d = 0 (kloss's convention)."""
    a = np.abs(d)
    return np.where(a > 0, p * np.where(a > 0, a, 1.0) ** (p - 1) * np.sign(d), 0.0)


def multivariate_grads(op, inputs, options, grad_output):
    """The analytic gradients of energy_score / variogram_score (float64):
    {"input": ..., "target": ...}, with grad_output the output's shape
    (None: ones). Energy: d/dx_k = u_k/m - 2c sum_l u_kl, d/dy = -(1/m)
    sum_i u_i, u the unit vectors of x_k - y and x_k - x_l (0 for a zero
    vector). Variogram: with F_iab = d score / d f_iab = w_ab (-2(o_ab -
    mu_ab)/m - 2k(f_iab - mu_ab)/(m(m-1))) and O_ab = 2 w_ab (o_ab - mu_ab),
    d/dx_ia = sum_b (F_iab + F_iba) p|d|^(p-1) sgn(d), d = x_ia - x_ib, and
    d/dy_a = sum_b (O_ab + O_ba) p|e|^(p-1) sgn(e), e = y_a - y_b (0 at a
    zero difference)."""
    o = dict(options)
    red = o.pop("reduction", "mean")
    x, y = inputs["input"], inputs["target"]
    lay = _EnsembleLayout(np.asarray(x), o)
    xs, ys = lay.members(x), lay.observations(y)
    P, m, D = xs.shape
    go = np.ones(lay.points if red == "none" else ()) if grad_output is None else np.asarray(grad_output, float)
    up = go.reshape(-1) if red == "none" else np.full(P, float(go) / (P if red == "mean" else 1))
    c, k = _estimator_terms(o, m)
    if op == "energy_score":
        uy = _unit(xs - ys[:, None, :])                              # [P, m, D]
        ux = _unit(xs[:, :, None, :] - xs[:, None, :, :])           # [P, m, m, D]
        gx = uy / m - 2 * c * ux.sum(2)
        gy = -uy.sum(1) / m
    else:
        p = o.get("p", 0.5)
        w = np.ones((D, D)) if inputs.get("weight") is None else np.asarray(inputs["weight"], dtype=np.float64)
        dx = xs[:, :, :, None] - xs[:, :, None, :]                 # [P, m, D, D]
        dy = ys[:, :, None] - ys[:, None, :]
        f, ob = np.abs(dx) ** p, np.abs(dy) ** p
        mu = f.mean(1)
        F = w * (-2 * (ob - mu)[:, None] / m - (2 * k * (f - mu[:, None]) / (m * (m - 1)) if m > 1 else 0.0))
        O = 2 * w * (ob - mu)
        gx = ((F + np.swapaxes(F, -1, -2)) * _dpow(dx, p)).sum(-1)
        gy = ((O + np.swapaxes(O, -1, -2)) * _dpow(dy, p)).sum(-1)
    return {"input": lay.members_back(gx * up[:, None, None]),
            "target": lay.observations_back(gy * up[:, None])}


def _periodic_axes(o, d):
    words = [w.strip().lower() in ("true", "1") for w in str(o.get("periodic", "true")).split(",")]
    return words * d if len(words) == 1 else words


def _grid_derivative(f, axis, h, periodic):
    """First derivative of f along `axis` (negative: a grid axis), step h:
    periodic central differences, or central inside and third-order
    one-sided at the two ends."""
    if periodic:
        return (np.roll(f, -1, axis) - np.roll(f, 1, axis)) / (2 * h)
    g = np.moveaxis(f, axis, -1)
    d = np.empty_like(g)
    d[..., 1:-1] = (g[..., 2:] - g[..., :-2]) / (2 * h)
    d[..., 0] = (-11 * g[..., 0] + 18 * g[..., 1] - 9 * g[..., 2] + 2 * g[..., 3]) / (6 * h)
    d[..., -1] = (-2 * g[..., -4] + 9 * g[..., -3] - 18 * g[..., -2] + 11 * g[..., -1]) / (6 * h)
    return np.moveaxis(d, -1, axis)


def _grid_loss(op, x, y, o):
    """lp_loss / h1_loss per function (neuraloperator's LpLoss, H1Loss):
    the last grid_ndim axes are the grid, h_k = measure / n_k."""
    d = o.get("grid_ndim", 1)
    p = 2.0 if op == "h1_loss" else o.get("p", 2.0)
    relative, root = o.get("relative", True), o.get("root", True)
    measure, eps = o.get("measure", 1.0), o.get("eps", 1e-8)
    grid = tuple(range(-d, 0))
    h = [measure / n for n in x.shape[x.ndim - d:]]
    e = x - y
    if op == "lp_loss":
        a = (np.abs(e) ** p).sum(grid)
        b = (np.abs(y) ** p).sum(grid)
    else:
        per = _periodic_axes(o, d)
        a, b = (e * e).sum(grid), (y * y).sum(grid)
        for k in range(d):
            de = _grid_derivative(e, k - d, h[k], per[k])
            dy = _grid_derivative(y, k - d, h[k], per[k])
            a = a + (de * de).sum(grid)
            b = b + (dy * dy).sum(grid)
    take_root = root and p != 1
    if relative:
        return a ** (1 / p) / (b ** (1 / p) + eps) if take_root else a / (b + eps)
    w = math.prod(h)
    return (w * a) ** (1 / p) if take_root else w * a


def _class_loss(op, x, y, w, o, red, sw=None):
    """nll_loss / cross_entropy: torch's, and kloss's sample_weight sw (a
    weight per row, the rows' shape): each row's loss times its weight, the
    mean over the counted rows' sample weight times class weight (class
    indices), over the sample weights' sum (class probabilities)."""
    if x.ndim == 1:  # unbatched [C]: one row (a scalar target / sample weight, or probabilities [C])
        out = _class_loss(op, x[None], np.reshape(y, (1,) + np.shape(y)), w, o, red,
                          None if sw is None else np.reshape(sw, (1,)))
        return np.reshape(out, ()) if red == "none" else out
    ignore = o.get("ignore_index", -100)
    eps = o.get("label_smoothing", 0.0)
    c = x.shape[1]
    # [N, C, d...] -> [M, C]
    xm = np.moveaxis(x, 1, -1).reshape(-1, c)
    logp = xm if op == "nll_loss" else _log_softmax(xm, 1)
    wv = np.ones(c) if w is None else w
    if y.dtype.kind == "f":  # probabilities
        ym = np.moveaxis(y, 1, -1).reshape(-1, c)
        ym = (1 - eps) * ym + eps / c
        loss = -(logp * ym * wv).sum(1)
        sv = np.ones(loss.shape[0]) if sw is None else np.asarray(sw, dtype=np.float64).reshape(-1)
        loss = loss * sv
        out = loss.reshape(np.moveaxis(x, 1, -1).shape[:-1])
        return np.array(loss.sum() / sv.sum()) if red == "mean" else _reduce(out, red)
    t = y.reshape(-1)
    keep = t != ignore
    ts = np.where(keep, t, 0)
    wt = np.where(keep, wv[ts], 0.0)
    nll = -logp[np.arange(len(t)), ts] * wt
    smooth = np.where(keep, -(logp * wv).sum(1), 0.0)
    shape = y.shape
    sv = np.ones(len(t)) if sw is None else np.asarray(sw, dtype=np.float64).reshape(-1)
    rows = ((1 - eps) * nll + eps / c * smooth) * sv
    if red == "none":
        return rows.reshape(shape)
    if red == "sum":
        return np.array(rows.sum())
    denom = (wt * sv).sum()
    return np.array(rows.sum() / denom)


def _ctc(inputs, o, red):
    lp, targets = inputs["log_probs"], inputs["targets"]
    il, tl = inputs["input_lengths"], inputs["target_lengths"]
    blank = o.get("blank", 0)
    n = lp.shape[1]
    losses = np.zeros(n)
    for b in range(n):
        tgt = targets[b, :tl[b]] if targets.ndim == 2 else targets[sum(tl[:b]):sum(tl[:b]) + tl[b]]
        ext = [blank]
        for s in tgt:
            ext += [s, blank]
        S, T = len(ext), il[b]
        alpha = np.full(S, -np.inf)
        alpha[0] = lp[0, b, blank]
        if S > 1:
            alpha[1] = lp[0, b, ext[1]]
        for t in range(1, T):
            new = np.full(S, -np.inf)
            for s in range(S):
                terms = [alpha[s]]
                if s >= 1:
                    terms.append(alpha[s - 1])
                if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                    terms.append(alpha[s - 2])
                new[s] = np.logaddexp.reduce(terms) + lp[t, b, ext[s]]
            alpha = new
        ll = np.logaddexp(alpha[-1], alpha[-2]) if S > 1 else alpha[-1]
        losses[b] = -ll
    if o.get("zero_infinity", False):
        losses = np.where(np.isinf(losses), 0.0, losses)
    if red == "none":
        return losses
    if red == "sum":
        return np.array(losses.sum())
    return np.array((losses / np.maximum(tl, 1)).mean())


def _renormed(w, idx, o):
    w = w.copy()
    if o.get("max_norm") is not None:
        p = o.get("norm_type", 2.0)
        for r in np.unique(idx):
            norm = (np.abs(w[r]) ** p).sum() ** (1 / p)
            if norm > o["max_norm"]:
                w[r] *= o["max_norm"] / (norm + 1e-7)
    return w


def _embedding_bag(inputs, o):
    idx, w = inputs["input"], inputs["weight"]
    w = _renormed(w, idx, o)
    psw = inputs.get("per_sample_weights")
    mode = o.get("mode", "mean")
    pad = o.get("padding_idx")
    if pad is not None and pad < 0:
        pad += w.shape[0]
    if idx.ndim == 2:
        bags = [(r * idx.shape[1], (r + 1) * idx.shape[1]) for r in range(idx.shape[0])]
        flat = idx.reshape(-1)
        psw = None if psw is None else psw.reshape(-1)
    else:
        flat = idx
        off = list(inputs["offsets"])
        if o.get("include_last_offset", False):
            bags = list(zip(off[:-1], off[1:]))
        else:
            bags = list(zip(off, off[1:] + [len(flat)]))
    out = np.zeros((len(bags), w.shape[1]))
    for b, (lo, hi) in enumerate(bags):
        rows = [(k, flat[k]) for k in range(lo, hi) if flat[k] != pad]
        if not rows:
            continue
        vals = np.array([w[r] * (1 if psw is None else psw[k]) for k, r in rows])
        out[b] = vals.max(0) if mode == "max" else vals.sum(0) / (len(rows) if mode == "mean" else 1)
    return out


def numeric_grads(op, inputs, options, grad_output, names, h=1e-6):
    """Central differences of sum(grad_output * forward(...)) with respect to
    each input in `names` (float64), as torch's autograd defines them where
    that differs from the plain derivative: an embedding's padding row gets
    no gradient, max_norm's renormalisation is not differentiated, kl_div's
    target gradient is NaN at a zero target (xlogy's y / y), and
    poisson_nll_loss's with `full` is NaN at a target <= 0 and the one
    without the Stirling term at a target <= 1, where that term is masked
    (torch multiplies its derivative by the mask's 0), gaussian_nll_loss's
    beta factor (beta-NLL) is held fixed, and a non-finite target under
    mask_nonfinite (an element that does not count) gets gradient 0, and
    so does every input of a masked mean over no counted element (NaN)."""
    opts = dict(options)
    if op in ("embedding", "embedding_bag"):
        opts.pop("max_norm", None)
    if op == "gaussian_nll_loss" and opts.get("beta"):
        opts["_beta_var"] = np.asarray(inputs["var"], dtype=np.float64)  # beta-NLL's factor is not differentiated
    g = np.asarray(grad_output, dtype=np.float64)
    out = {}
    if empty_masked_mean(op, inputs, options):
        # a masked mean over nothing: NaN however stepped; its gradients are 0 (kloss's, docs/weights.md)
        return {name: np.zeros(np.shape(inputs[name])) for name in names}
    for name in names:
        base = np.array(inputs[name], dtype=np.float64)
        grad = np.zeros_like(base)
        for i in np.ndindex(*base.shape):
            if not np.isfinite(base[i]) and options.get("mask_nonfinite", False):
                # a NaN or infinite target under mask_nonfinite: an element that does not
                # count, however it is stepped (it stays non-finite): gradient 0, as kloss's
                continue
            step = h * max(1.0, abs(base[i]))
            vals = []
            for s in (step, -step):
                x = base.copy()
                x[i] += s
                args = dict(inputs)
                args[name] = x
                vals.append(float((g * forward(op, args, opts)).sum()))
            grad[i] = (vals[0] - vals[1]) / (2 * step)
        out[name] = grad
    if op == "embedding" and options.get("padding_idx") is not None and "weight" in out:
        out["weight"][options["padding_idx"]] = 0.0
    if "target" in out and (op == "kl_div" and not options.get("log_target", False)
                            or op == "poisson_nll_loss" and options.get("full", False)):
        y = np.asarray(inputs["target"], dtype=np.float64)
        if op == "kl_div":
            out["target"] = np.where(y == 0, np.nan, out["target"])
        else:
            plain = numeric_grads(op, inputs, dict(options, full=False), grad_output, ["target"], h)["target"]
            out["target"] = np.where(y <= 0, np.nan, np.where(y <= 1, plain, out["target"]))
    return out
