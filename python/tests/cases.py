# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Small valid calls of every registered op (float64 NumPy inputs, odd
shapes, each option exercised somewhere), shared by the NumPy, golden and
PyTorch tests. cases() returns a fresh list of Call objects; every op of
kloss.ops() has at least one (test_registry checks that)."""
import collections

import numpy as np

Call = collections.namedtuple("Call", "id op inputs options")


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def cases(seed=20261127):
    rng = np.random.default_rng(seed)
    out = []

    def add(id_, op, inputs, **options):
        out.append(Call("%s-%s" % (op, id_), op, inputs, options))

    def randn(*shape):
        return rng.standard_normal(shape)

    def sign(*shape):
        return np.where(rng.random(shape) < 0.5, -1.0, 1.0)

    # element-wise
    for red in ("none", "mean", "sum"):
        for op in ("mse_loss", "l1_loss"):
            add(red, op, {"input": randn(3, 5), "target": randn(3, 5)}, reduction=red)
        add(red, "smooth_l1_loss", {"input": randn(3, 5), "target": randn(3, 5)}, reduction=red, beta=0.7)
        add(red, "huber_loss", {"input": randn(3, 5), "target": randn(3, 5)}, reduction=red, delta=0.6)
        add(red, "soft_margin_loss", {"input": randn(4, 3), "target": sign(4, 3)}, reduction=red)
        add(red, "quantile_loss", {"input": randn(4, 3), "target": randn(4, 1)}, reduction=red, quantile=0.9)
        add(red, "crps_ensemble", {"input": randn(4, 3, 5), "target": randn(4, 5)}, reduction=red, member_dim=1,
            estimator=("standard", "fair", "almost_fair")[("none", "mean", "sum").index(red)], alpha=0.9)
        add(red, "crps_gaussian", {"input": randn(4, 3), "target": randn(4, 1), "std": rng.uniform(0.3, 2, 3)},
            reduction=red)
    add("scalar", "mse_loss", {"input": np.array(1.5), "target": np.array(-0.25)})
    add("empty", "l1_loss", {"input": np.zeros((0, 3)), "target": np.zeros((0, 3))}, reduction="sum")
    add("beta0", "smooth_l1_loss", {"input": randn(7), "target": randn(7)}, beta=0.0)
    # torch 2.15's weight= (one weight masked; a target that broadcasts the input)
    wts = rng.uniform(0.25, 2, (3, 5))
    wts[1, 2] = 0.0
    for red in ("none", "mean", "sum"):
        for op in ("mse_loss", "l1_loss", "huber_loss"):
            add("weight_" + red, op, {"input": randn(3, 5), "target": randn(3, 5), "weight": wts}, reduction=red)
    add("weight_bcast", "mse_loss", {"input": randn(5), "target": randn(3, 5), "weight": rng.uniform(0.25, 2, 5)})
    add("plain", "binary_cross_entropy", {"input": rng.uniform(0.05, 0.95, (3, 4)), "target": rng.random((3, 4))})
    add("weight", "binary_cross_entropy",
        {"input": rng.uniform(0.05, 0.95, (3, 4)), "target": rng.random((3, 4)), "weight": rng.uniform(0.5, 2, 4)},
        reduction="sum")
    add("plain", "binary_cross_entropy_with_logits", {"input": 3 * randn(3, 4), "target": rng.random((3, 4))},
        reduction="none")
    add("weights", "binary_cross_entropy_with_logits",
        {"input": 3 * randn(3, 4), "target": rng.random((3, 4)), "weight": rng.uniform(0.5, 2, (3, 4)),
         "pos_weight": rng.uniform(0.5, 3, 4)})
    lp = _log_softmax(randn(4, 5), 1)
    add("probs", "kl_div", {"input": lp, "target": np.exp(_log_softmax(randn(4, 5), 1))}, reduction="batchmean")
    add("log_target", "kl_div", {"input": lp, "target": _log_softmax(randn(4, 5), 1)}, reduction="sum",
        log_target=True)
    add("zero_target", "kl_div", {"input": lp, "target": np.where(rng.random((4, 5)) < 0.3, 0.0, 0.2)},
        reduction="none")
    add("log_input", "poisson_nll_loss", {"input": randn(3, 4), "target": rng.poisson(2.0, (3, 4)).astype(float)})
    add("rate_full", "poisson_nll_loss",
        {"input": rng.uniform(0.2, 3, (3, 4)), "target": rng.poisson(3.0, (3, 4)).astype(float)}, log_input=False,
        full=True, reduction="sum")
    add("same_shape", "gaussian_nll_loss",
        {"input": randn(3, 4), "target": randn(3, 4), "var": rng.uniform(0.3, 2, (3, 4))})
    add("var_col_full", "gaussian_nll_loss",
        {"input": randn(3, 4), "target": randn(3, 4), "var": rng.uniform(0.3, 2, (3, 1))}, full=True,
        reduction="none")
    add("var_row_eps", "gaussian_nll_loss",
        {"input": randn(3, 4), "target": randn(3, 4), "var": rng.uniform(0.6, 2, 3)}, eps=0.5, reduction="sum")
    add("beta_nll", "gaussian_nll_loss",
        {"input": randn(3, 4), "target": randn(3, 4), "var": rng.uniform(0.3, 2, (3, 4))}, beta=0.5)
    add("beta_nll_var_row_full", "gaussian_nll_loss",
        {"input": randn(3, 4), "target": randn(3, 4), "var": rng.uniform(0.3, 2, 3)}, beta=1.0, full=True,
        reduction="none")

    # class-index losses
    t = np.array([0, 3, 1, -100, 2, 3])
    add("ignore", "nll_loss", {"input": _log_softmax(randn(6, 4), 1), "target": t})
    add("weight_kdim", "nll_loss",
        {"input": _log_softmax(randn(2, 4, 3), 1), "target": rng.integers(0, 4, (2, 3)),
         "weight": rng.uniform(0.5, 2, 4)}, reduction="sum", ignore_index=1)
    add("smoothing", "cross_entropy", {"input": 2 * randn(6, 5), "target": np.array([0, 4, 1, 2, 2, 3])},
        label_smoothing=0.1)
    add("weight_ignore", "cross_entropy",
        {"input": 2 * randn(6, 5), "target": np.array([0, 4, 1, -100, 2, 3]), "weight": rng.uniform(0.5, 2, 5)},
        label_smoothing=0.2)
    add("int32_none", "cross_entropy",
        {"input": 2 * randn(5, 3), "target": np.array([0, 2, 1, 1, 0], dtype=np.int32)}, reduction="none")
    add("probs", "cross_entropy",
        {"input": 2 * randn(4, 5), "target": np.exp(_log_softmax(randn(4, 5), 1))}, label_smoothing=0.1)
    add("kdim", "cross_entropy", {"input": randn(2, 4, 3), "target": rng.integers(0, 4, (2, 3))}, reduction="sum")

    # margin
    add("plain", "hinge_embedding_loss", {"input": randn(4, 3), "target": sign(4, 3)}, margin=0.5)
    add("plain", "margin_ranking_loss", {"input1": randn(7), "input2": randn(7), "target": sign(7)}, margin=0.3)
    add("p2", "triplet_margin_loss", {"anchor": randn(4, 5), "positive": randn(4, 5), "negative": randn(4, 5)})
    add("p1_swap", "triplet_margin_loss",
        {"anchor": randn(4, 5), "positive": randn(4, 5), "negative": randn(4, 5)}, p=1.0, swap=True, margin=2.0,
        reduction="none")
    add("plain", "cosine_embedding_loss", {"input1": randn(5, 4), "input2": randn(5, 4), "target": sign(5)},
        margin=0.2, reduction="sum")
    add("p1", "multi_margin_loss", {"input": randn(4, 5), "target": np.array([0, 4, 2, 2])})
    add("p2_weight", "multi_margin_loss",
        {"input": randn(4, 5), "target": np.array([1, 3, 0, 4]), "weight": rng.uniform(0.5, 2, 5)}, p=2,
        margin=0.7, reduction="none")
    add("plain", "multilabel_margin_loss",
        {"input": randn(3, 5), "target": np.array([[3, 0, -1, 1, 1], [1, 2, 4, 0, -1], [-1, 0, 0, 0, 0]])})
    add("weight", "multilabel_soft_margin_loss",
        {"input": randn(3, 5), "target": (rng.random((3, 5)) < 0.5).astype(float),
         "weight": rng.uniform(0.5, 2, 5)}, reduction="sum")

    # ctc: log_probs [T, N, C], padded targets
    T, N, C = 7, 3, 5
    lp = _log_softmax(randn(T, N, C), 2)
    targets = np.array([[1, 2, 2], [3, 1, 0], [4, 0, 0]])
    for red in ("mean", "sum", "none"):
        add(red, "ctc_loss", {"log_probs": lp, "targets": targets, "input_lengths": np.array([7, 6, 5]),
                              "target_lengths": np.array([3, 2, 1])}, reduction=red)
    add("blank4_zero_inf", "ctc_loss",
        {"log_probs": lp, "targets": np.array([[1, 2, 3], [0, 1, 2], [2, 2, 2]]), "input_lengths": np.array([7, 6, 2]),
         "target_lengths": np.array([3, 3, 3])}, blank=4, zero_infinity=True, reduction="sum")

    # embedding
    add("plain", "embedding", {"input": np.array([[1, 2, 6], [0, 2, 5]]), "weight": randn(7, 4)})
    add("padding", "embedding", {"input": np.array([1, 2, 6, 2]), "weight": randn(7, 4)}, padding_idx=2)
    add("max_norm", "embedding", {"input": np.array([1, 3, 3]), "weight": randn(7, 4)}, max_norm=1.0)
    idx = np.array([1, 2, 6, 0, 2, 5, 5, 3])
    for mode in ("sum", "mean", "max"):
        add(mode, "embedding_bag", {"input": idx, "weight": randn(7, 4), "offsets": np.array([0, 3, 5])}, mode=mode)
    add("psw", "embedding_bag",
        {"input": idx, "weight": randn(7, 4), "offsets": np.array([0, 3, 5]), "per_sample_weights": randn(8)},
        mode="sum")
    add("2d_padding", "embedding_bag", {"input": idx.reshape(2, 4), "weight": randn(7, 4)}, padding_idx=5)
    add("last_offset", "embedding_bag",
        {"input": idx, "weight": randn(7, 4), "offsets": np.array([0, 2, 8])}, include_last_offset=True, mode="sum")

    # fused head
    add("plain", "fused_linear_cross_entropy",
        {"input": randn(5, 3), "weight": randn(6, 3), "target": np.array([0, 5, 2, -100, 3])})
    add("bias_ceweight", "fused_linear_cross_entropy",
        {"input": randn(5, 3), "weight": randn(6, 3), "target": np.array([0, 5, 2, 1, 3]), "bias": randn(6),
         "ce_weight": rng.uniform(0.5, 2, 6)}, label_smoothing=0.1, reduction="sum")
    probs = rng.uniform(0.1, 1, (5, 6))  # (no zero: gradcheck steps each one both ways)
    add("probs_ceweight", "fused_linear_cross_entropy",
        {"input": randn(5, 3), "weight": randn(6, 3), "target": probs / probs.sum(axis=1, keepdims=True),
         "bias": randn(6), "ce_weight": rng.uniform(0.5, 2, 6)}, label_smoothing=0.1)

    # grid losses (neural operators): [lead..., grid], one norm per function
    # (index of the leading axes); non-periodic h1 axes have >= 4 points
    for red in ("none", "mean", "sum"):
        add(red, "lp_loss", {"input": randn(2, 3, 7), "target": randn(2, 3, 7)}, reduction=red)
        add(red, "h1_loss", {"input": randn(2, 3, 8), "target": randn(2, 3, 8)}, reduction=red)
    add("p1.5_rel", "lp_loss", {"input": randn(3, 6), "target": randn(3, 6)}, p=1.5, reduction="none")
    add("p1.5_abs_2d", "lp_loss", {"input": randn(3, 5, 4), "target": randn(3, 5, 4)}, grid_ndim=2, p=1.5,
        relative=False, measure=2.0, reduction="sum")
    add("p2_abs_3d", "lp_loss", {"input": randn(2, 3, 4, 2), "target": randn(2, 3, 4, 2)}, grid_ndim=3,
        relative=False, measure=0.5)
    add("p1.5_rel_noroot", "lp_loss", {"input": randn(2, 2, 5), "target": randn(2, 2, 5)}, p=1.5, root=False,
        eps=1e-3, reduction="sum")
    add("one_function", "lp_loss", {"input": randn(6), "target": randn(6)}, reduction="none")
    add("1d_open", "h1_loss", {"input": randn(3, 6), "target": randn(3, 6)}, periodic="false", reduction="none")
    add("1d_open_abs", "h1_loss", {"input": randn(2, 5), "target": randn(2, 5)}, periodic="false",
        relative=False, measure=2.0, reduction="sum")
    add("2d_periodic", "h1_loss", {"input": randn(2, 5, 6), "target": randn(2, 5, 6)}, grid_ndim=2,
        periodic="true", measure=2.0)
    add("2d_open_abs", "h1_loss", {"input": randn(2, 4, 5), "target": randn(2, 4, 5)}, grid_ndim=2,
        periodic="false", relative=False, reduction="sum")
    add("2d_mixed", "h1_loss", {"input": randn(3, 5, 4), "target": randn(3, 5, 4)}, grid_ndim=2,
        periodic="true,false", reduction="none")
    add("2d_mixed_noroot", "h1_loss", {"input": randn(2, 4, 3), "target": randn(2, 4, 3)}, grid_ndim=2,
        periodic="false,true", root=False, eps=1e-3)
    add("3d_periodic", "h1_loss", {"input": randn(2, 3, 4, 5), "target": randn(2, 3, 4, 5)}, grid_ndim=3,
        reduction="sum")
    add("3d_open", "h1_loss", {"input": randn(1, 4, 5, 4), "target": randn(1, 4, 5, 4)}, grid_ndim=3,
        periodic="false", measure=0.5, reduction="none")
    add("3d_mixed_abs", "h1_loss", {"input": randn(2, 4, 3, 5), "target": randn(2, 4, 3, 5)}, grid_ndim=3,
        periodic="false,true,false", relative=False, root=False, measure=0.5)
    _multivariate_ensemble(add, np.random.default_rng(seed + 1))
    _quantiles(add, np.random.default_rng(seed + 2))
    _masked(add, np.random.default_rng(seed + 3))
    _masked_crps(add, np.random.default_rng(seed + 4))
    _sample_weights(add, np.random.default_rng(seed + 5))
    _masked_kl_poisson(add, np.random.default_rng(seed + 6))
    _masked_bce(add, np.random.default_rng(seed + 7))
    _masked_multivariate(add, np.random.default_rng(seed + 8))
    return out


def _masked_bce(add, rng):
    """kloss's masks on binary_cross_entropy and
    binary_cross_entropy_with_logits over torch's weight and pos_weight
    (docs/weights.md; its own generator: the other cases keep their
    values): a per-row mask with a per-column weight under each reduction,
    mask_nonfinite with NaN and infinite targets, pos_weight with a mask, a
    mask alone, and a mean over nothing (NaN, zero gradients). The mean is
    over the counted elements' count."""
    row_mask = np.array([[1.0], [0.0], [1.0]])  # row 1 masked out
    col_weight = rng.uniform(0.25, 2, 5)

    def probs(*shape):
        return rng.uniform(0.05, 0.95, shape)

    for red in ("mean", "sum", "none"):
        add("masked_" + red, "binary_cross_entropy",
            {"input": probs(3, 5), "target": rng.uniform(0, 1, (3, 5)), "weight": col_weight, "mask": row_mask},
            reduction=red)
        add("masked_" + red, "binary_cross_entropy_with_logits",
            {"input": rng.standard_normal((3, 5)) * 3, "target": rng.uniform(0, 1, (3, 5)), "weight": col_weight,
             "mask": row_mask}, reduction=red)
    for red in ("mean", "none"):
        y = rng.uniform(0, 1, (3, 5))
        y[0, 1], y[2, 3], y[1, 4] = np.nan, np.inf, -np.inf
        add("nonfinite_" + red, "binary_cross_entropy",
            {"input": probs(3, 5), "target": y, "weight": rng.uniform(0.25, 2, (3, 1))}, mask_nonfinite=True,
            reduction=red)
        add("nonfinite_" + red, "binary_cross_entropy_with_logits",
            {"input": rng.standard_normal((3, 5)), "target": y, "pos_weight": rng.uniform(0.5, 3, 5)},
            mask_nonfinite=True, reduction=red)
    add("pos_weight_mask", "binary_cross_entropy_with_logits",
        {"input": rng.standard_normal((3, 5)), "target": rng.uniform(0, 1, (3, 5)),
         "pos_weight": rng.uniform(0.5, 3, 5), "mask": np.array([1.0, 0.0, 1.0, 1.0, 0.0])}, reduction="sum")
    add("mask_only", "binary_cross_entropy",
        {"input": probs(3, 4), "target": rng.uniform(0, 1, (3, 4)),
         "mask": np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]])})
    add("all_masked_mean", "binary_cross_entropy_with_logits",
        {"input": rng.standard_normal((2, 3)), "target": rng.uniform(0, 1, (2, 3)), "weight": rng.uniform(0.25, 2, 3),
         "mask": np.zeros((2, 1))})


