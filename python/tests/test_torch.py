# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Against PyTorch, when it is installed: every op's forward and every
gradient from kloss's NumPy functions against torch.nn.functional and
autograd (float64), kloss.torch's autograd functions under
torch.autograd.gradcheck, golden cases built by kloss.golden.from_torch
run through kloss-validate, and torch's keyword defaults against kloss's."""
import inspect
import math
import warnings

import numpy as np
import pytest

import kloss
import reference
from cases import Call, cases

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the PyTorch comparisons, gradcheck "
                                            "and from_torch tests are skipped")
F = torch.nn.functional
import kloss.torch as kt  # noqa: E402
import kloss.golden as kg  # noqa: E402

CASES = cases()
IDS = [c.id for c in CASES]


def _tensors(c, requires_grad=False):
    info = kloss.op_info(c.op)
    out = {}
    for k, v in c.inputs.items():
        t = torch.from_numpy(np.array(v))
        if t.is_floating_point() and requires_grad and k in info.differentiable:
            t.requires_grad_(True)
        out[k] = t
    return out


def _reduce(loss, reduction):
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


_GRID_OPS = ("lp_loss", "h1_loss")
_NEURALOP = []


def _neuraloperator():
    """neuraloperator's losses module (>= 2.0: H1Loss's periodic_in_*,
    third-order one-sided ends), or None: the grid losses are then checked
    against _grid_composition alone (CI need not have neuraloperator)."""
    if not _NEURALOP:
        mod = None
        try:
            with warnings.catch_warnings():  # (its import sets a global warnings filter)
                import neuralop
                from neuralop.losses import data_losses
            if int(neuralop.__version__.split(".")[0]) >= 2:
                mod = data_losses
        except Exception:  # not installed, or an import that fails
            pass
        _NEURALOP.append(mod)
    return _NEURALOP[0]


def _grid_derivative(f, dim, h, periodic):
    """neuraloperator's FiniteDiff first derivative along `dim` (negative)."""
    if periodic:
        return (torch.roll(f, -1, dim) - torch.roll(f, 1, dim)) / (2 * h)
    g = f.movedim(dim, -1)
    inner = (g[..., 2:] - g[..., :-2]) / (2 * h)
    first = (-11 * g[..., :1] + 18 * g[..., 1:2] - 9 * g[..., 2:3] + 2 * g[..., 3:4]) / (6 * h)
    last = (-2 * g[..., -4:-3] + 9 * g[..., -3:-2] - 18 * g[..., -2:-1] + 11 * g[..., -1:]) / (6 * h)
    return torch.cat([first, inner, last], -1).movedim(-1, dim)


def _grid_periodic(o, d):
    words = [w.strip().lower() in ("true", "1") for w in str(o.get("periodic", "true")).split(",")]
    return words * d if len(words) == 1 else words


def _grid_composition(c, x, y):
    """lp_loss / h1_loss as torch operations, per function, unreduced:
    neuraloperator's LpLoss / H1Loss formulas written out."""
    o = c.options
    d = o.get("grid_ndim", 1)
    p = 2.0 if c.op == "h1_loss" else o.get("p", 2.0)
    relative, take_root = o.get("relative", True), o.get("root", True) and p != 1
    eps, h = o.get("eps", 1e-8), [o.get("measure", 1.0) / n for n in x.shape[x.dim() - d:]]
    grid = tuple(range(-d, 0))
    e = x - y
    if c.op == "lp_loss":
        a, b = (e.abs() ** p).sum(grid), (y.abs() ** p).sum(grid)
    else:
        a, b = (e * e).sum(grid), (y * y).sum(grid)
        for k, periodic in enumerate(_grid_periodic(o, d)[:d]):
            de, dy = (_grid_derivative(f, k - d, h[k], periodic) for f in (e, y))
            a, b = a + (de * de).sum(grid), b + (dy * dy).sum(grid)
    if relative:
        return a ** (1 / p) / (b ** (1 / p) + eps) if take_root else a / (b + eps)
    w = math.prod(h)
    return (w * a) ** (1 / p) if take_root else w * a


def _grid_neuraloperator(c, x, y, nol):
    """The call through neuraloperator's LpLoss / H1Loss (their __call__ is
    .rel; .abs is the absolute norm); reduction none as one call per
    function (neuraloperator reduces always)."""
    o = dict(c.options)
    red, d = o.get("reduction", "mean"), o.get("grid_ndim", 1)
    kw = dict(d=d, measure=float(o.get("measure", 1.0)), eps=o.get("eps", 1e-8),
              reduction="sum" if red == "none" else red)
    if c.op == "lp_loss":
        loss = nol.LpLoss(p=o.get("p", 2.0), **kw)
    else:
        per = _grid_periodic(o, d) + [True] * 3
        loss = nol.H1Loss(periodic_in_x=per[0], periodic_in_y=per[1], periodic_in_z=per[2], **kw)
    fn = loss.rel if o.get("relative", True) else loss.abs
    take_root = o.get("root", True)
    if red != "none":
        return fn(x, y, take_root=take_root)
    lead = x.shape[:x.dim() - d]
    xs, ys = x.reshape((-1,) + x.shape[x.dim() - d:]), y.reshape((-1,) + y.shape[y.dim() - d:])
    return torch.stack([fn(xs[i], ys[i], take_root=take_root) for i in range(xs.shape[0])]).reshape(lead)


