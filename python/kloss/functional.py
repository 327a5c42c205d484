# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Every registered op as a function on NumPy arrays, named and called as
torch.nn.functional's, with a `<op>_backward` twin returning the gradients:

    loss = kloss.mse_loss(input, target, reduction="mean")
    grads = kloss.mse_loss_backward(grad_output, input, target, reduction="mean")
    grads.input, grads.target        # also a tuple: (grad_input, grad_target)

The leading inputs torch takes positionally are positional here too (in
torch's order); the other inputs and every option are keyword-only, with
torch's names and defaults. The functions are generated from the op table
(kloss.ops(), which the library lists) on first use: `kloss.mse_loss`
loads the library (kloss.LibraryNotFound without it) and makes every op's
pair of functions.

Where the call differs from torch's:
  * torch's deprecated `size_average` and `reduce` are not taken, nor the
    `weight` that torch 2.x added to mse_loss, l1_loss and huber_loss;
  * gaussian_nll_loss's `var` must be an array (kloss refuses a number);
  * embedding's and embedding_bag's `max_norm` renormalise the rows that
    are looked up without changing the caller's `weight` (torch changes it
    in place), and `sparse=True` gives the gradient dense;
  * ctc_loss's gradient is torch's autograd value; `ctc_grad=True` (a kloss
    extension) gives the plain partial derivative instead;
  * kloss's extensions are options too: cross_entropy's and
    fused_linear_cross_entropy's `z_loss` and `softcap`, the embeddings'
    `deterministic`;
  * a string option that lists axes or flags takes a tuple or list too,
    joined with commas: energy_score's and variogram_score's
    `event_dims=(-2, -1)` is `event_dims="-2,-1"`, h1_loss's
    `periodic=(True, False)` is `periodic="true,false"`.