def _masked_multivariate(add, rng):
    """kloss's weights and masks on energy_score and variogram_score, per
    point (an event vector; variogram_score's weight per point is
    `point_weight`, its `weight` the pair weights) (docs/weights.md; its own
    generator: the other cases keep their values): input [3, 4, 5, 2 or 3]
    (4 members on axis 1, the event axis last, the points [3, 5]), a
    per-column weight and a per-row mask under each reduction, mask_nonfinite
    with a NaN or an infinity in one element of an observed vector, a weight
    per point, a scalar weight, a mask alone, an event block of two axes,
    and a mean over nothing (NaN, zero gradients)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    row_mask = np.array([[1.0], [0.0], [1.0]])  # row 1 masked out
    col_weight = rng.uniform(0.25, 2, 5)
    col_weight[3] = 0.0  # a counted point of weight 0: in the denominator as 0
    for est, red in (("fair", "mean"), ("almost_fair", "sum"), ("standard", "none")):
        add("masked_" + red, "energy_score",
            {"input": randn(3, 4, 5, 2), "target": randn(3, 5, 2), "weight": col_weight, "mask": row_mask},
            member_dim=1, estimator=est, alpha=0.8, reduction=red)
        add("masked_" + red, "variogram_score",
            {"input": randn(3, 4, 5, 3), "target": randn(3, 5, 3), "weight": rng.uniform(0.25, 2, (3, 3)),
             "point_weight": col_weight, "mask": row_mask},
            member_dim=1, estimator=est, alpha=0.8, p=1.0, reduction=red)
    # missing observations: one NaN or infinite element marks the whole vector missing
    for op, red, o in (("energy_score", "mean", {"estimator": "almost_fair"}),
                       ("energy_score", "none", {"estimator": "almost_fair"}),
                       ("variogram_score", "mean", {"estimator": "fair", "p": 2.0}),
                       ("variogram_score", "sum", {"estimator": "fair", "p": 2.0})):
        y = randn(3, 5, 2)
        y[0, 1, 0], y[2, 3, 1], y[1, 0, 1] = np.nan, np.inf, -np.inf
        add("nonfinite_" + red, op,
            {"input": randn(3, 4, 5, 2), "target": y, weight_name(op): rng.uniform(0.25, 2, (3, 1))},
            member_dim=1, mask_nonfinite=True, reduction=red, **o)
    add("weight_point", "energy_score",
        {"input": randn(3, 4, 5, 2), "target": randn(3, 5, 2), "weight": rng.uniform(0.25, 2, (3, 5))},
        member_dim=1, estimator="fair", reduction="mean")
    add("point_weight_scalar", "variogram_score",
        {"input": randn(3, 4, 5, 3), "target": randn(3, 5, 3), "point_weight": np.array(1.5)},
        member_dim=1, p=1.0, reduction="sum")
    add("mask_only", "variogram_score",
        {"input": randn(3, 4, 5, 3), "target": randn(3, 5, 3), "mask": (rng.random((3, 5)) < 0.6).astype(float)},
        member_dim=1, p=1.0, estimator="fair")
    # an event block of two axes before the members: input [2, 3, 4, 5] (the points [5])
    y = randn(2, 3, 5)
    y[1, 2, 4] = np.nan
    add("block_nonfinite", "energy_score",
        {"input": randn(2, 3, 4, 5), "target": y, "weight": rng.uniform(0.25, 2, 5)},
        member_dim=2, event_dims="0,1", mask_nonfinite=True, reduction="mean")
    # nothing counts: the mean is NaN, every gradient 0
    add("all_masked_mean", "energy_score",
        {"input": randn(3, 4, 5, 2), "target": randn(3, 5, 2), "weight": col_weight, "mask": np.zeros((3, 1))},
        member_dim=1, estimator="fair", reduction="mean")
    add("all_masked_mean", "variogram_score",
        {"input": randn(3, 4, 5, 3), "target": randn(3, 5, 3), "point_weight": col_weight,
         "mask": np.zeros((3, 1))}, member_dim=1, p=1.0, reduction="mean")


def weight_name(op):
    """The input of op's weight per point (variogram_score's `weight` is its
    pair weights)."""
    return "point_weight" if op == "variogram_score" else "weight"


def _sample_weights(add, rng):
    """kloss's sample_weight on cross_entropy and nll_loss, a weight per row
    (the rows' shape; its own generator: the other cases keep their
    values): class indices with class weights, an ignored row and label
    smoothing, K-dimensional input, class probabilities (with class weights
    and smoothing under the mean), nll_loss with class weights and an
    ignored row (K-dimensional under sum), each reduction; each has a row of
    sample weight 0. Then an unbatched [C] input with a scalar sample
    weight (class indices and probabilities)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    def sample_weights(*shape, zero=-1):
        s = rng.uniform(0.25, 2, shape)
        s.reshape(-1)[zero] = 0.0
        return s

    def probs(*shape):
        return np.exp(_log_softmax(randn(*shape), 1))

    for k, red in enumerate(("none", "mean", "sum")):
        add("sample_weight_" + red, "cross_entropy",
            {"input": 2 * randn(6, 5), "target": np.array([0, 4, 1, -100, 2, 3]), "weight": rng.uniform(0.5, 2, 5),
             "sample_weight": sample_weights(6, zero=2)}, label_smoothing=0.1, reduction=red)
        t = rng.integers(0, 4, (2, 3, 2))
        t[1, 0, 1] = -100
        add("sample_weight_kdim_" + red, "cross_entropy",
            {"input": randn(2, 4, 3, 2), "target": t.astype(np.int32) if k == 1 else t,
             "sample_weight": sample_weights(2, 3, 2)}, reduction=red)
        extra = {"weight": rng.uniform(0.5, 2, 5)} if red == "mean" else {}
        add("sample_weight_probs_" + red, "cross_entropy",
            dict({"input": 2 * randn(4, 5), "target": probs(4, 5), "sample_weight": sample_weights(4, zero=1)},
                 **extra), reduction=red, **({"label_smoothing": 0.15} if red == "mean" else {}))
        add("sample_weight_" + red, "nll_loss",
            {"input": _log_softmax(randn(6, 4), 1), "target": np.array([0, 3, -100, 1, 2, 3]),
             "weight": rng.uniform(0.5, 2, 4), "sample_weight": sample_weights(6, zero=0)}, reduction=red)
    add("sample_weight_probs_kdim", "cross_entropy",
        {"input": randn(2, 4, 3), "target": probs(2, 4, 3), "sample_weight": sample_weights(2, 3)}, reduction="sum")
    add("sample_weight_kdim_sum", "nll_loss",
        {"input": _log_softmax(randn(2, 4, 3), 1), "target": rng.integers(0, 4, (2, 3)),
         "weight": rng.uniform(0.5, 2, 4), "sample_weight": sample_weights(2, 3)}, reduction="sum", ignore_index=1)
    add("sample_weight_unbatched", "cross_entropy",
        {"input": 2 * randn(5), "target": np.array(3), "weight": rng.uniform(0.5, 2, 5),
         "sample_weight": np.array(rng.uniform(0.25, 2))}, label_smoothing=0.1)
    add("sample_weight_unbatched_probs", "cross_entropy",
        {"input": 2 * randn(5), "target": np.exp(_log_softmax(randn(5), 0)),
         "sample_weight": np.array(rng.uniform(0.25, 2))}, reduction="none")