def grid_reference(c, x, y):
    """lp_loss / h1_loss: neuraloperator's when it is installed, else the
    torch composition of the same formulas."""
    nol = _neuraloperator()
    if nol is not None:
        return _grid_neuraloperator(c, x, y, nol)
    return _reduce(_grid_composition(c, x, y), c.options.get("reduction", "mean"))


_MULTIVARIATE = ("energy_score", "variogram_score")
_SCORINGRULES = []


def _scoringrules():
    """scoringrules (its torch backend), or None: energy_score and
    variogram_score are then checked against _multivariate_composition
    alone (CI need not have scoringrules)."""
    if not _SCORINGRULES:
        try:
            import scoringrules
            mod = scoringrules
        except Exception:  # not installed, or an import that fails
            mod = None
        _SCORINGRULES.append(mod)
    return _SCORINGRULES[0]


def _multivariate_flat(c, x, y):
    """x as [points..., m, D], y as [points..., D]: the members' axis and
    the event block (flattened row-major, as kloss and the weight index
    it) last, as scoringrules' m_axis=-2, v_axis=-1 take them."""
    lay = reference._EnsembleLayout(x.detach().numpy(), c.options)
    xf = x.movedim(lay.x_src, lay.x_dst).reshape(lay.points + (lay.m, lay.D))
    yf = y.movedim(lay.ev_t, lay.y_dst).reshape(lay.points + (lay.D,))
    return xf, yf


def _estimator_mix(fn, o):
    """fn(scoringrules' estimator name) under kloss's estimator option."""
    est, alpha = o.get("estimator", "standard"), o.get("alpha", 0.95)
    if est == "almost_fair":
        return alpha * fn("fair") + (1 - alpha) * fn("nrg")
    return fn({"standard": "nrg", "fair": "fair"}[est])


def _multivariate_scoringrules(c, args, sr):
    """Per point, scoringrules' es_ensemble / vs_ensemble (torch backend)."""
    xf, yf = _multivariate_flat(c, args["input"], args["target"])
    if c.op == "energy_score":
        return _estimator_mix(lambda e: sr.es_ensemble(yf, xf, -2, -1, estimator=e, backend="torch"), c.options)
    w = args.get("weight")
    return _estimator_mix(lambda e: sr.vs_ensemble(yf, xf, w, -2, -1, p=c.options.get("p", 0.5), estimator=e,
                                                   backend="torch"), c.options)


def _multivariate_composition(c, args):
    """Per point, scoringrules' formulas as torch operations, with |d|^p
    taken as 0 with gradient 0 at d = 0 (kloss's convention; autograd's
    through abs() ** p is NaN there for p < 1, and every variogram has the
    zero differences of its diagonal)."""
    xf, yf = _multivariate_flat(c, args["input"], args["target"])
    m = xf.shape[-2]
    if c.op == "energy_score":
        err = (xf - yf.unsqueeze(-2)).norm(dim=-1).sum(-1) / m
        spread = (xf.unsqueeze(-2) - xf.unsqueeze(-3)).norm(dim=-1).sum((-2, -1))
        return _estimator_mix(lambda e: err - 0.5 * spread / (m * m if e == "nrg" else m * (m - 1)), c.options)
    p = c.options.get("p", 0.5)
    w = args.get("weight")
    w = torch.ones(yf.shape[-1], yf.shape[-1], dtype=yf.dtype) if w is None else w

    def powabs(d):
        zero = d == 0
        return torch.where(zero, torch.zeros_like(d), torch.where(zero, torch.ones_like(d), d).abs() ** p)
    f = powabs(xf.unsqueeze(-1) - xf.unsqueeze(-2))   # [..., m, D, D]
    o = powabs(yf.unsqueeze(-1) - yf.unsqueeze(-2))   # [..., D, D]

    def score(e):
        if e == "nrg":
            return (w * (o - f.mean(-3)) ** 2).sum((-2, -1))
        e1 = (w * (f - o.unsqueeze(-3)) ** 2).sum((-2, -1)).mean(-1)
        e2 = (w * (f.unsqueeze(-3) - f.unsqueeze(-4)) ** 2).sum((-2, -1)).sum((-2, -1)) / (m * (m - 1))
        return e1 - 0.5 * e2
    return _estimator_mix(score, c.options)


def _multivariate_points(c, args):
    """energy_score / variogram_score per point: scoringrules' (torch
    backend) when it is installed, else the composition; the composition
    also for a variogram of p < 1, where scoringrules' autograd is NaN."""
    sr = _scoringrules()
    if sr is not None and not (c.op == "variogram_score" and c.options.get("p", 0.5) < 1):
        return _multivariate_scoringrules(c, args, sr)
    return _multivariate_composition(c, args)


def multivariate_reference(c, args):
    """energy_score / variogram_score, reduced."""
    return _reduce(_multivariate_points(c, args), c.options.get("reduction", "mean"))


