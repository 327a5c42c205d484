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


def _floating(v):
    return np.issubdtype(np.asarray(v).dtype, np.floating)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_backward_matches_central_differences(c):
    info = kloss.op_info(c.op)
    # (cross_entropy's target is differentiable where it holds probabilities)
    diff = [n for n in info.differentiable if n in c.inputs and _floating(c.inputs[n])]
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
        if name not in diff:
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
    # (an all-NaN want: a masked mean over no counted element)
    scale = max(1.0, float(np.nanmax(np.abs(want))) if want.size and not np.isnan(want).all() else 1.0)
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
    gx = kloss.cross_entropy_backward(1.0, logits, t).input
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


def test_masked_hand_values():
    """kloss's weights and masks (docs/weights.md) by hand: a NaN target
    under mask_nonfinite counts nowhere (not 0 * NaN), the mean is over the
    counted weights (huber_loss: their count), and a mean over nothing is
    NaN with zero gradients."""
    x, y, w = np.array([1.0, 2.0, 3.0]), np.array([0.0, np.nan, 0.0]), np.array([1.0, 5.0, 3.0])
    # mse: (1 * 1 + 3 * 9) / (1 + 3) = 7; d/dx = 2 w (x - y) / 4; d/dw = (l - 7) / 4
    assert kloss.mse_loss(x, y, weight=w, mask_nonfinite=True) == pytest.approx(7.0)
    g = kloss.mse_loss_backward(None, x, y, weight=w, mask_nonfinite=True)
    np.testing.assert_allclose(g.input, [0.5, 0.0, 4.5])
    np.testing.assert_allclose(g.target, [-0.5, 0.0, -4.5])
    np.testing.assert_allclose(g.weight, [-1.5, 0.0, 0.5])
    np.testing.assert_allclose(kloss.mse_loss(x, y, weight=w, mask_nonfinite=True, reduction="none"), [1.0, 0.0, 27.0])
    assert kloss.mse_loss(x, y, weight=w, mask_nonfinite=True, reduction="sum") == pytest.approx(28.0)
    # without mask_nonfinite the NaN is the loss's
    assert np.isnan(kloss.mse_loss(x, y, weight=w, mask=np.ones(3)))
    # a mask: element 0 out; huber (delta 1): l = 1.5, 2.5 (linear), the mean over the count 2
    m = np.array([0.0, 1.0, 1.0])
    y = np.zeros(3)
    assert kloss.huber_loss(x, y, weight=w, mask=m) == pytest.approx((5 * 1.5 + 3 * 2.5) / 2)
    assert kloss.l1_loss(x, y, weight=w, mask=m) == pytest.approx((5 * 2 + 3 * 3) / 8)
    # nothing counted: the mean is NaN, every gradient 0
    assert np.isnan(kloss.mse_loss(x, y, weight=w, mask=np.zeros(3)))
    g = kloss.mse_loss_backward(None, x, y, weight=w, mask=np.zeros(3))
    for name in ("input", "target", "weight"):
        np.testing.assert_array_equal(getattr(g, name), 0.0, err_msg=name)
    assert kloss.mse_loss(x, y, weight=w, mask=np.zeros(3), reduction="sum") == 0.0


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


def _lce_reference(x, w, t, b, cw, reduction, ignore_index):
    """torch 2.15's reference composition of F.linear_cross_entropy in
    float64: linear over the flattened weight, the logits reshaped to
    (*input.shape[:-1], C, d_1, ..., d_K), then cross_entropy."""
    z = x.reshape(-1, x.shape[-1]) @ w.reshape(-1, w.shape[-1]).T
    if b is not None:
        z = z + b.reshape(-1)
    z = z.reshape(x.shape[:-1] + w.shape[:-1])
    unbatched = z.ndim == 1  # cross_entropy's unbatched (C,) logits: one row
    inputs = {"input": z[None] if unbatched else z, "target": np.reshape(t, (1,)) if unbatched else t}
    if cw is not None:
        inputs["weight"] = cw
    out = reference.forward("cross_entropy", inputs, {"reduction": reduction,
                                                       "ignore_index": -100 if ignore_index is None else ignore_index})
    return np.reshape(out, ()) if unbatched else out