def _masked(add, rng):
    """kloss's weights and masks on the element-wise losses (docs/weights.md;
    its own generator: the other cases keep their values): on each op a
    per-column weight and a per-row mask, under the mean and one other
    reduction, and mask_nonfinite with a NaN and an infinite target and a
    per-row weight; then the other layouts (a weight alone, a mask alone, a
    scalar weight, a target that broadcasts)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    def target(op, *shape):
        # soft_margin_loss's targets are +-1
        return np.where(rng.random(shape) < 0.5, -1.0, 1.0) if op == "soft_margin_loss" else randn(*shape)

    def extra(op, shape):
        # gaussian_nll_loss's var (above eps: its clamp is torch's convention, not a derivative)
        return {"var": rng.uniform(0.3, 2, shape)} if op == "gaussian_nll_loss" else {}

    options = {"smooth_l1_loss": {"beta": 0.7}, "huber_loss": {"delta": 0.6}, "quantile_loss": {"quantile": 0.3}}
    row_mask = np.array([[1.0], [0.0], [1.0]])  # row 1 masked out
    for k, op in enumerate(("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
                            "quantile_loss", "gaussian_nll_loss")):
        o = options.get(op, {})
        col_weight = rng.uniform(0.25, 2, 5)
        col_weight[3] = 0.0  # a counted element of weight 0: in the denominator as 0
        # a [3, 5] weight of 5 columns and a [3, 1] mask, broadcast; the mean and one other reduction
        for red in ("mean", ("none", "sum")[k % 2]):
            add("masked_" + red, op, dict({"input": randn(3, 5), "target": target(op, 3, 5), "weight": col_weight,
                                           "mask": row_mask}, **extra(op, (3, 5))), reduction=red, **o)
        # missing observations (anemoi's NaN mask): a NaN and an infinite target, a weight per row
        y = target(op, 3, 5)
        y[0, 1], y[2, 3] = np.nan, np.inf
        nonfinite = dict(o, beta=0.5) if op == "gaussian_nll_loss" else o  # and beta-NLL's factor
        add("nonfinite_" + ("sum", "none", "mean")[k % 3], op,
            dict({"input": randn(3, 5), "target": y, "weight": rng.uniform(0.25, 2, (3, 1))}, **extra(op, (3, 1))),
            mask_nonfinite=True, reduction=("sum", "none", "mean")[k % 3], **nonfinite)
    # the other layouts: an element-wise mask alone (the mean over the count), the
    # NaN mask alone, a scalar weight, a per-row weight alone (huber_loss: the
    # mean over the count, not the weights), a weight of the input's shape on
    # an op torch gives none, a target broadcasting the input with NaNs in it,
    # var per row under `full`
    add("mask_only", "mse_loss",
        {"input": randn(3, 5), "target": randn(3, 5), "mask": (rng.random((3, 5)) < 0.6).astype(float)})
    y = randn(4, 3)
    y[1, 2] = np.nan
    add("nonfinite_only", "mse_loss", {"input": randn(4, 3), "target": y}, mask_nonfinite=True)
    add("weight_scalar", "l1_loss", {"input": randn(3, 5), "target": randn(3, 5), "weight": np.array(1.75)},
        reduction="sum")
    add("weight_row", "huber_loss", {"input": 2 * randn(3, 5), "target": randn(3, 5),
                                     "weight": rng.uniform(0.25, 2, (3, 1))}, delta=0.6)
    add("weight_full", "soft_margin_loss",
        {"input": randn(3, 5), "target": target("soft_margin_loss", 3, 5), "weight": rng.uniform(0.25, 2, (3, 5))},
        reduction="none")
    y = randn(1, 5)
    y[0, 2] = np.nan
    add("nonfinite_bcast_target", "quantile_loss",
        {"input": randn(3, 5), "target": y, "mask": row_mask}, mask_nonfinite=True, quantile=0.8)
    add("masked_var_row_full", "gaussian_nll_loss",
        {"input": randn(3, 4), "target": randn(3, 4), "var": rng.uniform(0.3, 2, 3), "weight": rng.uniform(0.25, 2, 4),
         "mask": row_mask}, full=True, reduction="sum")


def _masked_crps(add, rng):
    """kloss's weights and masks on crps_ensemble (per point: the target's
    elements, the members on an inner axis of input) and crps_gaussian (per
    element of the broadcast of input, target and std) (docs/weights.md;
    its own generator: the other cases keep their values): a per-column
    weight and a per-row mask under each reduction (each estimator),
    mask_nonfinite with NaN and infinite targets and a per-row weight, a
    weight per point, a scalar weight, a mask alone, broadcast arguments,
    and a mean over nothing (NaN, zero gradients)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    row_mask = np.array([[1.0], [0.0], [1.0]])  # row 1 masked out
    col_weight = rng.uniform(0.25, 2, 5)
    col_weight[3] = 0.0  # a counted point of weight 0: in the denominator as 0

    # crps_ensemble: input [3, 4, 5], 4 members on axis 1, the points [3, 5]
    for est, red in (("fair", "mean"), ("almost_fair", "sum"), ("standard", "none")):
        add("masked_" + red, "crps_ensemble",
            {"input": randn(3, 4, 5), "target": randn(3, 5), "weight": col_weight, "mask": row_mask},
            member_dim=1, estimator=est, alpha=0.8, reduction=red)
    add("weight_point", "crps_ensemble",
        {"input": randn(3, 4, 5), "target": randn(3, 5), "weight": rng.uniform(0.25, 2, (3, 5))},
        member_dim=1, estimator="almost_fair", reduction="mean")
    # missing observations (anemoi's NaN mask): NaN and infinite targets, a weight per row
    for est, red in (("almost_fair", "mean"), ("fair", "none"), ("standard", "sum")):
        y = randn(3, 5)
        y[0, 1], y[2, 3], y[1, 0] = np.nan, np.inf, -np.inf
        add("nonfinite_" + red, "crps_ensemble",
            {"input": randn(3, 4, 5), "target": y, "weight": rng.uniform(0.25, 2, (3, 1))},
            member_dim=1, mask_nonfinite=True, estimator=est, alpha=0.7, reduction=red)
    # 6 members on the third of four axes: points [2, 3, 4], a mask [3, 4] broadcast
    # over the first axis, a scalar weight, NaN targets inside and outside the mask
    mk = (rng.random((3, 4)) < 0.6).astype(float)
    mk[0, 0], mk[1, 2] = 0.0, 1.0
    y = randn(2, 3, 4)
    y[0, 0, 0], y[1, 1, 2] = np.nan, np.nan
    add("inner_members_mask_nonfinite", "crps_ensemble",
        {"input": randn(2, 3, 6, 4), "target": y, "weight": np.array(0.75), "mask": mk},
        member_dim=2, mask_nonfinite=True, estimator="fair", reduction="mean")
    # members last: a mask alone (the mean over the count), a weight per column alone
    add("mask_only_members_last", "crps_ensemble",
        {"input": randn(4, 3, 5), "target": randn(4, 3), "mask": np.array([[1.0], [0.0], [1.0], [1.0]])},
        member_dim=-1, reduction="mean")
    add("weight_bcast_members_last", "crps_ensemble",
        {"input": randn(4, 3, 5), "target": randn(4, 3), "weight": rng.uniform(0.25, 2, 3)},
        member_dim=-1, estimator="fair", reduction="sum")
    # nothing counts: the mean is NaN, every gradient 0
    add("all_masked_mean", "crps_ensemble",
        {"input": randn(3, 4, 5), "target": randn(3, 5), "weight": col_weight, "mask": np.zeros((3, 1))},
        member_dim=1, estimator="almost_fair", reduction="mean")

    # crps_gaussian: input, target [3, 5], std per column
    for red in ("mean", "sum", "none"):
        add("masked_" + red, "crps_gaussian",
            {"input": randn(3, 5), "target": randn(3, 5), "std": rng.uniform(0.3, 2, 5), "weight": col_weight,
             "mask": row_mask}, reduction=red)
    for red in ("mean", "none"):
        y = randn(3, 5)
        y[0, 1], y[2, 3], y[1, 4] = np.nan, np.inf, -np.inf
        add("nonfinite_" + red, "crps_gaussian",
            {"input": randn(3, 5), "target": y, "std": rng.uniform(0.3, 2, (3, 1)),
             "weight": rng.uniform(0.25, 2, (3, 1))}, mask_nonfinite=True, reduction=red)
    # a target [4, 1] broadcasting input [4, 3] (its NaN masks a row), a weight per element
    y = randn(4, 1)
    y[2, 0] = np.nan
    add("nonfinite_bcast_target", "crps_gaussian",
        {"input": randn(4, 3), "target": y, "std": rng.uniform(0.3, 2, 3), "weight": rng.uniform(0.25, 2, (4, 3))},
        mask_nonfinite=True, reduction="mean")
    # an input [4, 1] broadcast by target and std [4, 3], a mask per column, a scalar weight
    add("bcast_input_mask_scalar_weight", "crps_gaussian",
        {"input": randn(4, 1), "target": randn(4, 3), "std": rng.uniform(0.3, 2, (4, 3)), "weight": np.array(1.5),
         "mask": np.array([1.0, 0.0, 1.0])}, reduction="sum")
    add("mask_only", "crps_gaussian",
        {"input": randn(3, 5), "target": randn(3, 5), "std": rng.uniform(0.3, 2, (3, 5)),
         "mask": (rng.random((3, 5)) < 0.6).astype(float)})
    # nothing counts (NaN targets in row 0, row 1 masked out): NaN, zero gradients
    y = randn(2, 3)
    y[0] = np.nan
    add("all_masked_mean", "crps_gaussian",
        {"input": randn(2, 3), "target": y, "std": rng.uniform(0.3, 2, 3), "weight": rng.uniform(0.25, 2, 3),
         "mask": np.array([[1.0], [0.0]])}, mask_nonfinite=True, reduction="mean")