def masked_multivariate_reference(c, args):
    """kloss's weights and masks on energy_score / variogram_score
    (docs/weights.md) as torch operations: a point (an event vector) counts
    where the mask is nonzero and (mask_nonfinite) every element of its
    observed vector is finite; w times its score where it counts, else 0;
    the mean over the counted points' weights (`point_weight` for
    variogram_score). Non-finite target elements are replaced by 0
    (torch.where) before the scores are taken: their points do not count,
    and no NaN reaches a gradient as 0 * NaN."""
    o = dict(c.options)
    red = o.pop("reduction", "mean")
    nonfinite = o.pop("mask_nonfinite", False)
    w, mk = args.get(reference.weight_name(c.op)), args.get("mask")
    y = args["target"]
    _, yf = _multivariate_flat(c, args["input"], y)
    counted = torch.ones(yf.shape[:-1], dtype=torch.bool)
    if mk is not None:
        counted = counted & (mk != 0)
    if nonfinite:
        counted = counted & torch.isfinite(yf).all(-1)
        y = torch.where(torch.isfinite(y), y, y.new_zeros(()))
    score = _multivariate_points(c, dict(args, target=y))
    terms = torch.where(counted, score if w is None else w * score, score.new_zeros(()))
    if red != "mean":
        return _reduce(terms, red)
    if w is None:
        return terms.sum() / counted.sum()
    return terms.sum() / torch.where(counted, w.expand(counted.shape), w.new_zeros(())).sum()


def _crps_gaussian_score(x, y, s):
    """crps_gaussian per element (broadcast): PhysicsNeMo's closed form."""
    z = (y - x) / s
    cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2)))
    pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return s * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))


def _crps_ensemble_score(x, y, o):
    """crps_ensemble per point (the target's elements; input's members on
    its axis member_dim): the pairwise (energy) form, as scoringrules'
    "nrg" and anemoi's, under the estimator of options o."""
    x = torch.movedim(x, o.get("member_dim", -1), -1)
    m = x.shape[-1]
    std, fair = 1 / (2 * m * m), 1 / (2 * m * (m - 1))
    a = o.get("alpha", 0.95)
    cf = {"standard": std, "fair": fair, "almost_fair": a * fair + (1 - a) * std}[o.get("estimator", "standard")]
    mae = (x - y[..., None]).abs().mean(-1)
    pair = (x[..., :, None] - x[..., None, :]).abs().sum((-1, -2))
    return mae - cf * pair


def _masked_element_loss(op, o, x, y, var):
    """The unweighted per-element loss of an element-wise op, x and y of
    the output's shape (var broadcasting to it; crps_gaussian's std): torch's
    own function unreduced (kl_div's and poisson_nll_loss's with their
    options), quantile_loss's torch.max form,
    gaussian_nll_loss's formula (its var clamped at eps, times the clamped
    var^beta, detached, for beta-NLL), the CRPS references; crps_ensemble's
    per point (x: input, with its members' axis; y: the points)."""
    if op == "crps_ensemble":
        return _crps_ensemble_score(x, y, o)
    if op == "crps_gaussian":
        return _crps_gaussian_score(x, y, var)
    if op == "quantile_loss":
        q, e = o.get("quantile", 0.5), y - x
        return torch.max(q * e, (q - 1) * e)
    if op == "gaussian_nll_loss":
        v = var.clamp(min=o.get("eps", 1e-6))
        loss = 0.5 * (v.log() + (x - y) ** 2 / v)
        if o.get("full", False):
            loss = loss + 0.5 * math.log(2 * math.pi)
        return loss * v.detach() ** o["beta"] if o.get("beta") else loss
    # smooth_l1_loss's, huber_loss's, kl_div's, poisson_nll_loss's options;
    # binary_cross_entropy_with_logits's pos_weight
    extra = {k: o[k] for k in ("beta", "delta", "log_target", "log_input", "full", "eps", "pos_weight") if k in o}
    return getattr(F, op)(x, y, reduction="none", **extra)


def masked_reference(c, args):
    """kloss's weights and masks (docs/weights.md) as torch operations: an
    element (crps_ensemble: a point, an element of the target) counts where
    the mask is nonzero and (mask_nonfinite) the target finite; w l where it
    counts, else 0; the mean over the counted elements' weights (huber_loss:
    their count). A target that does not count is replaced by 0
    (torch.where) before the loss is taken, so that its NaN reaches neither
    the value nor, as 0 * NaN, a gradient: autograd then gives such an
    element exactly 0, and a mean over nothing is NaN with zero gradients."""
    o = dict(c.options)
    red = o.pop("reduction", "mean")
    x, y, w, mk = (args.get(k) for k in ("input", "target", "weight", "mask"))
    var = args.get("std" if c.op == "crps_gaussian" else "var")
    if c.op == "gaussian_nll_loss" and var.dim() == x.dim() - 1:
        var = var[..., None]  # (torch's rule: input's shape without the last dimension)
    if c.op == "crps_ensemble":
        shape = y.shape  # the points (input has the members' axis besides)
    else:
        shape = torch.broadcast_shapes(x.shape, y.shape, *(() if var is None else (var.shape,)))
    counted = torch.ones(shape, dtype=torch.bool)
    if mk is not None:
        counted = counted & (mk != 0)
    if o.pop("mask_nonfinite", False):
        counted = counted & torch.isfinite(y)
    y = torch.where(counted, y, y.new_zeros(()))
    if args.get("pos_weight") is not None:
        o["pos_weight"] = args["pos_weight"]
    loss = _masked_element_loss(c.op, o, x if c.op == "crps_ensemble" else x.expand(shape), y, var)
    terms = torch.where(counted, loss if w is None else w * loss, loss.new_zeros(()))
    if red != "mean":
        return _reduce(terms, red)
    if w is None or c.op in reference.MEAN_OVER_COUNT:
        return terms.sum() / counted.sum()
    return terms.sum() / torch.where(counted, w.expand(shape), w.new_zeros(())).sum()