linear_cross_entropy (and its _backward) is torch 2.15's
F.linear_cross_entropy: every shape it takes (input (in_features,) or
(N, in_features); linear_weight (C, d_1, ..., d_K, in_features) with
targets and linear_bias to match), `ignore_index=None` mapped to -100 as
torch does. A (C, in_features) weight runs kloss's fused head
(fused_linear_cross_entropy: the logits are never held); a K-dimensional
one runs torch's reference composition, linear then cross_entropy on the
(N, C, d_1, ..., d_K) logits, whose products NumPy computes.
"""
import collections
import inspect

from ._core import run
from ._registry import lazy_ops

# __all__, every op's function and its _backward, is made with them (lazy_ops)

_P = inspect.Parameter


def signature(info, leading=()):
    """The inspect.Signature of op `info`'s function: `leading` parameter
    names first (the backward's grad_output), then the inputs (positional
    as torch takes them), then the keyword-only inputs and options."""
    params = [_P(n, _P.POSITIONAL_OR_KEYWORD) for n in leading]
    for i, name in enumerate(info.inputs):
        kind = _P.POSITIONAL_OR_KEYWORD if i < info.positional else _P.KEYWORD_ONLY
        default = None if name in info.optional else _P.empty
        params.append(_P(name, kind, default=default))
    for o in info.options:
        params.append(_P(o.name, _P.KEYWORD_ONLY, default=o.default))
    return inspect.Signature(params)


def split_arguments(info, sig, args, kwargs):
    """(inputs, options) of a call bound to `sig`: the options the caller
    gave (the rest take kloss's defaults, which are torch's)."""
    bound = sig.bind(*args, **kwargs)
    inputs = {n: bound.arguments.get(n) for n in info.inputs}
    options = {o.name: bound.arguments[o.name] for o in info.options if o.name in bound.arguments}
    return bound, inputs, options


def _doc(info, backward):
    lines = []
    torch_name = _NOT_IN_TORCH.get(info.name, "torch.nn.functional." + info.name)
    if backward:
        lines.append("Gradients of kloss's %s: %s's autograd on NumPy arrays." % (info.name, torch_name))
        lines.append("")
        lines.append("grad_output: the upstream gradient, the output's shape (None: ones).")
        lines.append("Returns a named tuple (%s), None for an optional input not given."
                     % ", ".join(info.differentiable))
    else:
        lines.append("kloss's %s on NumPy arrays, as %s." % (info.name, torch_name))
        lines.append("")
        lines.append("Returns the loss as a NumPy array of the computing dtype (0-d when reduced).")
    if info.summary:
        lines += ["", "kloss (%s): %s." % (info.header, info.summary) if info.header else info.summary]
    lines.append("")
    lines.append("Inputs: " + ", ".join(n + ("?" if n in info.optional else "") for n in info.inputs)
                 + (" (indices: %s)" % ", ".join(info.index_inputs) if info.index_inputs else ""))
    lines.append("Options:" + ("" if info.options else " none"))
    for o in info.options:
        lines.append("  %s=%r%s" % (o.name, o.default, ": " + o.doc if o.doc else ""))
    lines.append("dtype=, index_dtype=: as kloss.run (default: from the arrays); comm=: an MPI communicator,")
    lines.append("the call then one rank's shard of the loss over its ranks (kloss.run); reproducible=True: with")
    lines.append("comm=, the same bits for any number of ranks and split of the batch.")
    lines.append("Raises kloss.Error (kloss's message) for what kloss refuses.")
    return "\n".join(lines)


# ops torch.nn.functional lacks: what they compute, in torch's terms
_NOT_IN_TORCH = {
    "fused_linear_cross_entropy": "cross_entropy(input @ weight.T + bias, target, weight=ce_weight, ...) "
                                  "(no torch op)",
    "quantile_loss": "the pinball loss, torch.max(q * (target - input), (q - 1) * (target - input)) "
                     "(no torch op; neuraloperator's PointwiseQuantileLoss)",
    "crps_gaussian": "the Gaussian CRPS in closed form (no torch op; scoringrules' crps_normal)",
    "crps_ensemble": "the ensemble CRPS (no torch op; scoringrules' crps_ensemble, anemoi's afCRPS)",
    "energy_score": "the ensemble energy score, the multivariate CRPS: the Euclidean norm over the event axes "
                    "event_dims (an int tuple, or its string \"-2,-1\") of each point's members and observation "
                    "(no torch op; scoringrules' es_ensemble, its event axes reshaped into one v_axis)",
    "variogram_score": "the ensemble variogram score of order p over the pairs of event elements (the event axes "
                       "event_dims flattened row-major to D, weight [D, D]) (no torch op; scoringrules' "
                       "vs_ensemble, its event axes reshaped into one v_axis)",
    "lp_loss": "the relative (or absolute) Lp norm of input - target over a grid of the trailing grid_ndim axes, "
               "per function (no torch op; neuraloperator's LpLoss)",
    "h1_loss": "the relative (or absolute) Sobolev H1 norm of input - target over a grid, derivatives by finite "
               "differences (no torch op; neuraloperator's H1Loss)",
}


def _make(info):
    sig = signature(info)
    full = sig.replace(parameters=list(sig.parameters.values()) + [
        _P("dtype", _P.KEYWORD_ONLY, default=None), _P("index_dtype", _P.KEYWORD_ONLY, default=None),
        _P("comm", _P.KEYWORD_ONLY, default=None), _P("reproducible", _P.KEYWORD_ONLY, default=False)])
    grads_type = collections.namedtuple(info.name + "_grads", info.differentiable)

    def split(args, kwargs):
        dt = kwargs.pop("dtype", None)
        it = kwargs.pop("index_dtype", None)
        sharded = (kwargs.pop("comm", None), kwargs.pop("reproducible", False))
        _, inputs, options = split_arguments(info, sig, args, kwargs)
        return inputs, options, dt, it, sharded

    def forward(*args, **kwargs):
        inputs, options, dt, it, (comm, reproducible) = split(args, kwargs)
        return run(info.name, inputs, options, dtype=dt, index_dtype=it, comm=comm, reproducible=reproducible).output

    def backward(grad_output, *args, **kwargs):
        inputs, options, dt, it, (comm, reproducible) = split(args, kwargs)
        r = run(info.name, inputs, options, dtype=dt, index_dtype=it, grad_output=grad_output, backward=True,
                comm=comm, reproducible=reproducible)
        return grads_type(*(r.grads.get(n) for n in info.differentiable))

    forward.__name__ = forward.__qualname__ = info.name
    forward.__signature__ = full
    forward.__doc__ = _doc(info, False)
    backward.__name__ = backward.__qualname__ = info.name + "_backward"
    backward.__signature__ = full.replace(parameters=[_P("grad_output", _P.POSITIONAL_OR_KEYWORD)]
                                          + list(full.parameters.values()))
    backward.__doc__ = _doc(info, True)
    forward.__module__ = backward.__module__ = "kloss"
    return forward, backward


def _define(info):
    f, b = _make(info)
    made = {f.__name__: f, b.__name__: b}
    if info.name == "fused_linear_cross_entropy":
        made["linear_cross_entropy"] = linear_cross_entropy
        made["linear_cross_entropy_backward"] = linear_cross_entropy_backward
    return made


# --- linear_cross_entropy: torch 2.15's name and shapes over the fused head ---

LinearCrossEntropyGrads = collections.namedtuple("linear_cross_entropy_grads",
                                                 "input linear_weight target linear_bias")


def _lce_args(input, linear_weight, target, linear_bias, weight, ignore_index, reduction, label_smoothing, z_loss,
              softcap):
    import numpy as np
    x, w = np.asarray(input), np.asarray(linear_weight)
    if x.ndim not in (1, 2):
        from ._errors import DimensionMismatch
        raise DimensionMismatch("kloss::linear_cross_entropy: argument 'input' must have 1 or 2 dimensions "
                                "((in_features,) or (N, in_features)), got shape %s" % (x.shape,))
    if w.ndim < 2 or w.shape[-1] != x.shape[-1]:
        from ._errors import DimensionMismatch
        raise DimensionMismatch("kloss::linear_cross_entropy: argument 'linear_weight' %s must be (C, d_1, ..., "
                                "d_K, in_features) with in_features = %d (the input's last dimension)"
                                % (w.shape, x.shape[-1]))
    options = {"ignore_index": -100 if ignore_index is None else ignore_index, "reduction": reduction,
               "label_smoothing": label_smoothing, "z_loss": z_loss, "softcap": softcap}
    return x, w, np.asarray(target), linear_bias, weight, options


def _lce_fused_inputs(x, w, t, b, cw):
    """fused_linear_cross_entropy's inputs for a (C, in_features) weight, an
    unbatched input as one row; and whether it was unbatched."""
    unbatched = x.ndim == 1
    return ({"input": x[None] if unbatched else x, "weight": w, "target": t[None] if unbatched else t, "bias": b,
             "ce_weight": cw}, unbatched)


def _lce_logits(x, w, b):
    """torch's reference logits: linear over the flattened weight, then
    (*input.shape[:-1], C, d_1, ..., d_K)."""
    import numpy as np
    ft = np.result_type(x.dtype, w.dtype, np.float32)
    x2 = x.reshape(-1, x.shape[-1]).astype(ft, copy=False)
    w2 = w.reshape(-1, w.shape[-1]).astype(ft, copy=False)
    z = x2 @ w2.T
    if b is not None:
        z = z + np.asarray(b, dtype=ft).reshape(-1)
    return x2, w2, z.reshape(x.shape[:-1] + w.shape[:-1])


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, z_loss=0.0, softcap=0.0, dtype=None,
                         index_dtype=None):
    """torch.nn.functional.linear_cross_entropy on NumPy arrays:
    cross_entropy(linear(input, linear_weight, linear_bias), target) with
    the weight's trailing class dimensions (see the module's doc). weight:
    the class weights (cross_entropy's `weight`); ignore_index None: -100.
    z_loss, softcap: kloss's extensions. Returns the loss (0-d when
    reduced, or unbatched)."""
    x, w, t, b, cw, o = _lce_args(input, linear_weight, target, linear_bias, weight, ignore_index, reduction,
                                  label_smoothing, z_loss, softcap)
    kw = dict(dtype=dtype, index_dtype=index_dtype)
    if w.ndim == 2:
        inputs, unbatched = _lce_fused_inputs(x, w, t, b, cw)
        out = run("fused_linear_cross_entropy", inputs, o, **kw).output
        return out.reshape(()) if unbatched and reduction == "none" else out
    _, _, z = _lce_logits(x, w, b)
    return run("cross_entropy", {"input": z, "target": t, "weight": cw}, o, **kw).output


def linear_cross_entropy_backward(grad_output, input, linear_weight, target, *, linear_bias=None, weight=None,
                                  reduction="mean", ignore_index=None, label_smoothing=0.0, z_loss=0.0, softcap=0.0,
                                  dtype=None, index_dtype=None):
    """Gradients of linear_cross_entropy w.r.t. input, linear_weight, target
    (class probabilities; None for class indices) and linear_bias (None
    when not given), as torch's autograd; grad_output: the loss's shape
    (None: ones). Returns a named tuple (input, linear_weight, target,
    linear_bias)."""
    import numpy as np
    x, w, t, b, cw, o = _lce_args(input, linear_weight, target, linear_bias, weight, ignore_index, reduction,
                                  label_smoothing, z_loss, softcap)
    kw = dict(dtype=dtype, index_dtype=index_dtype)
    if w.ndim == 2:
        inputs, unbatched = _lce_fused_inputs(x, w, t, b, cw)
        go = grad_output
        if go is not None and unbatched and reduction == "none":
            go = np.asarray(go).reshape(1)
        g = run("fused_linear_cross_entropy", inputs, o, grad_output=go, backward=True, **kw).grads
        gx = g["input"].reshape(x.shape)
        gt = g.get("target")
        return LinearCrossEntropyGrads(gx, g["weight"], None if gt is None else gt.reshape(t.shape),
                                       g.get("bias") if b is not None else None)
    x2, w2, z = _lce_logits(x, w, b)
    g = run("cross_entropy", {"input": z, "target": t, "weight": cw}, o, grad_output=grad_output, backward=True,
            **kw).grads
    gz = np.asarray(g["input"]).reshape(x2.shape[0], w2.shape[0])
    ft = gz.dtype
    gx = (gz @ w2.astype(ft, copy=False)).reshape(x.shape)
    gw = (gz.T @ x2.astype(ft, copy=False)).reshape(w.shape)
    gb = gz.sum(axis=0).reshape(np.shape(b)) if b is not None else None
    return LinearCrossEntropyGrads(gx, gw, g.get("target"), gb)


__getattr__, __dir__ = lazy_ops(globals(), __name__, [], _define)