def _masked_kl_poisson(add, rng):
    """kloss's weights and masks on kl_div and poisson_nll_loss
    (docs/weights.md; its own generator: the other cases keep their
    values): a per-column weight and a per-row mask under each reduction
    (kl_div with probabilities and with log-probabilities as targets;
    poisson_nll_loss on a log rate, and on a rate with `full`),
    mask_nonfinite with NaN and infinite targets and a per-row weight, a
    target that broadcasts, a mask alone, and a mean over nothing (NaN, zero
    gradients). No target is 0 where kl_div's target gradient is torch's NaN
    (probabilities), nor <= 0 or 1 under poisson's `full` (its target
    gradient NaN there, its Stirling term jumping at 1)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    def log_probs(*shape):
        return _log_softmax(randn(*shape), len(shape) - 1)

    row_mask = np.array([[1.0], [0.0], [1.0]])  # row 1 masked out
    col_weight = rng.uniform(0.25, 2, 5)
    col_weight[3] = 0.0  # a counted element of weight 0: in the denominator as 0

    # kl_div: input log-probabilities [3, 5]; targets probabilities or log-probabilities
    for red in ("mean", "sum", "none"):
        add("masked_" + red, "kl_div",
            {"input": log_probs(3, 5), "target": np.exp(log_probs(3, 5)), "weight": col_weight, "mask": row_mask},
            reduction=red)
        add("masked_log_target_" + red, "kl_div",
            {"input": log_probs(3, 5), "target": log_probs(3, 5), "weight": col_weight, "mask": row_mask},
            log_target=True, reduction=red)
    for red, lt in (("mean", False), ("none", True)):
        y = log_probs(3, 5) if lt else np.exp(log_probs(3, 5))
        y[0, 1], y[2, 3], y[1, 4] = np.nan, np.inf, -np.inf
        add("nonfinite_" + red, "kl_div",
            {"input": log_probs(3, 5), "target": y, "weight": rng.uniform(0.25, 2, (3, 1))}, log_target=lt,
            mask_nonfinite=True, reduction=red)
    # a target [5] broadcast over the rows, a mask alone (the mean over the count)
    add("bcast_target_mask_only", "kl_div",
        {"input": log_probs(3, 5), "target": np.exp(log_probs(5)),
         "mask": np.array([[1.0, 0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0, 1.0]])})

    # poisson_nll_loss: a log rate [3, 5] against counts; a rate with full
    for red in ("mean", "sum", "none"):
        add("masked_" + red, "poisson_nll_loss",
            {"input": randn(3, 5), "target": rng.poisson(2.0, (3, 5)).astype(float), "weight": col_weight,
             "mask": row_mask}, reduction=red)
    add("masked_rate_full", "poisson_nll_loss",
        {"input": rng.uniform(0.2, 3, (3, 5)), "target": rng.uniform(0.2, 5, (3, 5)), "weight": col_weight,
         "mask": row_mask}, log_input=False, full=True, eps=1e-3)
    # missing observations: NaN and infinite targets, a weight per row (full: no -inf, which
    # is <= 0, where torch's target gradient under full is NaN)
    for red, full in (("mean", True), ("sum", False)):
        y = rng.uniform(0.2, 5, (3, 5))
        y[0, 1], y[2, 3] = np.nan, np.inf
        if not full:
            y[1, 4] = -np.inf
        add("nonfinite_" + red, "poisson_nll_loss",
            {"input": randn(3, 5), "target": y, "weight": rng.uniform(0.25, 2, (3, 1))}, full=full,
            mask_nonfinite=True, reduction=red)
    # a target [3, 1] broadcast over the columns (its NaN masks a row), a weight per element
    y = rng.poisson(3.0, (3, 1)).astype(float)
    y[1, 0] = np.nan
    add("nonfinite_bcast_target", "poisson_nll_loss",
        {"input": randn(3, 4), "target": y, "weight": rng.uniform(0.25, 2, (3, 4))}, mask_nonfinite=True)
    # a mask per column alone, full (the mean over the count)
    add("mask_only_full", "poisson_nll_loss",
        {"input": randn(3, 4), "target": rng.uniform(0.2, 5, (3, 4)), "mask": np.array([1.0, 0.0, 1.0, 1.0])},
        full=True)
    # nothing counts: the mean is NaN, every gradient 0
    add("all_masked_mean", "poisson_nll_loss",
        {"input": randn(2, 3), "target": rng.poisson(2.0, (2, 3)).astype(float), "weight": rng.uniform(0.25, 2, 3),
         "mask": np.zeros((2, 1))}, reduction="mean")


def _quantiles(add, rng):
    """quantile_loss with the `quantiles` input, a quantile per element
    broadcast with input and target (its own generator: the other cases
    keep their values)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    # the quantile axis last: input [N, Q], target [N, 1], quantiles [Q]
    for red in ("none", "mean", "sum"):
        add("quantiles_" + red, "quantile_loss",
            {"input": randn(4, 3), "target": randn(4, 1), "quantiles": np.array([0.1, 0.5, 0.9])}, reduction=red)
    # in the middle: [B, Q, N] against quantiles [Q, 1]
    add("quantiles_middle", "quantile_loss",
        {"input": randn(2, 3, 4), "target": randn(2, 1, 4), "quantiles": np.array([[0.05], [0.5], [0.95]])},
        reduction="none")
    # one prediction per row scored at four quantiles (the output [5, 4])
    add("quantiles_widen", "quantile_loss",
        {"input": randn(5, 1), "target": randn(5, 1), "quantiles": rng.uniform(0.05, 0.95, 4)}, reduction="sum")