def sample_weighted_reference(c, tensors):
    """kloss's sample_weight on cross_entropy / nll_loss (a weight per row)
    as torch operations: torch's unreduced loss times the row's weight,
    summed; the mean over the counted rows' sample weight times class
    weight (class indices), over the sample weights' sum (class
    probabilities)."""
    o = dict(c.options)
    red = o.pop("reduction", "mean")
    args = dict(tensors)
    s = args.pop("sample_weight")
    terms = getattr(F, c.op)(**args, **o, reduction="none") * s
    if red != "mean":
        return _reduce(terms, red)
    t = args["target"]
    if t.is_floating_point():
        return terms.sum() / s.sum()
    keep = t != o.get("ignore_index", -100)
    w = args.get("weight")
    wt = torch.ones_like(s) if w is None else w[torch.where(keep, t, torch.zeros_like(t))]
    return terms.sum() / torch.where(keep, s * wt, torch.zeros_like(s)).sum()


def torch_reference(c, tensors):
    """torch's value of call c (fused_linear_cross_entropy composed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's 'mean', broadcasting
        # torch's class-index losses take int64 (kloss also int32)
        tensors = {k: (t if t.is_floating_point() else t.long()) for k, t in tensors.items()}
        if reference.masked(c.op, c.inputs, c.options):  # kloss's weights and masks (not torch's weight=)
            if c.op in _MULTIVARIATE:
                return masked_multivariate_reference(c, tensors)
            return masked_reference(c, tensors)
        if "sample_weight" in tensors:  # kloss's weight per row (cross_entropy, nll_loss)
            return sample_weighted_reference(c, tensors)
        if c.op == "fused_linear_cross_entropy":
            logits = F.linear(tensors["input"], tensors["weight"], tensors.get("bias"))
            return F.cross_entropy(logits, tensors["target"], weight=tensors.get("ce_weight"), **c.options)
        args = dict(tensors)
        if c.op == "gaussian_nll_loss" and c.options.get("beta"):
            # beta-NLL (not in torch): torch's terms times var^beta, detached
            o = dict(c.options)
            beta, red = o.pop("beta"), o.pop("reduction", "mean")
            terms = F.gaussian_nll_loss(**args, **o, reduction="none")
            var = args["var"].detach()
            var = var[..., None] if var.dim() == args["input"].dim() - 1 else var
            terms = terms * var.clamp(min=o.get("eps", 1e-6)) ** beta
            return terms.mean() if red == "mean" else terms.sum() if red == "sum" else terms
        if c.op == "quantile_loss":  # neuraloperator's form; `quantiles`: one q per element, broadcast
            o = dict(c.options)
            q, red = o.pop("quantile", 0.5), o.pop("reduction", "mean")
            q = args.get("quantiles", q)
            e = args["target"] - args["input"]
            return _reduce(torch.max(q * e, (q - 1) * e), red)
        if c.op == "crps_gaussian":  # PhysicsNeMo's closed form
            return _reduce(_crps_gaussian_score(args["input"], args["target"], args["std"]),
                           c.options.get("reduction", "mean"))
        if c.op == "crps_ensemble":  # the pairwise (energy) form, as scoringrules' "nrg" and anemoi
            return _reduce(_crps_ensemble_score(args["input"], args["target"], c.options),
                           c.options.get("reduction", "mean"))
        if c.op in _MULTIVARIATE:  # scoringrules' es_ensemble / vs_ensemble
            return multivariate_reference(c, args)
        if c.op in _GRID_OPS:  # neuraloperator's LpLoss / H1Loss
            return grid_reference(c, args["input"], args["target"])
        if c.op == "embedding" and "max_norm" in c.options:
            args["weight"] = args["weight"].clone()  # torch renormalises the weight in place
        return getattr(F, c.op)(**args, **c.options)


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_forward_and_gradients_match_torch(c):
    tensors = _tensors(c, requires_grad=True)
    want = torch_reference(c, tensors)
    got = getattr(kloss, c.op)(**c.inputs, **c.options)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    # (cross_entropy's target is differentiable where it holds probabilities)
    diff = [k for k in kloss.op_info(c.op).differentiable if k in tensors and tensors[k].is_floating_point()]
    go = torch.from_numpy(np.random.default_rng(3).uniform(0.5, 1.5, tuple(want.shape)))
    want_grads = torch.autograd.grad(want, [tensors[k] for k in diff], go, allow_unused=True)
    grads = getattr(kloss, c.op + "_backward")(go.numpy(), **c.inputs, **c.options)
    for k, w in zip(diff, want_grads):
        w = torch.zeros_like(tensors[k]) if w is None else w
        np.testing.assert_allclose(getattr(grads, k), w.numpy(), rtol=1e-9, atol=1e-11, err_msg=k)


# gradcheck differentiates numerically, so it needs torch's gradient to be
# the derivative: not at embedding's padding row (zero by definition) nor
# through max_norm's in-place renormalisation; ctc_loss's autograd value is
# the gradient through a log_softmax, so it is checked on logits. Empty
# inputs have nothing to differentiate (and gradcheck refuses them).
# kl_div's target gradient at a zero target and poisson_nll_loss's with
# `full` at targets 0 and 1 are torch's conventions (NaN, the masked
# Stirling term), not derivatives; beta-NLL's var^beta is not differentiated
# (the masked beta-NLL cases too). A NaN or infinite target under
# mask_nonfinite needs no exclusion: gradcheck's steps leave it non-finite,
# the element still not counted, so its numerical gradient is 0 as kloss's.
# A masked mean over no counted element is NaN however stepped; its
# gradients are 0 by definition (docs/weights.md).
_NOT_A_DERIVATIVE = {"embedding-padding", "embedding-max_norm", "l1_loss-empty", "kl_div-zero_target",
                     "poisson_nll_loss-rate_full", "gaussian_nll_loss-beta_nll",
                     "gaussian_nll_loss-beta_nll_var_row_full"} | {
    c.id for c in CASES if c.op == "gaussian_nll_loss" and c.options.get("beta")} | {
    c.id for c in CASES if reference.empty_masked_mean(c.op, c.inputs, c.options)}
# Cases with an option torch's function does not take (kloss's extensions):
# no torch call to record. kloss's weights and masks (a mask, mask_nonfinite,
# a weight that is not torch 2.15's weight=) are among them.
_NOT_IN_TORCH = {"gaussian_nll_loss-beta_nll", "gaussian_nll_loss-beta_nll_var_row_full"} | {
    c.id for c in CASES if reference.masked(c.op, c.inputs, c.options)} | {
    c.id for c in CASES  # no torch op
    if c.op in ("quantile_loss", "crps_gaussian", "crps_ensemble", "energy_score", "variogram_score", "lp_loss",
                "h1_loss")}


@pytest.mark.parametrize("c", [c for c in CASES if c.op in _GRID_OPS],
                         ids=[c.id for c in CASES if c.op in _GRID_OPS])
def test_grid_composition_is_neuraloperators(c):
    """The torch composition the grid losses fall back to without
    neuraloperator, against neuraloperator's LpLoss / H1Loss (forward and
    autograd), so that either reference checks kloss the same."""
    nol = _neuraloperator()
    if nol is None:
        pytest.skip("neuraloperator >= 2.0 is not installed")
    mine = [torch.from_numpy(np.array(c.inputs[k])).requires_grad_(True) for k in ("input", "target")]
    theirs = [t.detach().clone().requires_grad_(True) for t in mine]
    got = _reduce(_grid_composition(c, *mine), c.options.get("reduction", "mean"))
    want = _grid_neuraloperator(c, *theirs, nol)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
    go = torch.rand_like(got) + 0.5
    for a, b in zip(torch.autograd.grad(got, mine, go), torch.autograd.grad(want, theirs, go)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


# (the plain calls: scoringrules has no weights or masks per point)
_MULTIVARIATE_PLAIN = [c for c in CASES if c.op in _MULTIVARIATE and not reference.masked(c.op, c.inputs, c.options)]


@pytest.mark.parametrize("c", _MULTIVARIATE_PLAIN, ids=[c.id for c in _MULTIVARIATE_PLAIN])
def test_multivariate_composition_is_scoringrules(c):
    """The torch composition energy_score and variogram_score fall back to
    without scoringrules, against scoringrules' es_ensemble / vs_ensemble
    (torch backend): the forward, and autograd's gradients where
    scoringrules' are defined (not a variogram of p < 1: NaN there)."""
    sr = _scoringrules()
    if sr is None:
        pytest.skip("scoringrules is not installed")
    mine = _tensors(c, requires_grad=True)
    theirs = _tensors(c, requires_grad=True)
    got = _multivariate_composition(c, mine)
    want = _multivariate_scoringrules(c, theirs, sr)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)
    names = [k for k in ("input", "target") if mine[k].requires_grad]
    go = torch.rand_like(got) + 0.5
    got_g = torch.autograd.grad(got, [mine[k] for k in names], go)
    if c.op == "variogram_score" and c.options.get("p", 0.5) < 1:
        assert all(torch.isfinite(g).all() for g in got_g)
        return
    for a, b in zip(got_g, torch.autograd.grad(want, [theirs[k] for k in names], go)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("tie", ["members", "member_on_observation", "event_values"])
@pytest.mark.parametrize("op", _MULTIVARIATE)
def test_multivariate_ties_get_torchs_gradient(op, tie):
    """At a zero difference (tied members, a member on the observation,
    equal event values within a member and in the observation) kloss's
    gradient is torch's: the norm's 0 at a zero vector, |d|^p's 0 at d = 0
    (scoringrules' own for p >= 1; the masked composition's for p < 1)."""
    x = np.array([[[0.5, -1.0, 2.0, 0.0], [0.5, -1.0, 2.0, 0.0], [1.0, 0.25, -0.5, 1.5]],
                  [[1.0, 1.0, -1.0, 0.5], [2.0, -0.5, 0.5, 0.5], [0.0, 1.0, 1.0, 1.0]]])
    y = np.array([[-1.0, 0.5, 0.25, 2.0], [0.0, 1.5, 1.5, -1.0]])
    if tie == "member_on_observation":
        y[0] = x[0, 2]
        y[1] = x[1, 0]
    elif tie == "event_values":
        y[0, 1] = y[0, 0]
    for p in ((1.0, 2.0, 0.5) if op == "variogram_score" else (None,)):
        for estimator in ("standard", "fair", "almost_fair"):
            opts = {"estimator": estimator, "reduction": "none"}
            if p is not None:
                opts["p"] = p
            c = Call("%s-%s" % (op, tie), op, {"input": x, "target": y}, opts)
            mine = _tensors(c, requires_grad=True)
            out = kt.apply(op, mine, opts)
            want = torch_reference(c, _tensors(c))
            torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-13)
            go = torch.rand_like(out) + 0.5
            got = torch.autograd.grad(out, [mine["input"], mine["target"]], go)
            ref = _tensors(c, requires_grad=True)
            wanted = torch.autograd.grad(torch_reference(c, ref), [ref["input"], ref["target"]], go)
            for a, b in zip(got, wanted):
                assert torch.isfinite(b).all()
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("c", [c for c in CASES if c.id not in _NOT_A_DERIVATIVE],
                         ids=[i for i in IDS if i not in _NOT_A_DERIVATIVE])