@pytest.mark.parametrize("shape", ["2d", "unbatched", "kdim", "unbatched_kdim"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_linear_cross_entropy_takes_torchs_shapes(shape, reduction):
    rng = np.random.default_rng(11)
    C, D = 5, 4
    kdim = shape.endswith("kdim")
    w = rng.standard_normal((C, 3, D) if kdim else (C, D))
    b = rng.standard_normal(w.shape[:-1])
    cw = rng.uniform(0.5, 2, C)
    if shape.startswith("unbatched"):
        x = rng.standard_normal(D)
        t = rng.integers(0, C, 3) if kdim else np.array(2)
    else:
        x = rng.standard_normal((6, D))
        t = rng.integers(0, C, (6, 3) if kdim else 6)
        t[1] = -100  # ignored: ignore_index=None means -100, as torch maps it
    if shape == "unbatched_kdim":
        # torch's composition gives logits (C, 3) and a target (3,): cross_entropy reads them as 5 rows of 3 classes
        t = rng.integers(0, 3, C)
        cw = rng.uniform(0.5, 2, 3)
    kw = dict(linear_bias=b, weight=cw, reduction=reduction, ignore_index=None)
    got = kloss.linear_cross_entropy(x, w, t, **kw)
    want = _lce_reference(x, w, t, b, cw, reduction, None)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    go = np.random.default_rng(3).uniform(0.5, 1.5, got.shape)
    grads = kloss.linear_cross_entropy_backward(go, x, w, t, **kw)
    for name, arr in (("input", x), ("linear_weight", w), ("linear_bias", b)):
        num = np.zeros_like(arr)
        for i in np.ndindex(*arr.shape):
            vals = []
            for s in (1e-6, -1e-6):
                a = {"input": x, "linear_weight": w, "linear_bias": b}
                a[name] = arr.copy()
                a[name][i] += s
                vals.append(float((go * _lce_reference(a["input"], a["linear_weight"], t, a["linear_bias"], cw,
                                                         reduction, None)).sum()))
            num[i] = (vals[0] - vals[1]) / 2e-6
        g = getattr(grads, name)
        assert g.shape == arr.shape, name
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-7, err_msg=name)


def test_linear_cross_entropy_refuses_what_torch_refuses():
    x3 = np.zeros((2, 3, 4))
    with pytest.raises(kloss.DimensionMismatch, match="argument 'input' must have 1 or 2 dimensions"):
        kloss.linear_cross_entropy(x3, np.zeros((5, 4)), np.zeros((2, 5), dtype=np.int64))
    with pytest.raises(kloss.DimensionMismatch, match="linear_weight"):
        kloss.linear_cross_entropy(np.zeros((2, 4)), np.zeros((5, 3)), np.zeros(2, dtype=np.int64))


# (the plain calls: the masked ones are checked against reference.forward's masked form)
_MULTIVARIATE = [c for c in CASES if c.op in ("energy_score", "variogram_score")
                 and not reference.masked(c.op, c.inputs, c.options)]


@pytest.mark.parametrize("c", _MULTIVARIATE, ids=[c.id for c in _MULTIVARIATE])
def test_multivariate_backward_matches_the_analytic_gradients(c):
    out = _call(c)
    go = np.random.default_rng(9).uniform(0.5, 1.5, out.shape)
    grads = getattr(kloss, c.op + "_backward")(go, **c.inputs, **c.options)
    # the per-point weight's gradient too (none here: no weight given); not
    # variogram_score's pair weights
    point_weight = "weight" if c.op == "energy_score" else "point_weight"
    assert grads._fields == ("input", "target", point_weight)
    assert getattr(grads, point_weight) is None
    want = reference.multivariate_grads(c.op, c.inputs, c.options, go)
    for name in ("input", "target"):
        np.testing.assert_allclose(getattr(grads, name), want[name], rtol=1e-10, atol=1e-12, err_msg=name)


# Zero differences: point 0's members 0 and 1 one vector, member 2 on the
# observation; point 1's members 1 and 2 one vector, equal event values
# within members 0 and 2 and within the observation.
_TIES_X = np.array([[[0.5, -1.0, 2.0], [0.5, -1.0, 2.0], [1.0, 0.25, -0.5], [-2.0, 1.5, 0.0]],
                    [[0.75, 0.75, -1.0], [1.0, -1.0, 0.5], [1.0, -1.0, 0.5], [2.0, 2.0, 2.0]]])
_TIES_Y = np.array([[1.0, 0.25, -0.5], [0.5, 0.5, 1.0]])


@pytest.mark.parametrize("estimator", ["standard", "fair", "almost_fair"])
@pytest.mark.parametrize("op,p", [("energy_score", None), ("variogram_score", 0.5), ("variogram_score", 1.0),
                                  ("variogram_score", 2.0)])
def test_multivariate_zero_differences_have_zero_gradients(op, p, estimator):
    """A zero vector's norm and |0|^p contribute gradient 0 (torch's norm's
    convention; for p < 1 kloss's, where autograd is NaN): the analytic
    reference with those terms 0, and central differences (symmetric
    ones of a kink at 0 are 0 too)."""
    opts = {"estimator": estimator, "alpha": 0.6, "reduction": "none"}
    if p is not None:
        opts["p"] = p
    inputs = {"input": _TIES_X, "target": _TIES_Y}
    np.testing.assert_allclose(getattr(kloss, op)(**inputs, **opts), reference.forward(op, inputs, opts),
                               rtol=1e-12, atol=1e-13)
    go = np.array([0.75, 1.25])
    grads = getattr(kloss, op + "_backward")(go, **inputs, **opts)
    want = reference.multivariate_grads(op, inputs, opts, go)
    numeric = reference.numeric_grads(op, inputs, opts, go, ["input", "target"])
    for name in ("input", "target"):
        assert np.isfinite(getattr(grads, name)).all()
        np.testing.assert_allclose(getattr(grads, name), want[name], rtol=1e-10, atol=1e-12, err_msg=name)
        if p is None or p >= 1:  # (|d|^p with p < 1 is too curved near 0 for the steps)
            np.testing.assert_allclose(want[name], numeric[name], rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("estimator", ["standard", "fair", "almost_fair"])
def test_energy_score_of_one_variable_is_crps_ensemble(estimator):
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((6, 5)), rng.standard_normal(6)
    x[0, 1] = x[0, 3]  # a tie
    x[1, 2] = y[1]     # a member on the observation
    kw = dict(estimator=estimator, alpha=0.7, reduction="none")
    es = kloss.energy_score(x[:, :, None], y[:, None], **kw)
    np.testing.assert_allclose(es, kloss.crps_ensemble(x, y, member_dim=-1, **kw), rtol=1e-12, atol=1e-14)
    go = rng.uniform(0.5, 1.5, 6)
    g_es = kloss.energy_score_backward(go, x[:, :, None], y[:, None], **kw)
    g_crps = kloss.crps_ensemble_backward(go, x, y, member_dim=-1, **kw)
    np.testing.assert_allclose(g_es.input[:, :, 0], g_crps.input, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g_es.target[:, 0], g_crps.target, rtol=1e-12, atol=1e-14)


def test_multivariate_hand_values():
    # one member: the energy score is the distance to the observation
    x, y = np.array([[[3.0, 4.0]], [[1.0, 1.0]]]), np.zeros((2, 2))
    np.testing.assert_allclose(kloss.energy_score(x, y, reduction="none"), [5.0, np.sqrt(2)])
    np.testing.assert_allclose(kloss.energy_score_backward(np.ones(2), x, y, reduction="none").input,
                               [[[0.6, 0.8]], [[2 ** -0.5, 2 ** -0.5]]])
    # the spread term: members (0,0) and (3,4) on an observation at the first: 5/2 - 10/8 (standard)
    x, y = np.array([[[0.0, 0.0], [3.0, 4.0]]]), np.zeros((1, 2))
    assert kloss.energy_score(x, y) == pytest.approx(2.5 - 10 / 8)
    assert kloss.energy_score(x, y, estimator="fair") == pytest.approx(2.5 - 10 / 4)
    # one variable: no pairs, a variogram score of 0
    assert kloss.variogram_score(np.ones((3, 4, 1)), np.zeros((3, 1)), reduction="sum") == 0
    # members (0, 1) and (0, 3), observation (0, 2): f = 1, 3 (p = 1), o = 2, mu = 2: 0;
    # fair: minus the pairs' s^2/m = 2/2 each, two pairs
    x, y = np.array([[[0.0, 1.0], [0.0, 3.0]]]), np.array([[0.0, 2.0]])
    assert kloss.variogram_score(x, y, p=1.0) == 0
    assert kloss.variogram_score(x, y, p=1.0, estimator="fair") == pytest.approx(-2.0)
    # p = 2, weight w_01 = 2, w_10 = 0.5: f = 1, 9, o = 4, mu = 5: (4 - 5)^2 (2 + 0.5); fair: minus
    # s^2/m = 32/2 per pair
    w = np.array([[0.0, 2.0], [0.5, 0.0]])
    assert kloss.variogram_score(x, y, weight=w, p=2.0) == pytest.approx(2.5)
    assert kloss.variogram_score(x, y, weight=w, p=2.0, estimator="fair") == pytest.approx(2.5 * (1 - 16))
