# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kloss's ops as torch.autograd functions on CPU tensors:

    import torch, kloss.torch as kt
    x = torch.randn(8, 5, requires_grad=True); t = torch.randint(0, 5, (8,))
    loss = kt.cross_entropy(x, t, label_smoothing=0.1)
    loss.backward()                       # x.grad from kloss's backward

Each function takes torch.nn.functional's arguments (as kloss's NumPy
functions do: leading inputs positional, the rest keyword-only) and
returns a tensor whose backward is kloss's `<op>_backward` (first-order
only: a second derivative raises). Tensors must be on the CPU; floating
inputs are promoted to one dtype (float32, float64, float16 or bfloat16),
index inputs to int32 (all int32) or int64. An input kloss has no gradient
for (a probability target, say) must not require grad: that is refused
rather than silently given no gradient. The calls differ from torch's
where kloss.functional says (embedding's max_norm leaves the weight tensor
as it is, for one). Needs torch; the data goes
through the C API on the host (kloss reads the inputs and writes the
gradients in place), so this is for validation and glue, not a GPU
training loop. The op functions are made on first use,
as kloss's (the library lists the ops).
"""
import functools

import numpy as np
import torch as _torch
from torch.autograd.function import once_differentiable as _once_differentiable

from . import _errors, _lib
from ._core import call_storage
from ._registry import lazy_ops, op_info
from .functional import signature, split_arguments

# __all__: these, then every op's function (lazy_ops)
_BASE_ALL = ["KlossFunction", "apply"]

_CODES = {_torch.float32: _lib.FLOAT32, _torch.float64: _lib.FLOAT64, _torch.float16: _lib.FLOAT16,
          _torch.bfloat16: _lib.BFLOAT16, _torch.int32: _lib.INT32, _torch.int64: _lib.INT64}
_DTYPES = {v: k for k, v in _CODES.items()}


def _storage(t):
    """A contiguous CPU tensor's data as a NumPy array in the C API's
    storage (bfloat16 as its uint16 bits)."""
    t = t.detach()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _tensor(a, code):
    if code == _lib.BFLOAT16:
        return _torch.from_numpy(np.asarray(a).view(np.int16)).view(_torch.bfloat16)
    return _torch.from_numpy(a)


class KlossFunction(_torch.autograd.Function):
    """forward(ctx, op, options, names, *tensors): kloss's op on tensors
    already converted (contiguous CPU, floating ones of one dtype, index
    ones of one integer dtype; None for an optional input not given);
    backward: kloss's backward for the tensors that need a gradient."""

    @staticmethod
    def forward(ctx, op, options, names, *tensors):
        code, icode = _codes(names, tensors, op)
        inputs = {n: (_CODES[t.dtype], _storage(t)) for n, t in zip(names, tensors) if t is not None}
        out, _ = call_storage(op, code, icode, inputs, options)
        ctx.op, ctx.options, ctx.names, ctx.codes = op, options, names, (code, icode)
        ctx.save_for_backward(*tensors)
        return _tensor(out, code)

    @staticmethod
    @_once_differentiable
    def backward(ctx, grad_output):
        tensors = ctx.saved_tensors
        code, icode = ctx.codes
        inputs = {n: (_CODES[t.dtype], _storage(t)) for n, t in zip(ctx.names, tensors) if t is not None}
        go = grad_output.to(_DTYPES[code]).contiguous()
        _, grads = call_storage(ctx.op, code, icode, inputs, ctx.options, backward=True, grad_output=_storage(go))
        result = [None, None, None]
        for i, n in enumerate(ctx.names):
            need = ctx.needs_input_grad[3 + i]
            result.append(_tensor(grads[n], code) if need and n in grads else None)
        return tuple(result)


def _codes(names, tensors, op):
    code = icode = None
    for t in tensors:
        if t is None:
            continue
        if t.is_floating_point():
            code = _CODES[t.dtype]
        else:
            icode = _CODES[t.dtype]
    return (_lib.FLOAT32 if code is None else code), (_lib.INT64 if icode is None else icode)