def test_autograd_function_passes_gradcheck(c):
    tensors = _tensors(c, requires_grad=True)
    names = [k for k, t in tensors.items() if t.requires_grad]
    if not names:
        pytest.skip("no differentiable input given")

    def fn(*leaves):
        args = dict(tensors, **dict(zip(names, leaves)))
        if c.op == "ctc_loss":
            args["log_probs"] = args["log_probs"].log_softmax(2)
        return kt.apply(c.op, args, c.options)
    leaves = [tensors[k].detach().clone().requires_grad_(True) for k in names]
    assert torch.autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_autograd_function_matches_torchs_loss(c):
    mine = _tensors(c, requires_grad=True)
    theirs = _tensors(c, requires_grad=True)
    out = getattr(kt, c.op)(**mine, **c.options)
    want = torch_reference(c, theirs)
    assert out.dtype == want.dtype and out.shape == want.shape
    # (NaN where both are: a masked mean over no counted element)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-12, equal_nan=True)
    if out.requires_grad:
        go = torch.rand_like(out) + 0.5
        out.backward(go)
        want.backward(go)
        for k, t in mine.items():
            if t.requires_grad:
                # (NaN where torch's is NaN: kl_div's target gradient at a zero target)
                torch.testing.assert_close(t.grad, theirs[k].grad, rtol=1e-9, atol=1e-11, equal_nan=True, msg=k)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("op", reference.TORCH_WEIGHT)
