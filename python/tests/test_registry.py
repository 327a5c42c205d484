# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The op table, which kloss builds from the library's kloss_op_json,
against kloss-ops' listing of the same registry (another path from
src/registry.cpp to text), the JSON itself, the torch facts kloss adds
(_registry.TORCH_POSITIONAL), and the generated functions' names and
signatures."""
import inspect
import subprocess

import numpy as np
import pytest

import kloss
from kloss import _lib, _registry, functional
from cases import cases


def _parse_kloss_ops(text):
    """{op: (inputs with '?', grads, {option: default text})} of kloss-ops'
    plain listing: `name  (a, b?)  grads: a, b  options: k=v, ...`."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, rest = line.split("  (", 1)
        inputs, rest = rest.split(")  grads: ", 1)
        grads, options = rest.split("  options: ", 1)
        opts = {}
        for item in filter(None, (s.strip() for s in options.split(","))):
            k, v = item.split("=", 1)
            opts[k] = v
        out[name.strip()] = ([s.strip() for s in inputs.split(",") if s.strip()],
                             [s.strip() for s in grads.split(",") if s.strip()], opts)
    return out


def _same_default(o, text):
    if text == "None" or o.default is None:
        return text == "None" and o.default is None
    if o.type == "bool":
        return text.lower() == str(o.default).lower()
    if o.type in ("real", "int"):
        return float(text) == float(o.default)
    return text == o.default


def test_table_matches_the_registry_of_kloss_ops(kloss_ops):
    listed = _parse_kloss_ops(subprocess.run([kloss_ops], check=True, stdout=subprocess.PIPE,
                                             universal_newlines=True).stdout)
    assert list(listed) == kloss.ops(), "op names or order differ between kloss_op_json and kloss-ops"
    for name, (inputs, grads, options) in listed.items():
        info = kloss.op_info(name)
        assert inputs == [n + ("?" if n in info.optional else "") for n in info.inputs], name
        assert grads == list(info.differentiable), name
        assert list(options) == [o.name for o in info.options], name
        for o in info.options:
            assert o.text == options[o.name], (name, o.name, options[o.name], o.text)
            assert _same_default(o, options[o.name]), (name, o.name, options[o.name], o.default)


def test_library_json_is_well_formed():
    objects = _registry.library_json()
    assert objects and len(objects) == _lib.handle().kloss_op_count()
    assert len({o["name"] for o in objects}) == len(objects), "duplicate op names"
    for o in objects:
        name = o["name"]
        assert set(o) == {"name", "header", "summary", "inputs", "differentiable", "index_inputs",
                          "index_or_real_inputs", "options"}, name
        assert o["header"].startswith("kloss/") and o["header"].endswith(".hpp"), name
        assert o["summary"], name
        inputs = [n.rstrip("?") for n in o["inputs"]]
        assert len(set(inputs)) == len(inputs) and all(n.isidentifier() for n in inputs), name
        optional = [n.endswith("?") for n in o["inputs"]]
        assert not optional[0] and all(n.count("?") <= 1 for n in o["inputs"]), name
        for key in ("differentiable", "index_inputs", "index_or_real_inputs"):
            assert set(o[key]) <= set(inputs), (name, key)
        assert not set(o["index_inputs"]) & set(o["index_or_real_inputs"]), name
        assert not set(o["differentiable"]) & set(o["index_inputs"]), name
        names = [opt["name"] for opt in o["options"]]
        assert len(set(names)) == len(names) and not set(names) & set(inputs), name
        assert not set(names) & {"dtype", "index_dtype", "grad_output", "comm", "reproducible"}, name  # taken by the functions
        for opt in o["options"]:
            assert set(opt) == {"name", "type", "default", "doc"}, (name, opt)
            assert opt["type"] in _registry.OPTION_TYPES, (name, opt)
            assert isinstance(opt["doc"], str), (name, opt)
        assert _registry.op_from_json(o) == kloss.op_info(name)


def test_op_json_out_of_range_is_null_with_a_message():
    h = _lib.handle()
    for i in (-1, h.kloss_op_count()):
        assert h.kloss_op_json(i) is None
        assert b"outside" in h.kloss_last_error()
    assert h.kloss_op_json(0) is not None and h.kloss_last_error() == b""


def test_torch_positional_exceptions_are_registered_ops_and_not_the_rule():
    for name, n in _registry.TORCH_POSITIONAL.items():
        info = kloss.op_info(name)  # NotSupported: an op kloss no longer has
        assert info.positional == n
        assert len(info.required) <= n < len(info.inputs), (name, "the default rule gives this count")
    for name in kloss.ops():
        if name not in _registry.TORCH_POSITIONAL:
            assert kloss.op_info(name).positional == len(kloss.op_info(name).inputs), name


def test_a_new_op_needs_no_python_edit():
    # what the library would list for an op added to kloss: its functions
    # follow from the JSON alone
    info = _registry.op_from_json({
        "name": "new_loss", "header": "kloss/new.hpp", "summary": "a loss", "inputs": ["input", "target",
                                                                                        "weight?"],
        "differentiable": ["input"], "index_inputs": ["target"], "index_or_real_inputs": [],
        "options": [{"name": "reduction", "type": "string", "default": "mean", "doc": "none | mean | sum"},
                    {"name": "eps", "type": "real", "default": "1e-06", "doc": ""},
                    {"name": "n", "type": "int", "default": "None", "doc": ""},
                    {"name": "flag", "type": "bool", "default": "true", "doc": ""}]})
    assert info.positional == 3 and info.optional == ("weight",) and info.kind("target") == "index"
    assert [o.default for o in info.options] == ["mean", 1e-06, None, True]
    forward, backward = functional._make(info)
    assert str(inspect.signature(forward)) == ("(input, target, weight=None, *, reduction='mean', eps=1e-06, "
                                               "n=None, flag=True, dtype=None, index_dtype=None, comm=None, "
                                               "reproducible=False)")
    assert list(inspect.signature(backward).parameters)[0] == "grad_output"
    assert "a loss" in forward.__doc__
    with pytest.raises(kloss.InternalError, match="new_loss: option 'eps'"):
        _registry.op_from_json({"name": "new_loss", "inputs": ["input"], "differentiable": [],
                                "options": [{"name": "eps", "type": "real", "default": "tiny"}]})


def test_every_op_has_a_forward_and_a_backward_function():
    for name in kloss.ops():
        f, b = getattr(kloss, name), getattr(kloss, name + "_backward")
        assert f.__name__ == name and b.__name__ == name + "_backward"
        info = kloss.op_info(name)
        params = inspect.signature(f).parameters
        assert list(params)[:info.positional] == list(info.inputs[:info.positional])
        for o in info.options:
            assert params[o.name].kind is inspect.Parameter.KEYWORD_ONLY
            assert params[o.name].default == o.default
        assert list(inspect.signature(b).parameters)[0] == "grad_output"
        assert name in f.__doc__
        assert f is getattr(functional, name) and b is getattr(functional, name + "_backward")
        assert name in kloss.__all__ and name + "_backward" in kloss.__all__ and name in dir(kloss)


def test_every_op_has_a_test_case():
    assert {c.op for c in cases()} == set(kloss.ops())


def test_signatures_are_torchs():
    sig = inspect.signature(kloss.cross_entropy)
    # (kloss's sample_weight keyword-only: torch's size_average follows weight)
    assert str(sig).startswith("(input, target, weight=None, *, sample_weight=None, ignore_index=-100, "
                               "reduction='mean', label_smoothing=0.0")
    sig = inspect.signature(kloss.ctc_loss)
    assert list(sig.parameters)[:4] == ["log_probs", "targets", "input_lengths", "target_lengths"]
    assert sig.parameters["blank"].default == 0 and sig.parameters["zero_infinity"].default is False
    # torch takes multi_margin_loss's weight and embedding_bag's
    # per_sample_weights after options: keyword-only here
    assert inspect.signature(kloss.multi_margin_loss).parameters["weight"].kind is inspect.Parameter.KEYWORD_ONLY
    assert inspect.signature(kloss.embedding_bag).parameters["per_sample_weights"].kind is \
        inspect.Parameter.KEYWORD_ONLY


def test_positional_and_keyword_calls_agree():
    rng = np.random.default_rng(1)
    x, t, w = rng.standard_normal((4, 3)), np.array([0, 2, 1, 2]), rng.uniform(0.5, 2, 3)
    assert kloss.cross_entropy(x, t, w) == kloss.cross_entropy(input=x, target=t, weight=w)
    with pytest.raises(TypeError):
        kloss.cross_entropy(x, t, w, -100)  # options are keyword-only
    with pytest.raises(TypeError):
        kloss.mse_loss(x, x, size_average=True)  # torch's deprecated keywords are not taken
    with pytest.raises(TypeError):
        kloss.mse_loss(x)


def test_op_info_and_unknown_op():
    info = kloss.op_info("embedding_bag")
    assert info.index_inputs == ("input", "offsets")
    assert info.optional == ("offsets", "per_sample_weights")
    assert info.option("mode").default == "mean"
    assert kloss.op_info("cross_entropy").kind("target") == "either"
    assert info.header == "kloss/embedding.hpp" and info.summary
    assert info.option("mode").type == "string" and info.option("padding_idx").default is None
    with pytest.raises(kloss.NotSupported, match="no such op"):
        kloss.op_info("softmax")


def test_library_is_loaded_and_versioned():
    assert "kloss_c" in kloss.library_path()
    v = kloss.library_version()
    assert v is None or v.count(".") == 2