def _multivariate_ensemble(add, rng):
    """energy_score and variogram_score (their own generator: the other
    cases keep their values)."""
    def randn(*shape):
        return rng.standard_normal(shape)

    # the defaults (members -2, event axis -1) under every reduction
    for k, red in enumerate(("none", "mean", "sum")):
        add(red, "energy_score", {"input": randn(4, 3, 5), "target": randn(4, 5)}, reduction=red,
            estimator=("standard", "fair", "almost_fair")[k], alpha=0.9)
        add(red, "variogram_score", {"input": randn(4, 3, 5), "target": randn(4, 5)}, reduction=red,
            estimator=("fair", "almost_fair", "standard")[k], p=(1.0, 2.0, 0.5)[k])
    # members first / last, event blocks of one and two axes before and after them, a weight
    add("members_first_block", "energy_score", {"input": randn(4, 2, 3, 2), "target": randn(2, 3, 2)},
        member_dim=0, event_dims="1,2", reduction="none")
    add("block_members_last", "energy_score", {"input": randn(3, 2, 3, 5), "target": randn(3, 2, 3)},
        member_dim=-1, event_dims="-3,-2", estimator="fair", reduction="sum")
    add("one_member", "energy_score", {"input": randn(5, 1, 3), "target": randn(5, 3)}, reduction="none")
    add("weight_block_p1.5", "variogram_score",
        {"input": randn(2, 4, 2, 3), "target": randn(2, 2, 3), "weight": rng.uniform(0.25, 2, (6, 6))},
        member_dim=1, event_dims="2,3", p=1.5, estimator="fair", reduction="none")
    add("weight_members_last", "variogram_score",
        {"input": randn(3, 4, 5), "target": randn(3, 4), "weight": rng.uniform(0.25, 2, (4, 4))},
        member_dim=-1, event_dims="1", p=0.5, estimator="almost_fair", alpha=0.8, reduction="sum")