def test_masked_form_is_torchs_weight_where_both_apply(op, reduction):
    """A weight of the input's shape with a mask of ones, or with
    mask_nonfinite on finite targets (kloss's weights and masks), is torch
    2.15's weight= (the mean over the weights' sum; huber_loss's over the
    count): values and gradients, the weight's among them."""
    if "weight" not in inspect.signature(getattr(F, op)).parameters:
        pytest.skip("this torch's %s has no weight=" % op)
    rng = np.random.default_rng(13)
    x, y, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.uniform(0.25, 2, (3, 4))
    leaves = [torch.from_numpy(a).requires_grad_(True) for a in (x, y, w)]
    want = getattr(F, op)(leaves[0], leaves[1], weight=leaves[2], reduction=reduction)
    go = rng.uniform(0.5, 1.5, tuple(want.shape))
    want_g = torch.autograd.grad(want, leaves, torch.from_numpy(go))
    for extra in ({"mask": np.ones((3, 1))}, {"mask_nonfinite": True}):
        got = getattr(kloss, op)(x, y, weight=w, reduction=reduction, **extra)
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=str(extra))
        g = getattr(kloss, op + "_backward")(go, x, y, weight=w, reduction=reduction, **extra)
        for name, wg in zip(("input", "target", "weight"), want_g):
            np.testing.assert_allclose(getattr(g, name), wg.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg="%s %s" % (name, extra))