def apply(op, inputs, options=None):
    """Runs op `op` on tensors as an autograd function: inputs maps torch's
    argument names to tensors (or numbers / lists; None: not given),
    options maps torch's keywords to values. Returns the output tensor."""
    info = op_info(op)
    tensors, kinds = {}, {}
    for n, v in inputs.items():
        if v is None:
            continue
        t = v if isinstance(v, _torch.Tensor) else _torch.as_tensor(v)
        if t.device.type != "cpu":
            raise _errors.InvalidArgument("kloss::%s: input '%s' is on %s; kloss.torch takes CPU tensors"
                                          % (op, n, t.device))
        kind = info.kind(n) if n in info.inputs else "real"
        if kind == "either":
            kind = "real" if t.is_floating_point() else "index"
        if kind == "index" and t.is_floating_point():
            raise _errors.InvalidArgument("kloss::%s: input '%s' holds indices: it must be an integer tensor, "
                                          "got %s" % (op, n, t.dtype))
        if kind == "real" and t.is_complex():
            raise _errors.InvalidArgument("kloss::%s: input '%s' is complex (%s)" % (op, n, t.dtype))
        tensors[n], kinds[n] = t, kind
    real = [t for n, t in tensors.items() if kinds[n] == "real" and t.is_floating_point()]
    dtype = functools.reduce(_torch.promote_types, [t.dtype for t in real]) if real else _torch.get_default_dtype()
    index = [t for n, t in tensors.items() if kinds[n] == "index"]
    idtype = _torch.int32 if index and all(t.dtype == _torch.int32 for t in index) else _torch.int64
    names, args = [], []
    for n in info.inputs:
        if n not in tensors:
            continue
        t = tensors[n]
        if t.requires_grad and n not in info.differentiable:
            raise _errors.NotSupported("kloss::%s: input '%s' requires grad, but kloss has no gradient for it "
                                       "(its gradients: %s); detach it" % (op, n, ", ".join(info.differentiable)))
        t = t.to(idtype if kinds[n] == "index" else dtype).contiguous()
        names.append(n)
        args.append(t)
    for n in tensors:
        if n not in info.inputs:
            raise _errors.NotSupported("kloss::%s: input '%s' is not an argument of this op (its inputs: %s)"
                                       % (op, n, ", ".join(info.inputs)))
    opts = {k: v for k, v in (options or {}).items() if v is not None}
    return KlossFunction.apply(op, opts, tuple(names), *args)


def _make(info):
    sig = signature(info)

    def fn(*args, **kwargs):
        _, inputs, options = split_arguments(info, sig, args, kwargs)
        return apply(info.name, inputs, options)

    fn.__name__ = fn.__qualname__ = info.name
    fn.__signature__ = sig
    fn.__module__ = __name__
    fn.__doc__ = ("kloss's %s as a torch.autograd function on CPU tensors (torch.nn.functional.%s's "
                  "arguments; kloss's %s_backward as its backward)." % (info.name, info.name, info.name))
    return fn


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, z_loss=0.0, softcap=0.0):
    """torch.nn.functional.linear_cross_entropy's arguments and shapes
    (ignore_index None: -100): a (C, in_features) weight runs kloss's fused
    head (fused_linear_cross_entropy, the logits never held); a
    K-dimensional one torch's reference composition, F.linear then kloss's
    cross_entropy on the (N, C, d_1, ..., d_K) logits."""
    options = {"ignore_index": -100 if ignore_index is None else ignore_index, "reduction": reduction,
               "label_smoothing": label_smoothing, "z_loss": z_loss, "softcap": softcap}
    if input.dim() not in (1, 2):
        raise _errors.DimensionMismatch("kloss::linear_cross_entropy: argument 'input' must have 1 or 2 dimensions "
                                        "((in_features,) or (N, in_features)), got shape %s" % (tuple(input.shape),))
    if linear_weight.dim() == 2:
        unbatched = input.dim() == 1
        out = apply("fused_linear_cross_entropy",
                    {"input": input[None] if unbatched else input, "weight": linear_weight,
                     "target": target[None] if unbatched else target, "bias": linear_bias, "ce_weight": weight},
                    options)
        return out.reshape(()) if unbatched and reduction == "none" else out
    c, *out_features, in_features = linear_weight.shape
    bias = None if linear_bias is None else linear_bias.reshape(-1)
    logits = _torch.nn.functional.linear(input, linear_weight.reshape(-1, in_features), bias)
    logits = logits.reshape(*input.shape[:-1], c, *out_features)
    return apply("cross_entropy", {"input": logits, "target": target, "weight": weight}, options)


def _define(info):
    made = {info.name: _make(info)}
    if info.name == "fused_linear_cross_entropy":
        made["linear_cross_entropy"] = linear_cross_entropy
    return made


__getattr__, __dir__ = lazy_ops(globals(), __name__, _BASE_ALL, _define)
