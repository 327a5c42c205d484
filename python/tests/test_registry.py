"""The op table against the library's registry (kloss-ops), and the
generated functions' names and signatures."""
import inspect
import subprocess

import numpy as np
import pytest

import kloss
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
    assert list(listed) == kloss.ops(), "op names or order differ from kloss-ops: update kloss/_registry.py"
    for name, (inputs, grads, options) in listed.items():
        info = kloss.op_info(name)
        assert inputs == [n + ("?" if n in info.optional else "") for n in info.inputs], name
        assert grads == list(info.differentiable), name
        assert list(options) == [o.name for o in info.options], name
        for o in info.options:
            assert _same_default(o, options[o.name]), (name, o.name, options[o.name], o.default)


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


def test_every_op_has_a_test_case():
    assert {c.op for c in cases()} == set(kloss.ops())


def test_signatures_are_torchs():
    sig = inspect.signature(kloss.cross_entropy)
    assert str(sig).startswith("(input, target, weight=None, *, ignore_index=-100, reduction='mean', "
                               "label_smoothing=0.0")
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
    with pytest.raises(kloss.NotSupported, match="no such op"):
        kloss.op_info("softmax")


def test_library_is_loaded_and_versioned():
    assert "kloss_c" in kloss.library_path()
    v = kloss.library_version()
    assert v is None or v.count(".") == 2
