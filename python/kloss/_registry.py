"""The ops kloss registers (include/kloss/registry.hpp), as `kloss-ops`
lists them: torch's names, argument names, differentiable arguments and
options with torch's defaults.

The C API (include/kloss/c_api.h) creates a loss by name but cannot list
the registry, so this table is written out here. tests/test_registry.py
compares it with `kloss-ops` of the library under test (names, inputs,
gradients, option names and defaults), so a registry change that is not
made here fails CI instead of drifting. What kloss-ops does not print and
this table adds: each option's type (the registry's OptionInfo::type),
which inputs hold indices (OpInfo::index_inputs / index_or_real_inputs)
and how many leading inputs torch's signature takes positionally.
"""
import collections

__all__ = ["OpInfo", "OptionInfo", "ops", "op_info"]

OptionInfo = collections.namedtuple("OptionInfo", "name type default text")
OptionInfo.__doc__ = """One option: torch's keyword, its registry type ("real", "int",
"bool", "string"), torch's default as a Python value (None: unset) and as
the registry's text."""


class OpInfo(collections.namedtuple(
        "OpInfo", "name inputs optional differentiable options index_inputs either_inputs positional")):
    """One registered op.

    inputs: torch's argument names in order; optional: those that may be
    omitted (the registry's trailing '?'); differentiable: the inputs kloss
    returns a gradient for; options: OptionInfo tuple; index_inputs: inputs
    holding integer indices; either_inputs: inputs holding indices or reals
    (cross_entropy's target); positional: how many leading inputs torch's
    signature takes positionally (the rest, like the options, are
    keyword-only here).
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


_REDUCTION = ("reduction", "string", "mean")
_CE = (("ignore_index", "int", "-100"), _REDUCTION, ("label_smoothing", "real", "0.0"),
       ("z_loss", "real", "0.0"), ("softcap", "real", "0.0"))


def _embedding(before_sparse=()):
    return (("padding_idx", "int", "None"), ("max_norm", "real", "None"), ("norm_type", "real", "2.0"),
            ("scale_grad_by_freq", "bool", "False")) + tuple(before_sparse) + \
        (("sparse", "bool", "False"), ("deterministic", "bool", "False"))


# name, inputs ('?' optional), differentiable, options, index inputs,
# index-or-real inputs, torch's positional inputs. In registry order
# (src/registry.cpp: pointwise, cross_entropy, margin, ctc, embedding,
# fused_linear).
_TABLE = (
    ("mse_loss", "input target", "input target", (_REDUCTION,), "", "", 2),
    ("l1_loss", "input target", "input target", (_REDUCTION,), "", "", 2),
    ("smooth_l1_loss", "input target", "input target", (_REDUCTION, ("beta", "real", "1.0")), "", "", 2),
    ("huber_loss", "input target", "input target", (_REDUCTION, ("delta", "real", "1.0")), "", "", 2),
    ("soft_margin_loss", "input target", "input", (_REDUCTION,), "", "", 2),
    ("binary_cross_entropy", "input target weight?", "input", (_REDUCTION,), "", "", 3),
    ("binary_cross_entropy_with_logits", "input target weight? pos_weight?", "input", (_REDUCTION,), "", "", 3),
    ("kl_div", "input target", "input", (_REDUCTION, ("log_target", "bool", "False")), "", "", 2),
    ("poisson_nll_loss", "input target", "input",
     (("log_input", "bool", "True"), ("full", "bool", "False"), ("eps", "real", "1e-08"), _REDUCTION), "", "", 2),
    ("gaussian_nll_loss", "input target var", "input var",
     (("full", "bool", "False"), ("eps", "real", "1e-06"), _REDUCTION), "", "", 3),
    ("nll_loss", "input target weight?", "input", (("ignore_index", "int", "-100"), _REDUCTION), "target", "", 3),
    ("cross_entropy", "input target weight?", "input", _CE, "", "target", 3),
    ("hinge_embedding_loss", "input target", "input", (("margin", "real", "1.0"), _REDUCTION), "", "", 2),
    ("margin_ranking_loss", "input1 input2 target", "input1 input2", (("margin", "real", "0.0"), _REDUCTION),
     "", "", 3),
    ("triplet_margin_loss", "anchor positive negative", "anchor positive negative",
     (("margin", "real", "1.0"), ("p", "real", "2.0"), ("eps", "real", "1e-06"), ("swap", "bool", "False"),
      _REDUCTION), "", "", 3),
    ("cosine_embedding_loss", "input1 input2 target", "input1 input2", (("margin", "real", "0.0"), _REDUCTION),
     "", "", 3),
    ("multi_margin_loss", "input target weight?", "input",
     (("p", "int", "1"), ("margin", "real", "1.0"), _REDUCTION), "target", "", 2),
    ("multilabel_margin_loss", "input target", "input", (_REDUCTION,), "target", "", 2),
    ("multilabel_soft_margin_loss", "input target weight?", "input", (_REDUCTION,), "", "", 3),
    ("ctc_loss", "log_probs targets input_lengths target_lengths", "log_probs",
     (_REDUCTION, ("blank", "int", "0"), ("zero_infinity", "bool", "False"), ("ctc_grad", "bool", "False")),
     "targets input_lengths target_lengths", "", 4),
    ("embedding", "input weight", "weight", _embedding(), "input", "", 2),
    ("embedding_bag", "input weight offsets? per_sample_weights?", "weight per_sample_weights",
     (("mode", "string", "mean"),) + _embedding([("include_last_offset", "bool", "False")]), "input offsets", "", 3),
    ("fused_linear_cross_entropy", "input weight target bias? ce_weight?", "input weight bias", _CE, "", "target",
     5),
)


def _build():
    out = collections.OrderedDict()
    for name, inputs, diff, options, index, either, positional in _TABLE:
        raw = inputs.split()
        out[name] = OpInfo(
            name=name,
            inputs=tuple(n.rstrip("?") for n in raw),
            optional=tuple(n.rstrip("?") for n in raw if n.endswith("?")),
            differentiable=tuple(diff.split()),
            options=tuple(OptionInfo(o, t, _value(t, d), d) for o, t, d in options),
            index_inputs=tuple(index.split()),
            either_inputs=tuple(either.split()),
            positional=positional,
        )
    return out


_OPS = _build()


def ops():
    """The names of every registered op, in the registry's order."""
    return list(_OPS)


def op_info(name):
    """The OpInfo of op `name`; kloss.NotSupported for an unknown name."""
    try:
        return _OPS[name]
    except KeyError:
        from ._errors import NotSupported
        raise NotSupported("kloss::%s: no such op in kloss (kloss.ops() lists them)" % name) from None