def test_quantiles_are_one_call_per_quantile_column():
    """quantile_loss with `quantiles` [Q] against input [N, Q] and target
    [N, 1]: the torch.max composition with q broadcast, and the Q
    single-quantile calls on the columns (the mean: their means' mean;
    the target's gradient: the sum of theirs), values and autograd."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64)
    y = torch.randn(6, 1, generator=g, dtype=torch.float64)
    q = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    for red in ("none", "mean", "sum"):
        a = [x.clone().requires_grad_(True), y.clone().requires_grad_(True)]
        out = kt.quantile_loss(a[0], a[1], q, reduction=red)
        e = [x.clone().requires_grad_(True), y.clone().requires_grad_(True)]
        d = e[1] - e[0]
        want = _reduce(torch.max(q * d, (q - 1) * d), red)
        torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-14)
        go = torch.rand(out.shape, generator=g, dtype=torch.float64) + 0.5
        got_g = torch.autograd.grad(out, a, go)
        for gg, wg in zip(got_g, torch.autograd.grad(want, e, go)):
            torch.testing.assert_close(gg, wg, rtol=1e-12, atol=1e-14)
        cols = [x[:, j:j + 1].clone().requires_grad_(True) for j in range(3)]
        ys = [y.clone().requires_grad_(True) for _ in range(3)]
        single = [kt.quantile_loss(cols[j], ys[j], quantile=float(q[j]), reduction=red) for j in range(3)]
        if red == "none":
            torch.testing.assert_close(out, torch.cat(single, 1), rtol=1e-12, atol=1e-14)
            gos = [go[:, j:j + 1] for j in range(3)]
        else:
            combined = sum(single) / 3 if red == "mean" else sum(single)
            torch.testing.assert_close(out, combined, rtol=1e-12, atol=1e-14)
            gos = [go / 3 if red == "mean" else go] * 3
        gx = [torch.autograd.grad(single[j], [cols[j], ys[j]], gos[j]) for j in range(3)]
        torch.testing.assert_close(got_g[0], torch.cat([gx[j][0] for j in range(3)], 1), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(got_g[1], sum(gx[j][1] for j in range(3)), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_autograd_function_in_narrow_dtypes(dtype):
    torch.manual_seed(0)
    x = torch.randn(16, 33, dtype=dtype, requires_grad=True)
    t = torch.randint(0, 33, (16,))
    loss = kt.cross_entropy(x, t, label_smoothing=0.1)
    loss.backward()
    ref_x = x.detach().double().requires_grad_(True)
    ref = F.cross_entropy(ref_x, t, label_smoothing=0.1)
    ref.backward()
    tol = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
    assert loss.dtype == dtype and x.grad.dtype == dtype
    torch.testing.assert_close(loss.double(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(x.grad.double(), ref_x.grad, rtol=tol, atol=tol)


def test_autograd_function_refusals():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64).sign().requires_grad_(True)
    with pytest.raises(kloss.NotSupported, match="kloss::soft_margin_loss: input 'target' requires grad"):
        kt.soft_margin_loss(x, y)
    with pytest.raises(kloss.InvalidArgument, match="kloss.torch takes CPU tensors"):
        kt.mse_loss(torch.empty(3, device="meta"), torch.empty(3, device="meta"))
    with pytest.raises(kloss.IndexOutOfRange, match="kloss::cross_entropy"):
        kt.cross_entropy(x, torch.tensor([0, 9, 1]))
    loss = kt.mse_loss(x, torch.zeros(3, 4, dtype=torch.float64))
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    with pytest.raises(RuntimeError):  # first-order only
        g.sum().backward()


def test_probability_targets_get_torchs_gradient():
    """A learned teacher's distribution: cross_entropy's gradient w.r.t.
    class probabilities, with label smoothing and class weights, as
    torch's autograd gives it."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 6, generator=g, dtype=torch.float64) * 3
    p = torch.softmax(torch.randn(4, 6, generator=g, dtype=torch.float64), 1)
    w = torch.rand(6, generator=g, dtype=torch.float64) + 0.5
    for red in ("mean", "sum", "none"):
        a = [x.clone().requires_grad_(True), p.clone().requires_grad_(True)]
        e = [x.clone().requires_grad_(True), p.clone().requires_grad_(True)]
        out = kt.cross_entropy(a[0], a[1], weight=w, label_smoothing=0.2, reduction=red)
        want = F.cross_entropy(e[0], e[1], weight=w, label_smoothing=0.2, reduction=red)
        go = torch.rand(out.shape, generator=g, dtype=torch.float64) + 0.5
        for got_g, want_g in zip(torch.autograd.grad(out, a, go), torch.autograd.grad(want, e, go)):
            np.testing.assert_allclose(got_g.numpy(), want_g.numpy(), rtol=1e-10, atol=1e-12)


def test_mixed_dtypes_promote_and_gradients_keep_each_inputs_dtype():
    x = torch.randn(5, dtype=torch.float32, requires_grad=True)
    y = torch.randn(5, dtype=torch.float64, requires_grad=True)
    out = kt.mse_loss(x, y)
    assert out.dtype == torch.float64
    out.backward()
    assert x.grad.dtype == torch.float32 and y.grad.dtype == torch.float64
    torch.testing.assert_close(x.grad.double(), 2 * (x.detach().double() - y.detach()) / 5)


_DEPRECATED = {"size_average", "reduce"}
# torch keywords kloss does not take (yet): recorded so a new one shows up.
_TORCH_ONLY = set()


def test_torchs_keywords_and_defaults_are_klosss():
    missing = set()
    for name in kloss.ops():
        if not hasattr(F, name):
            assert name in kloss.functional._NOT_IN_TORCH, name  # what it is in torch's terms, for its doc
            continue
        info = kloss.op_info(name)
        params = inspect.signature(getattr(F, name)).parameters
        for p in params.values():
            if p.name in _DEPRECATED or p.name in info.inputs:
                continue
            o = info.option(p.name)
            if o is None:
                missing.add((name, p.name))
                continue
            assert o.default == p.default, (name, p.name, o.default, p.default)
        # the positional inputs are torch's leading arguments; where kloss
        # makes inputs keyword-only (_registry.TORCH_POSITIONAL), torch
        # indeed has something else at that place
        for n in info.inputs[:info.positional]:
            assert n in list(params)[:info.positional], (name, n, "add it to kloss._registry.TORCH_POSITIONAL")
        if info.positional < len(info.inputs):
            assert list(params)[info.positional] != info.inputs[info.positional], (name, "not an exception")
    assert missing == _TORCH_ONLY


@pytest.mark.parametrize("c", [c for c in CASES if c.id not in _NOT_IN_TORCH],
                         ids=[i for i in IDS if i not in _NOT_IN_TORCH])
