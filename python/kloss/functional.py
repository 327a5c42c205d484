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
    `deterministic`.
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
    lines.append("dtype=, index_dtype=: as kloss.run (default: from the arrays).")
    lines.append("Raises kloss.Error (kloss's message) for what kloss refuses.")
    return "\n".join(lines)


# ops torch.nn.functional lacks: what they compute, in torch's terms
_NOT_IN_TORCH = {
    "fused_linear_cross_entropy": "cross_entropy(input @ weight.T + bias, target, weight=ce_weight, ...) "
                                  "(no torch op)",
}


def _make(info):
    sig = signature(info)
    full = sig.replace(parameters=list(sig.parameters.values()) + [
        _P("dtype", _P.KEYWORD_ONLY, default=None), _P("index_dtype", _P.KEYWORD_ONLY, default=None)])
    grads_type = collections.namedtuple(info.name + "_grads", info.differentiable)

    def split(args, kwargs):
        dt = kwargs.pop("dtype", None)
        it = kwargs.pop("index_dtype", None)
        _, inputs, options = split_arguments(info, sig, args, kwargs)
        return inputs, options, dt, it

    def forward(*args, **kwargs):
        inputs, options, dt, it = split(args, kwargs)
        return run(info.name, inputs, options, dtype=dt, index_dtype=it).output

    def backward(grad_output, *args, **kwargs):
        inputs, options, dt, it = split(args, kwargs)
        r = run(info.name, inputs, options, dtype=dt, index_dtype=it, grad_output=grad_output, backward=True)
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
    return {f.__name__: f, b.__name__: b}


__getattr__, __dir__ = lazy_ops(globals(), __name__, [], _define)
