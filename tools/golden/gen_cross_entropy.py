# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the cross_entropy family (cross_entropy, nll_loss) in the
kloss-golden/1 schema (docs/golden-schema.md).

Every option x dtype x index dtype x reduction: class weights, ignore_index
(default and custom), label smoothing (alone and with weights and ignored
targets), K-dimensional input, class-probability targets, and the edge
cases (|x| ~ 1e4, -inf logits, C = 1, N = 1, every target ignored under
mean). References: PyTorch 2.15 in float64 from inputs rounded to the case
dtype; gradients by autograd with a random grad_output (class
probabilities' too: cross_entropy differentiates its target).

The extensions z_loss and softcap (attributes `z_loss`, `softcap`) have no
torch option; their references compose the formula in float64:
    z = softcap * tanh(x / softcap)                    (softcap > 0)
    loss_row = cross_entropy(z, ...)_row + z_loss * logsumexp(z)^2   (non-ignored rows)
reduced like cross_entropy (mean divides by the summed target weights).

kloss's extension sample_weight (a weight per row: the rows' shape [N, d...],
[] for an unbatched [C] input; input-typed, not differentiable) has its
own generator and seed (sample_weight_cases; the cases above keep their
values); its references compose torch's unreduced loss in float64:
    none: s * loss_row;  sum: sum(s * loss_row);  mean: sum(s * loss_row) / D,
    D = sum over the non-ignored rows of s * weight[target] (class indices;
    weight 1 without one), D = sum(s) (class probabilities),
loss_row torch's (or the z_loss / softcap composition's) reduction='none'
row; gradients by autograd through that composition.