def test_from_torch_cases_pass_kloss_validate(c, tmp_path, kloss_validate):
    case = kg.from_torch(c.op, **c.inputs, **c.options, name=c.id)
    assert case.op == c.op and case.dtype == "float64"
    path = str(tmp_path / "case.h5")
    kg.write(path, [case])
    report = kg.validate(path, executable=kloss_validate)
    assert report.failed == 0 and report.passed == 1, report.output
    assert kg.read(path)[0].check().passed


def test_from_torch_in_every_dtype_and_with_torch_functions(tmp_path, kloss_validate):
    torch.manual_seed(1)
    made = []
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = torch.randn(9, 17, dtype=dtype)
        t = torch.randint(0, 17, (9,), dtype=torch.int32)
        made.append(kg.from_torch(F.cross_entropy, x, t, label_smoothing=0.05, reduction="sum"))
        made.append(kg.from_torch("smooth_l1_loss", x, torch.randn(9, 17, dtype=dtype), beta=0.5))
        made.append(kg.from_torch("fused_linear_cross_entropy", torch.randn(9, 5, dtype=dtype),
                                  torch.randn(17, 5, dtype=dtype), t.long(), bias=torch.randn(17, dtype=dtype),
                                  softcap=3.0))
    assert [c.dtype for c in made[::3]] == ["float32", "float64", "float16", "bfloat16"]
    assert made[0].index_dtype == "int32" and made[2].index_dtype == "int64"
    path = str(tmp_path / "dtypes.h5")
    names = kg.write(path, made)
    assert len(set(names)) == len(made)
    report = kg.validate(path, executable=kloss_validate)
    assert report.failed == 0 and report.passed == len(made), report.output


def test_from_torch_records_the_call():
    x = torch.randn(4, 6, dtype=torch.float64)
    t = torch.tensor([1, 0, 5, -100])
    c = kg.from_torch("cross_entropy", x, t, ignore_index=-100, reduction="none", seed=3)
    np.testing.assert_array_equal(c.inputs["input"], x.numpy())
    np.testing.assert_array_equal(c.inputs["target"], t.numpy())
    assert c.options == {"ignore_index": -100, "reduction": "none"}
    assert c.grad_output.shape == (4,) and (c.grad_output >= 0.5).all() and (c.grad_output < 1.5).all()
    xg = x.clone().requires_grad_(True)
    F.cross_entropy(xg, t, reduction="none").backward(torch.from_numpy(c.grad_output))
    np.testing.assert_array_equal(c.grads["input"], xg.grad.numpy())
    fwd = kg.from_torch("cross_entropy", x, t, grad_output=None)
    assert fwd.grads == {} and fwd.grad_output is None
    with pytest.raises(kloss.NotSupported, match="z_loss"):
        kg.from_torch("cross_entropy", x, t, z_loss=1e-4)
    with pytest.raises(kloss.NotSupported, match="ctc_grad"):
        c = CASES[[k.op for k in CASES].index("ctc_loss")]
        kg.from_torch("ctc_loss", **c.inputs, ctc_grad=True)


def test_readme_example():
    """The README's Python example, run as written there."""
    import os
    import re
    from conftest import REPO
    readme = os.path.join(REPO, "README.md")
    if not os.path.exists(readme):
        pytest.skip("the repository's README.md is not beside python/")
    text = open(readme).read()
    section = text[text.index("\n## Python\n"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})


@pytest.mark.parametrize("shape", ["2d", "unbatched", "kdim"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_cross_entropy_matches_torchs(shape, reduction):
    """kloss.linear_cross_entropy (NumPy) and kloss.torch's against torch
    2.15's F.linear_cross_entropy, its shapes and ignore_index=None."""
    if not hasattr(F, "linear_cross_entropy"):
        pytest.skip("this torch has no F.linear_cross_entropy")
    g = torch.Generator().manual_seed(5)
    C, D = 5, 4
    w = torch.randn((C, 3, D) if shape == "kdim" else (C, D), generator=g, dtype=torch.float64)
    b = torch.randn(w.shape[:-1], generator=g, dtype=torch.float64)
    if shape == "unbatched":
        x, t = torch.randn(D, generator=g, dtype=torch.float64), torch.tensor(3)
    else:
        x = torch.randn(6, D, generator=g, dtype=torch.float64)
        t = torch.randint(0, C, (6, 3) if shape == "kdim" else (6,), generator=g)
        t[1] = -100
    want = F.linear_cross_entropy(x, w, t, linear_bias=b, reduction=reduction, ignore_index=None)
    got = kloss.linear_cross_entropy(x.numpy(), w.numpy(), t.numpy(), linear_bias=b.numpy(), reduction=reduction)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)
    leaves = [v.clone().requires_grad_(True) for v in (x, w, b)]
    out = kt.linear_cross_entropy(leaves[0], leaves[1], t, linear_bias=leaves[2], reduction=reduction)
    ref = [v.clone().requires_grad_(True) for v in (x, w, b)]
    wout = F.linear_cross_entropy(ref[0], ref[1], t, linear_bias=ref[2], reduction=reduction, ignore_index=None)
    go = torch.rand(out.shape, generator=g, dtype=torch.float64) + 0.5
    got_g = torch.autograd.grad(out, leaves, go)
    want_g = torch.autograd.grad(wout, ref, go)
    for a, e in zip(got_g, want_g):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-9, atol=1e-11)
