# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Every op, forward and backward, on NumPy arrays without PyTorch: hand
values, float64 NumPy references (reference.py) and central differences
of those references; the narrower dtypes against float64."""
import numpy as np
import pytest

import kloss
import reference
from cases import cases

CASES = cases()


def _call(c, fn=None, **extra):
    return getattr(kloss, fn or c.op)(**c.inputs, **c.options, **extra)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_forward_matches_the_numpy_reference(c):
    got = _call(c)
    want = reference.forward(c.op, c.inputs, c.options)
    assert got.dtype == np.float64
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_backward_matches_central_differences(c):
    info = kloss.op_info(c.op)
    diff = [n for n in info.differentiable if n in c.inputs]
    out = _call(c)
    go = np.random.default_rng(7).uniform(0.5, 1.5, out.shape)
    opts = dict(c.options)
    if c.op == "ctc_loss":
        opts["ctc_grad"] = True  # the plain partial derivative (torch's autograd value: test_torch)
    grads = getattr(kloss, c.op + "_backward")(go, **c.inputs, **opts)
    assert grads._fields == info.differentiable
    want = reference.numeric_grads(c.op, c.inputs, c.options, go, diff)
    for name in info.differentiable:
        g = getattr(grads, name)
        if name not in c.inputs:
            assert g is None
            continue
        assert g.shape == np.shape(c.inputs[name]) and g.dtype == np.float64
        np.testing.assert_allclose(g, want[name], rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_inputs_are_not_mutated(c):
    before = {k: np.array(v, copy=True) for k, v in c.inputs.items()}
    _call(c, c.op + "_backward", grad_output=None)
    for k, v in c.inputs.items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


TOL = {np.float32: (2e-5, 1e-5), np.float16: (1e-2, 5e-3), "bfloat16": (6e-2, 3e-2)}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"], ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_narrow_dtypes_follow_float64(c, dtype):
    """Inputs rounded to the dtype, the result against float64 on the same
    rounded values (kloss computes 16-bit types in float)."""
    rtol, atol = TOL[dtype]
    name = "bfloat16" if dtype == "bfloat16" else np.dtype(dtype).name
    rounded = {k: (kloss.golden.rounded(v, name) if np.asarray(v).dtype.kind == "f" else v)
               for k, v in c.inputs.items()}
    want = _call(c._replace(inputs=rounded))
    if dtype == "bfloat16":
        got = _call(c, dtype="bfloat16")
        assert got.dtype == np.float32
    else:
        got = _call(c._replace(inputs={k: (v.astype(dtype) if np.asarray(v).dtype.kind == "f" else v)
                                       for k, v in c.inputs.items()}))
        assert got.dtype == dtype
    scale = max(1.0, float(np.nanmax(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol * scale)


def test_hand_values():
    # mse: ((1-0)^2 + (2-0)^2) / 2 = 2.5, d/dinput = 2 (x - y) / 2
    x, y = np.array([1.0, 2.0]), np.zeros(2)
    assert kloss.mse_loss(x, y) == 2.5
    g = kloss.mse_loss_backward(None, x, y)
    np.testing.assert_array_equal(g.input, [1.0, 2.0])
    np.testing.assert_array_equal(g.target, [-1.0, -2.0])
    np.testing.assert_array_equal(kloss.l1_loss(x, y, reduction="none"), [1.0, 2.0])
    # uniform logits over C classes: loss log(C), gradient (1/C - onehot) / N
    logits, t = np.zeros((2, 4)), np.array([1, 3])
    assert kloss.cross_entropy(logits, t) == pytest.approx(np.log(4))
    (gx,) = kloss.cross_entropy_backward(1.0, logits, t)
    np.testing.assert_allclose(gx, (0.25 - np.eye(4)[t]) / 2)
    # every target ignored under mean: NaN loss, zero gradient (torch's convention)
    t = np.array([-100, -100])
    assert np.isnan(kloss.cross_entropy(logits, t))
    np.testing.assert_array_equal(kloss.cross_entropy_backward(1.0, logits, t).input, 0)
    # embedding: rows gathered, gradient scattered (row 1 twice)
    w = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(kloss.embedding(np.array([1, 1, 2]), w), [[2, 3], [2, 3], [4, 5]])
    np.testing.assert_array_equal(kloss.embedding_backward(np.ones((3, 2)), np.array([1, 1, 2]), w).weight,
                                  [[0, 0], [2, 2], [1, 1]])
    # margin ranking: max(0, -y (x1 - x2) + margin)
    assert kloss.margin_ranking_loss(np.array([1.0]), np.array([3.0]), np.array([1.0]), margin=0.5,
                                     reduction="sum") == 2.5


def test_reduced_outputs_are_0d_arrays_and_grad_output_shapes_are_checked():
    x = np.ones((2, 3))
    out = kloss.mse_loss(x, 2 * x)
    assert out.shape == () and out == 1.0
    assert kloss.mse_loss(x, x, reduction="none").shape == (2, 3)
    g = kloss.mse_loss_backward(np.full((2, 3), 2.0), x, 2 * x, reduction="none")
    np.testing.assert_allclose(g.input, -4.0)
    with pytest.raises(kloss.DimensionMismatch, match="grad_output"):
        kloss.mse_loss_backward(np.ones((3, 2)), x, x, reduction="none")
    with pytest.raises(kloss.DimensionMismatch):
        kloss.mse_loss_backward(np.ones(5), x, x, reduction="none")


def test_dtype_promotion_and_python_inputs():
    x32 = np.ones(3, dtype=np.float32)
    assert kloss.mse_loss(x32, [0.0, 0.0, 0.0]).dtype == np.float32  # a list follows the array
    assert kloss.mse_loss(x32, np.zeros(3)).dtype == np.float64  # two arrays promote
    assert kloss.mse_loss([1.0, 2.0], [0, 0]).dtype == np.float64
    assert kloss.mse_loss(x32, x32, dtype="float64").dtype == np.float64
    h = kloss.hinge_embedding_loss(np.array([0.2, -0.4]), [1, -1], reduction="none")  # integer ±1 targets
    np.testing.assert_allclose(h, [0.2, 1.4])
    # int32 targets run with int32 indices, others int64: same values
    x = np.random.default_rng(2).standard_normal((5, 4))
    t = np.array([0, 3, 1, 1, 2])
    assert kloss.nll_loss(x, t.astype(np.int32)) == kloss.nll_loss(x, t) == kloss.nll_loss(x, t.tolist())
    r = kloss.run("nll_loss", {"input": x, "target": t}, index_dtype="int32", backward=True)
    assert set(r.grads) == {"input"} and r.output == kloss.nll_loss(x, t)


def test_non_contiguous_inputs():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 8))[:, ::2]
    y = rng.standard_normal((4, 6)).T
    assert kloss.mse_loss(x, y) == pytest.approx(((x - y) ** 2).mean())


def test_run_returns_output_and_gradients_together():
    x, t = np.array([[0.0, 1.0], [2.0, 0.0]]), np.array([1, 0])
    r = kloss.run("cross_entropy", {"input": x, "target": t}, {"reduction": "sum"}, backward=True)
    assert r.output == kloss.cross_entropy(x, t, reduction="sum")
    np.testing.assert_allclose(r.grads["input"], kloss.cross_entropy_backward(None, x, t, reduction="sum").input)
    assert kloss.run("cross_entropy", {"input": x, "target": t}).grads == {}