Run:  cd tools/golden && /usr/bin/python3 -c "import gen_cross_entropy as g; g.main('../../data/golden')"
"""
import os

import torch
import torch.nn.functional as F

from golden_writer import ce_options, DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances

REDUCTIONS = ["none", "mean", "sum"]


# HDF5's newer object-header format (readable by HDF5 >= 1.10): about 3x
# smaller for hundreds of tiny cases, same schema.
LAYOUT = {"libver": "latest"}

INDEX_DTYPES = ["int64", "int32"]


def _targets(gen, rows_shape, c, ignore_frac=0.0, ignore_index=-100):
    t = torch.randint(0, c, rows_shape, generator=gen)
    if ignore_frac > 0:
        mask = torch.rand(rows_shape, generator=gen) < ignore_frac
        mask.view(-1)[0] = True  # at least one ignored
        t[mask] = ignore_index
    return t


def _ce_reference(x, target, weight, reduction, ignore_index, label_smoothing, z_loss, softcap, probs):
    """cross_entropy with the kloss extensions, composed in float64."""
    z = softcap * torch.tanh(x / softcap) if softcap > 0 else x
    kw = dict(weight=weight, label_smoothing=label_smoothing)
    if not probs:
        kw["ignore_index"] = ignore_index
    if z_loss == 0:
        return F.cross_entropy(z, target, reduction=reduction, **kw)
    rows = F.cross_entropy(z, target, reduction="none", **kw)
    lse = torch.logsumexp(z, dim=1 if z.dim() > 1 else 0)
    if probs:
        keep = torch.ones_like(lse)
        denom = torch.tensor(float(lse.numel()), dtype=torch.float64)
    else:
        keep = (target != ignore_index).to(torch.float64)
        w = weight if weight is not None else torch.ones(x.shape[1 if x.dim() > 1 else 0], dtype=torch.float64)
        denom = (w[target.clamp(min=0)] * keep).sum()
    rows = rows + z_loss * lse * lse * keep
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / denom


def _add(g, name, op, dtype, x, target, weight, reduction, index_dtype, options, ref_fn, gen, rtol=None, atol=None,
         extra=None, sample_weight=None):
    xr = rounded(x, dtype).requires_grad_(True)
    wr = rounded(weight, dtype) if weight is not None else None
    probs = target.is_floating_point()
    # class probabilities are differentiable (torch: a learned teacher's distribution)
    tr = rounded(target, dtype).requires_grad_(op == "cross_entropy") if probs else target
    out = ref_fn(xr, tr, wr)
    go = rounded(torch.rand(out.shape, generator=gen, dtype=torch.float64) + 0.5, dtype)
    if probs and op == "cross_entropy":
        gx, gt = torch.autograd.grad(out, [xr, tr], go)
        grads = {"input": gx, "target": gt}
    else:
        (gx,) = torch.autograd.grad(out, xr, go)
        grads = {"input": gx}
    inputs = {"input": xr, "target": tr}
    if wr is not None:
        inputs["weight"] = wr
    if sample_weight is not None:  # (already rounded: ref_fn holds the same values)
        inputs["sample_weight"] = sample_weight
    d_rtol, d_atol = tolerances(dtype)
    g.add_case(name, op, dtype, inputs, out, grads=grads, grad_output=go, reduction=reduction,
               index_dtype=index_dtype if not tr.is_floating_point() else None, options=options,
               rtol=rtol if rtol is not None else d_rtol, atol=atol if atol is not None else d_atol,
               extra_attrs=extra)


def main(out_dir):
    gen = torch.Generator().manual_seed(1234)
    with golden_file(out_dir, "cross_entropy.h5", **LAYOUT) as g:
        # --- cross_entropy with class indices: option sets x dtype x index dtype x reduction
        option_sets = [
            # name, N, C, kdim, weighted, ignore_frac, ignore_index, smoothing, z_loss, softcap
            ("plain", 3, 37, None, False, 0.0, None, 0.0, 0.0, 0.0),
            ("weight_ignore", 6, 5, None, True, 0.4, None, 0.0, 0.0, 0.0),
            ("ignore_custom", 5, 6, None, False, 0.4, 2, 0.0, 0.0, 0.0),
            ("smooth", 4, 11, None, False, 0.0, None, 0.1, 0.0, 0.0),
            ("smooth_weight_ignore", 6, 8, None, True, 0.3, None, 0.2, 0.0, 0.0),
            ("kdim", 3, 5, (2, 3), True, 0.2, None, 0.15, 0.0, 0.0),
            ("z_loss", 4, 13, None, True, 0.25, None, 0.0, 1e-2, 0.0),
            ("softcap", 4, 13, None, False, 0.0, None, 0.0, 0.0, 2.5),
            ("z_loss_softcap_smooth", 5, 10, None, True, 0.2, None, 0.1, 5e-3, 3.0),
        ]
        for (oname, n, c, kdim, weighted, ifrac, iidx, eps, zl, cap) in option_sets:
            for dtype in DTYPES:
                for idt in INDEX_DTYPES:
                    for red in REDUCTIONS:
                        shape = (n, c) + (kdim or ())
                        rows_shape = (n,) + (kdim or ())
                        x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
                        ignore_index = -100 if iidx is None else iidx
                        t = _targets(gen, rows_shape, c, ifrac, ignore_index)
                        if iidx is not None:  # a custom ignore_index that is also a valid class
                            t[t == -100] = iidx
                        w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25 if weighted else None
                        opts = {}
                        if iidx is not None:
                            opts["ignore_index"] = iidx
                        opts.update(ce_options(eps, zl, cap))
                        fn = (lambda xr, tr, wr, red=red, ii=ignore_index, eps=eps, zl=zl, cap=cap:
                              _ce_reference(xr, tr, wr, red, ii, eps, zl, cap, False))
                        _add(g, f"ce_{oname}_{dtype}_{idt}_{red}", "cross_entropy", dtype, x, t, w, red, idt, opts,
                             fn, gen)
        # --- cross_entropy with class probabilities
        prob_sets = [
            ("prob_kdim", 2, 4, (3,), False, 0.0, 0.0, 0.0),
            ("prob_smooth_weight", 5, 7, None, True, 0.25, 0.0, 0.0),
            ("prob_z_loss_softcap", 3, 9, None, True, 0.1, 1e-2, 2.0),
        ]
        for (oname, n, c, kdim, weighted, eps, zl, cap) in prob_sets:
            for dtype in DTYPES:
                for red in REDUCTIONS:
                    shape = (n, c) + (kdim or ())
                    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
                    p = torch.softmax(torch.randn(shape, generator=gen, dtype=torch.float64) * 2, dim=1)
                    w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25 if weighted else None
                    opts = {}
                    opts.update(ce_options(eps, zl, cap))
                    fn = (lambda xr, tr, wr, red=red, eps=eps, zl=zl, cap=cap:
                          _ce_reference(xr, tr, wr, red, -100, eps, zl, cap, True))
                    _add(g, f"ce_{oname}_{dtype}_{red}", "cross_entropy", dtype, x, p, w, red, None, opts, fn, gen)
        # --- edge cases
        for dtype in DTYPES:
            for red in ["none", "mean"]:
                # C = 1: every loss is 0, every gradient 0
                x = torch.randn(4, 1, generator=gen, dtype=torch.float64)
                t = torch.zeros(4, dtype=torch.int64)
                _add(g, f"ce_c1_{dtype}_{red}", "cross_entropy", dtype, x, t, None, red, "int64", {},
                     lambda xr, tr, wr, red=red: F.cross_entropy(xr, tr, reduction=red), gen)
                # N = 1
                x = torch.randn(1, 19, generator=gen, dtype=torch.float64)
                t = torch.tensor([7])
                _add(g, f"ce_n1_{dtype}_{red}", "cross_entropy", dtype, x, t, None, red, "int32",
                     {"label_smoothing": 0.05},
                     lambda xr, tr, wr, red=red: F.cross_entropy(xr, tr, reduction=red, label_smoothing=0.05), gen)
                # -inf logits (not at the targets)
                x = torch.randn(3, 8, generator=gen, dtype=torch.float64)
                x[0, 1] = x[1, 5] = x[1, 6] = x[2, 0] = float("-inf")
                t = torch.tensor([0, 2, 7])
                _add(g, f"ce_neginf_{dtype}_{red}", "cross_entropy", dtype, x, t, None, red, "int64", {},
                     lambda xr, tr, wr, red=red: F.cross_entropy(xr, tr, reduction=red), gen)
            # every target ignored under mean: NaN output, zero gradients
            x = torch.randn(3, 4, generator=gen, dtype=torch.float64)
            t = torch.full((3,), -100)
            _add(g, f"ce_all_ignored_{dtype}_mean", "cross_entropy", dtype, x, t, None, "mean", "int64", {},
                 lambda xr, tr, wr: F.cross_entropy(xr, tr, reduction="mean"), gen)
        for dtype in ["float32", "float64"]:
            # |x| ~ 1e4: lse ~ 1e4, the loss is a difference of large numbers
            x = (torch.rand(4, 33, generator=gen, dtype=torch.float64) * 2 - 1) * 1e4
            t = torch.randint(0, 33, (4,), generator=gen)
            rtol, atol = tolerances(dtype)
            for red in REDUCTIONS:
                _add(g, f"ce_large_{dtype}_{red}", "cross_entropy", dtype, x, t, None, red, "int64", {},
                     lambda xr, tr, wr, red=red: F.cross_entropy(xr, tr, reduction=red), gen,
                     rtol=rtol, atol=atol)
        # --- nll_loss
        nll_sets = [
            ("weight_ignore", 6, 5, None, True, 0.4, None),
            ("ignore_custom", 5, 6, None, False, 0.3, 1),
            ("kdim", 3, 4, (2, 3), True, 0.2, None),
        ]
        for (oname, n, c, kdim, weighted, ifrac, iidx) in nll_sets:
            for dtype in DTYPES:
                for idt in INDEX_DTYPES:
                    for red in REDUCTIONS:
                        shape = (n, c) + (kdim or ())
                        rows_shape = (n,) + (kdim or ())
                        x = torch.log_softmax(torch.randn(shape, generator=gen, dtype=torch.float64), dim=1)
                        ignore_index = -100 if iidx is None else iidx
                        t = _targets(gen, rows_shape, c, ifrac, ignore_index)
                        w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25 if weighted else None
                        opts = {} if iidx is None else {"ignore_index": iidx}
                        fn = (lambda xr, tr, wr, red=red, ii=ignore_index:
                              F.nll_loss(xr, tr, weight=wr, ignore_index=ii, reduction=red))
                        _add(g, f"nll_{oname}_{dtype}_{idt}_{red}", "nll_loss", dtype, x, t, w, red, idt, opts, fn,
                             gen)
            # all ignored under mean
        for dtype in DTYPES:
            x = torch.log_softmax(torch.randn(2, 3, generator=gen, dtype=torch.float64), dim=1)
            t = torch.full((2,), -100)
            _add(g, f"nll_all_ignored_{dtype}_mean", "nll_loss", dtype, x, t, None, "mean", "int64", {},
                 lambda xr, tr, wr: F.nll_loss(xr, tr, reduction="mean"), gen)
        # --- confident rows beside large logits: losses of 1e-6 .. 1e-2 next to
        # logits of 200 and logits shifted by +-1e4, targets mostly the row's
        # maximum; tolerances relative to each value plus about 8 ulp of 1 in
        # the accumulation type (the sum of exponentials, 1 + e^-12, rounds
        # there, in torch too, and once more per merge of the
        # vocabulary-parallel ranks' sums), so that a loss or a target
        # gradient formed from the rounded log-sum-exp (200 + 6e-6 is 200 in
        # float: an error of 6e-6) fails
        tight = {"float64": (1e-10, 2e-15), "float32": (1e-5, 1e-6), "float16": (2e-3, 1e-6),
                 "bfloat16": (1.6e-2, 1e-6)}
        for dtype in DTYPES:
            rtol, atol = tight[dtype]
            for red in REDUCTIONS:
                for shift in (0.0, 1e4, -1e4):
                    n, c = 6, 9
                    x = torch.randn(n, c, generator=gen, dtype=torch.float64) * 3
                    t = torch.randint(0, c, (n,), generator=gen)
                    for i in range(n - 2):  # confident rows: the target 12 .. 20 above the rest
                        x[i, t[i]] = x[i].max() + 12 + 2 * i
                    x = x + shift + 200 * (shift == 0)
                    fn = lambda xr, tr, wr, red=red: F.cross_entropy(xr, tr, reduction=red)
                    sname = {0.0: "200", 1e4: "plus1e4", -1e4: "minus1e4"}[shift]
                    _add(g, f"ce_confident_{sname}_{dtype}_{red}", "cross_entropy", dtype, x, t, None, red, "int64",
                         {}, fn, gen, rtol=rtol, atol=atol)
                    p = F.one_hot(t, c).to(torch.float64)
                    p[n - 1] = 1.0 / c  # one soft row
                    fn = lambda xr, tr, wr, red=red: F.cross_entropy(xr, tr, reduction=red)
                    _add(g, f"ce_confident_prob_{sname}_{dtype}_{red}", "cross_entropy", dtype, x, p, None, red,
                         "int64", {}, fn, gen, rtol=rtol, atol=atol)
        sample_weight_cases(g)
    print(g.path, os.path.getsize(g.path), "bytes,", len(g.names), "cases")


def _sample_weighted(rows, s, reduction, denom):
    """kloss's sample_weight on unreduced rows `rows` (torch's
    reduction='none' loss): s * rows, summed, or summed over `denom`."""
    terms = rows * s
    if reduction == "none":
        return terms
    if reduction == "sum":
        return terms.sum()
    return terms.sum() / denom


def _sw_denominator(target, weight, s, ignore_index, classes):
    """The mean's divisor with sample weights: the non-ignored rows' s times
    their target's class weight (class indices), the sample weights' sum
    (class probabilities)."""
    if target.is_floating_point():
        return s.sum()
    keep = target != ignore_index
    w = weight if weight is not None else torch.ones(classes, dtype=torch.float64)
    return torch.where(keep, s * w[torch.where(keep, target, 0)], torch.zeros((), dtype=torch.float64)).sum()


def _sample_weights(gen, rows_shape, target=None, ignore_index=-100):
    """Sample weights in [0.25, 2) of shape rows_shape, one of them 0 (a
    counted row where there is one: its loss and gradient vanish, and it
    leaves the mean's divisor)."""
    s = torch.rand(rows_shape, generator=gen, dtype=torch.float64) * 1.75 + 0.25
    flat = s.view(-1)
    if flat.numel() > 1:
        if target is not None and not target.is_floating_point():
            counted = (target.reshape(-1) != ignore_index).nonzero().view(-1)
            flat[int(counted[-1]) if counted.numel() else flat.numel() - 1] = 0.0
        else:
            flat[flat.numel() - 1] = 0.0
    return s


def sample_weight_cases(g):
    """cross_entropy and nll_loss with kloss's sample_weight (its own seed:
    the cases before keep their values): class indices with class weights
    and ignored rows, label smoothing with both, K-dimensional input,
    z_loss and softcap, class probabilities (plain, K-dimensional, with
    label smoothing, class weights, z_loss and softcap), unbatched [C]
    input with a scalar sample weight, nll_loss; each dtype and reduction,
    the index dtypes alternating; every batched case has a zero sample
    weight."""
    gen = torch.Generator().manual_seed(4321)
    # name, N, C, kdim, weighted, ignore_frac, ignore_index, smoothing, z_loss, softcap
    index_sets = [
        ("weight_ignore", 7, 6, None, True, 0.3, None, 0.0, 0.0, 0.0),
        ("plain", 5, 9, None, False, 0.0, None, 0.0, 0.0, 0.0),
        ("smooth_weight_ignore", 6, 8, None, True, 0.25, None, 0.15, 0.0, 0.0),
        ("ignore_custom_smooth", 6, 5, None, False, 0.3, 3, 0.1, 0.0, 0.0),
        ("kdim", 3, 5, (2, 3), True, 0.2, None, 0.1, 0.0, 0.0),
        ("z_loss_softcap_smooth", 5, 10, None, True, 0.2, None, 0.1, 5e-3, 3.0),
    ]
    k = 0
    for (oname, n, c, kdim, weighted, ifrac, iidx, eps, zl, cap) in index_sets:
        for dtype in DTYPES:
            for red in REDUCTIONS:
                idt = INDEX_DTYPES[k % 2]
                k += 1
                shape = (n, c) + (kdim or ())
                rows_shape = (n,) + (kdim or ())
                x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
                ignore_index = -100 if iidx is None else iidx
                t = _targets(gen, rows_shape, c, ifrac, ignore_index)
                if iidx is not None:  # a custom ignore_index that is also a valid class
                    t[t == -100] = iidx
                w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25 if weighted else None
                s = rounded(_sample_weights(gen, rows_shape, t, ignore_index), dtype)
                opts = {}
                if iidx is not None:
                    opts["ignore_index"] = iidx
                opts.update(ce_options(eps, zl, cap))
                fn = (lambda xr, tr, wr, red=red, ii=ignore_index, eps=eps, zl=zl, cap=cap, s=s, c=c:
                      _sample_weighted(_ce_reference(xr, tr, wr, "none", ii, eps, zl, cap, False), s, red,
                                       _sw_denominator(tr, wr, s, ii, c)))
                _add(g, f"ce_sw_{oname}_{dtype}_{idt}_{red}", "cross_entropy", dtype, x, t, w, red, idt, opts,
                     fn, gen, sample_weight=s)
    # name, N, C, kdim, weighted, smoothing, z_loss, softcap
    prob_sets = [
        ("prob", 5, 7, None, False, 0.0, 0.0, 0.0),
        ("prob_kdim_smooth_weight", 2, 4, (3,), True, 0.2, 0.0, 0.0),
        ("prob_z_loss_softcap", 4, 6, None, True, 0.1, 1e-2, 2.0),
    ]
    for (oname, n, c, kdim, weighted, eps, zl, cap) in prob_sets:
        for dtype in DTYPES:
            for red in REDUCTIONS:
                shape = (n, c) + (kdim or ())
                rows_shape = (n,) + (kdim or ())
                x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
                p = torch.softmax(torch.randn(shape, generator=gen, dtype=torch.float64) * 2, dim=1)
                w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25 if weighted else None
                s = rounded(_sample_weights(gen, rows_shape), dtype)
                fn = (lambda xr, tr, wr, red=red, eps=eps, zl=zl, cap=cap, s=s, c=c:
                      _sample_weighted(_ce_reference(xr, tr, wr, "none", -100, eps, zl, cap, True), s, red,
                                       _sw_denominator(tr, wr, s, -100, c)))
                _add(g, f"ce_sw_{oname}_{dtype}_{red}", "cross_entropy", dtype, x, p, w, red, None,
                     ce_options(eps, zl, cap), fn, gen, sample_weight=s)
    # unbatched [C] input: one row, a scalar sample weight
    for dtype in DTYPES:
        for red in REDUCTIONS:
            c = 7
            x = torch.randn(c, generator=gen, dtype=torch.float64) * 2
            t = torch.randint(0, c, (), generator=gen)
            w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25
            s = rounded(torch.rand((), generator=gen, dtype=torch.float64) * 1.75 + 0.25, dtype)
            fn = (lambda xr, tr, wr, red=red, s=s, c=c:
                  _sample_weighted(F.cross_entropy(xr, tr, weight=wr, reduction="none", label_smoothing=0.1), s,
                                   red, _sw_denominator(tr, wr, s, -100, c)))
            _add(g, f"ce_sw_unbatched_{dtype}_{red}", "cross_entropy", dtype, x, t, w, red, "int64",
                 {"label_smoothing": 0.1}, fn, gen, sample_weight=s)
            p = torch.softmax(torch.randn(c, generator=gen, dtype=torch.float64), dim=0)
            s = rounded(torch.rand((), generator=gen, dtype=torch.float64) * 1.75 + 0.25, dtype)
            fn = (lambda xr, tr, wr, red=red, s=s, c=c:
                  _sample_weighted(F.cross_entropy(xr, tr, reduction="none"), s, red,
                                   _sw_denominator(tr, wr, s, -100, c)))
            _add(g, f"ce_sw_unbatched_prob_{dtype}_{red}", "cross_entropy", dtype, x, p, None, red, None, {}, fn,
                 gen, sample_weight=s)
    # nll_loss: name, N, C, kdim, weighted, ignore_frac, ignore_index
    nll_sets = [
        ("weight_ignore", 6, 5, None, True, 0.4, None),
        ("ignore_custom", 5, 6, None, False, 0.3, 1),
        ("kdim", 3, 4, (2, 3), True, 0.2, None),
    ]
    for (oname, n, c, kdim, weighted, ifrac, iidx) in nll_sets:
        for dtype in DTYPES:
            for red in REDUCTIONS:
                idt = INDEX_DTYPES[k % 2]
                k += 1
                shape = (n, c) + (kdim or ())
                rows_shape = (n,) + (kdim or ())
                x = torch.log_softmax(torch.randn(shape, generator=gen, dtype=torch.float64), dim=1)
                ignore_index = -100 if iidx is None else iidx
                t = _targets(gen, rows_shape, c, ifrac, ignore_index)
                w = torch.rand(c, generator=gen, dtype=torch.float64) + 0.25 if weighted else None
                s = rounded(_sample_weights(gen, rows_shape, t, ignore_index), dtype)
                opts = {} if iidx is None else {"ignore_index": iidx}
                fn = (lambda xr, tr, wr, red=red, ii=ignore_index, s=s, c=c:
                      _sample_weighted(F.nll_loss(xr, tr, weight=wr, ignore_index=ii, reduction="none"), s, red,
                                       _sw_denominator(tr, wr, s, ii, c)))
                _add(g, f"nll_sw_{oname}_{dtype}_{idt}_{red}", "nll_loss", dtype, x, t, w, red, idt, opts, fn,
                     gen, sample_weight=s)


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)
