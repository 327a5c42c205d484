# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The ops kloss registers (include/kloss/registry.hpp), read from the
library itself: kloss_op_count() and kloss_op_json(i) of the C API
(include/kloss/c_api.h) give each op's torch name, inputs (a trailing '?'
marks an optional one), differentiable inputs, index inputs and options
with their types and torch's defaults. The table is built once, on first
use (kloss.ops(), kloss.op_info(), kloss.<op>, kloss.run, ...), so
`import kloss` works without the library and an op added to kloss needs
no edit here.

What the registry cannot know is how torch's Python signature orders its
arguments. The rule: torch takes every input positionally, in the
registry's order, before its options, which holds for all of
torch.nn.functional's losses but the ones in TORCH_POSITIONAL, where torch
puts options between the inputs (kloss makes the later inputs
keyword-only). tests/test_torch.py checks both directions against torch's
signatures, so a new op that breaks the rule fails there.
"""
import collections
import json
import threading

from . import _errors, _lib

__all__ = ["OpInfo", "OptionInfo", "ops", "op_info", "TORCH_POSITIONAL"]

# op -> how many leading inputs torch's signature takes positionally, where
# that is not every input (torch.nn.functional's order in the comments).
TORCH_POSITIONAL = {
    # (input, target, size_average, reduce, reduction, weight)
    "mse_loss": 2,
    "l1_loss": 2,
    # (input, target, reduction, delta, weight)
    "huber_loss": 2,
    # kloss's weight and mask (keyword-only): torch's options follow target
    # (input, target, size_average, reduce, reduction, beta)
    "smooth_l1_loss": 2,
    # (input, target, size_average, reduce, reduction)
    "soft_margin_loss": 2,
    # (input, target, size_average, reduce, reduction, log_target)
    "kl_div": 2,
    # (input, target, log_input, full, size_average, eps, reduce, reduction)
    "poisson_nll_loss": 2,
    # kloss's sample_weight (keyword-only): torch's options follow weight
    # (input, target, weight, size_average, ignore_index, reduce, reduction,
    #  label_smoothing)
    "cross_entropy": 3,
    "nll_loss": 3,
    # (input, target, var, full, eps, reduction)
    "gaussian_nll_loss": 3,
    # kloss's mask (keyword-only): torch's options follow weight
    # (input, target, weight, size_average, reduce, reduction)
    "binary_cross_entropy": 3,
    # (input, target, weight, size_average, reduce, reduction, pos_weight)
    "binary_cross_entropy_with_logits": 3,
    # (input, target, p, margin, weight, size_average, reduce, reduction)
    "multi_margin_loss": 2,
    # (input, weight, offsets, max_norm, norm_type, scale_grad_by_freq,
    #  mode, sparse, per_sample_weights, include_last_offset, padding_idx)
    "embedding_bag": 3,
}

OPTION_TYPES = ("real", "int", "bool", "string")

OptionInfo = collections.namedtuple("OptionInfo", "name type default text doc")
OptionInfo.__doc__ = """One option: torch's keyword, its registry type ("real", "int",
"bool", "string"), torch's default as a Python value (None: unset), as
the registry's text, and the registry's one-line description."""


class OpInfo(collections.namedtuple(
        "OpInfo", "name inputs optional differentiable options index_inputs either_inputs positional "
                  "header summary")):
    """One registered op.

    inputs: torch's argument names in order; optional: those that may be
    omitted (the registry's trailing '?'); differentiable: the inputs kloss
    returns a gradient for; options: OptionInfo tuple; index_inputs: inputs
    holding integer indices; either_inputs: inputs holding indices or reals
    (cross_entropy's target); positional: how many leading inputs torch's
    signature takes positionally (the rest, like the options, are
    keyword-only here); header: the C++ header ("kloss/margin.hpp");
    summary: the registry's one-line description.
    """

    @property
    def required(self):
        return tuple(n for n in self.inputs if n not in self.optional)

    def option(self, name):
        for o in self.options:
            if o.name == name:
                return o
        return None

    def kind(self, name):
        """"index", "either" or "real": how input `name` is typed."""
        if name in self.index_inputs:
            return "index"
        if name in self.either_inputs:
            return "either"
        return "real"


def _value(type_, text):
    """The Python value of a registry default text ("None": unset)."""
    if text == "None":
        return None
    if type_ == "real":
        return float(text)
    if type_ == "int":
        return int(text)
    if type_ == "bool":
        if text.lower() not in ("true", "false"):
            raise ValueError("bad boolean default %r" % text)
        return text.lower() == "true"
    return text


def op_from_json(obj):
    """The OpInfo of one kloss_op_json object (a dict)."""
    name = obj["name"]
    raw = list(obj["inputs"])
    inputs = tuple(n.rstrip("?") for n in raw)
    options = []
    for o in obj["options"]:
        try:
            default = _value(o["type"], o["default"])
        except ValueError as e:
            raise _errors.InternalError("kloss::%s: option '%s' of type %s has the default %r, which these "
                                        "bindings cannot read (%s)" % (name, o["name"], o["type"], o["default"], e))
        options.append(OptionInfo(o["name"], o["type"], default, o["default"], o.get("doc", "")))
    return OpInfo(
        name=name,
        inputs=inputs,
        optional=tuple(n.rstrip("?") for n in raw if n.endswith("?")),
        differentiable=tuple(obj["differentiable"]),
        options=tuple(options),
        index_inputs=tuple(obj.get("index_inputs", ())),
        either_inputs=tuple(obj.get("index_or_real_inputs", ())),
        positional=min(TORCH_POSITIONAL.get(name, len(inputs)), len(inputs)),
        header=obj.get("header", ""),
        summary=obj.get("summary", ""),
    )


def library_json():
    """The registry as the library lists it: kloss_op_json(i) parsed, for
    each i below kloss_op_count(). Raises kloss.LibraryNotFound."""
    h = _lib.handle()
    out = []
    for i in range(h.kloss_op_count()):
        text = h.kloss_op_json(i)
        if text is None:
            raise _errors.InternalError((h.kloss_last_error() or b"kloss_op_json(%d) failed" % i).decode())
        out.append(json.loads(text.decode("utf-8")))
    return out


_lock = threading.Lock()
_OPS = None


def _table():
    global _OPS
    if _OPS is None:
        with _lock:
            if _OPS is None:
                _OPS = collections.OrderedDict((o.name, o) for o in map(op_from_json, library_json()))
    return _OPS


def ops():
    """The names of every registered op, in the registry's order. Loads the
    library (kloss.LibraryNotFound without it)."""
    return list(_table())


def op_info(name):
    """The OpInfo of op `name`; kloss.NotSupported for an unknown name,
    kloss.LibraryNotFound without the library."""
    try:
        return _table()[name]
    except KeyError:
        raise _errors.NotSupported("kloss::%s: no such op in kloss (kloss.ops() lists them)" % name) from None


def lazy_ops(namespace, module, base_all, define):
    """(__getattr__, __dir__) for module `module` (namespace: its globals)
    whose op functions are made on first use: define(info) returns
    {attribute name: function} for one op. Until then the module holds only
    what it defines itself; __all__ is base_all plus the ops' functions.

    A public name the module lacks builds the table: kloss.LibraryNotFound
    (an ImportError) when the library cannot be loaded, since which names
    are ops only the library knows; a private one is an AttributeError."""
    state = {}
    lock = threading.Lock()

    def names():
        if "names" not in state:
            with lock:
                if "names" not in state:
                    made = collections.OrderedDict()
                    for name in ops():
                        made.update(define(op_info(name)))
                    namespace.update(made)
                    namespace["__all__"] = list(base_all) + list(made)
                    state["names"] = list(made)
        return state["names"]

    def __getattr__(name):
        if name == "__all__" or not name.startswith("_"):
            try:
                names()
            except _errors.LibraryNotFound as e:
                raise _errors.LibraryNotFound("%s.%s: kloss's ops come from libkloss_c, which is not loaded: %s"
                                              % (module, name, e)) from None
            if name in namespace:
                return namespace[name]
        raise AttributeError("module %r has no attribute %r" % (module, name))

    def __dir__():
        try:
            names()
        except _errors.Error:
            pass
        return sorted(set(namespace) | {"__all__"})

    return __getattr__, __dir__
