# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the grid losses (kloss/grid.hpp): lp_loss and h1_loss of
functions sampled on a uniform grid of 1 to 4 (lp_loss) or 1 to 3 (h1_loss)
axes, leading axes [2, 3], [4] and none, every reduction, relative and
absolute, with and without the root, p in {1, 1.5, 2, 3, 4}, measure 1 and
2 pi, h1_loss periodic, non-periodic (4 points and more) and mixed per axis,
a non-default eps, a function equal to its target (root false), the
defaults, every dtype.

References: neuraloperator 2.0.0's LpLoss (rel, abs) and H1Loss (rel, abs,
its FiniteDiff derivatives) in float64, autograd for the gradients. kloss's
options map onto them as: grid_ndim = d, relative = rel (true) or abs
(false) with the default uniform quadrature, root = take_root, measure (one
real for every grid axis), eps, periodic = periodic_in_x / _y / _z (grid
axis 0 = x). Reduction mean / sum is neuraloperator's reduce_all over every
leading element; none (which neuraloperator lacks) is each function (each
index of the leading axes) taken alone with reduce "sum". Every value and
gradient is also checked against an independent numpy implementation here
(explicit finite-difference matrices, the gradients in closed form), and
each case's tolerance against that implementation run in float32 with
sequential sums (and rounded to the case dtype), as kloss computes.

Fields are smooth (sums of sines plus noise) so that relative norms are well
conditioned. At a function with input equal to target (A = 0) autograd's
gradient under the root is NaN where kloss defines 0: the cases with such a
function (float64, relative and absolute, each op) have root false.

  cd tools/golden && /opt/torch/bin/python -W ignore -c "import gen_grid as g; g.main('../../data/golden')"
"""
import math
import os
import warnings

import numpy as np
import torch

from gen_nonfinite import LAYOUT
from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances

warnings.simplefilter("ignore")
LP, H1 = "lp_loss", "h1_loss"
REDUCTIONS = ["none", "mean", "sum"]
TAU = 2 * math.pi
# The smallest absolute tolerance per dtype: float16's subnormal spacing
# (kloss rounds its float result to the dtype).
ATOL_FLOOR = {"float64": 1e-300, "float32": 1e-300, "float16": 1.2e-7, "bfloat16": 1e-300}


# gen_nonfinite's compact, timestamp-free file, each case group keeping up
# to 16 attributes in its object header (HDF5 moves more than 8 to a heap
# and an index of their own, about 1.3 KB a case: a case here has 7 to 11).
GRID_LAYOUT = dict(LAYOUT, compact_attrs=16)


# ---------------------------------------------------------------- references

def neuralop_loss(op, x, y, o, reduction):
    """neuraloperator's loss of x, y (torch float64) with kloss's options o,
    reduction mean or sum over the leading elements."""
    from neuralop.losses.data_losses import H1Loss, LpLoss
    d = o["grid_ndim"]
    if op == LP:
        loss = LpLoss(d=d, p=o["p"], measure=float(o["measure"]), reduction=reduction, eps=o["eps"])
        return loss.rel(x, y, take_root=o["root"]) if o["relative"] else loss.abs(x, y, take_root=o["root"])
    per = o["periodic"] + [True] * (3 - d)
    loss = H1Loss(d=d, measure=float(o["measure"]), reduction=reduction, eps=o["eps"], periodic_in_x=per[0],
                  periodic_in_y=per[1], periodic_in_z=per[2])
    # H1Loss.__call__ does not pass take_root on: rel and abs are called directly
    return loss.rel(x, y, take_root=o["root"]) if o["relative"] else loss.abs(x, y, take_root=o["root"])


def reference(op, x, y, o, reduction):
    """The output: none stacks each function's loss (reduce "sum" of one)."""
    d = o["grid_ndim"]
    if reduction != "none":
        return neuralop_loss(op, x, y, o, reduction)
    lead = tuple(x.shape[:x.dim() - d])
    parts = [neuralop_loss(op, x[i], y[i], o, "sum") for i in np.ndindex(*lead)]
    return torch.stack(parts).reshape(lead)


def fd_matrix(n, h, periodic, dt):
    """The first-derivative matrix of FiniteDiff's scheme on n points."""
    D = np.zeros((n, n), dtype=np.float64)
    if periodic:
        for i in range(n):
            D[i, (i + 1) % n] += 1 / (2 * h)
            D[i, (i - 1) % n] -= 1 / (2 * h)
    else:
        for i in range(1, n - 1):
            D[i, i + 1], D[i, i - 1] = 1 / (2 * h), -1 / (2 * h)
        D[0, :4] = np.array([-11, 18, -9, 2]) / (6 * h)
        D[n - 1, n - 4:] = np.array([-2, 9, -18, 11]) / (6 * h)
    return D.astype(dt)


def along(M, u, axis):
    """M applied to u along `axis`."""
    return np.moveaxis(np.tensordot(M, np.moveaxis(u, axis, 0), axes=1), 0, axis)


def grid_sum(v, d, sequential):
    """v summed over its last d axes; sequentially (as a single thread
    would) for the emulation."""
    flat = v.reshape(v.shape[:v.ndim - d] + (-1,))
    return np.cumsum(flat, axis=-1)[..., -1] if sequential else flat.sum(axis=-1)


def numpy_loss(op, x, y, o, go, reduction, dt=np.float64, sequential=False):
    """Independent implementation in numpy (arithmetic in dt): the output and
    the gradients with respect to input and target for upstream gradient go
    (the per-function derivatives of A = sum |e|^p or sum e^2 + (D_k e)^2,
    B the same of y, chained through the formula)."""
    d = o["grid_ndim"]
    x, y = x.astype(dt), y.astype(dt)
    lead, grid = x.shape[:x.ndim - d], x.shape[x.ndim - d:]
    e = x - y
    one = dt(1)
    if op == LP:
        p = dt(o["p"])
        A, B = grid_sum(np.abs(e) ** p, d, sequential), grid_sum(np.abs(y) ** p, d, sequential)
        dA = p * np.abs(e) ** (p - 1) * np.sign(e)
        dB = p * np.abs(y) ** (p - 1) * np.sign(y)
        w = dt(np.prod([o["measure"] / n for n in grid]))
        root = o["root"] and o["p"] != 1
    else:
        p = dt(2)
        hs = [o["measure"] / n for n in grid]
        Ds = [fd_matrix(n, h, per, dt) for n, h, per in zip(grid, hs, o["periodic"])]
        axes = [x.ndim - d + k for k in range(d)]
        A, B = grid_sum(e * e, d, sequential), grid_sum(y * y, d, sequential)
        dA, dB = 2 * e, 2 * y
        for D, ax in zip(Ds, axes):
            De, Dy = along(D, e, ax), along(D, y, ax)
            A, B = A + grid_sum(De * De, d, sequential), B + grid_sum(Dy * Dy, d, sequential)
            dA, dB = dA + 2 * along(D.T, De, ax), dB + 2 * along(D.T, Dy, ax)
        w = dt(np.prod(hs))
        root = o["root"]
    eps = dt(o["eps"])
    if o["relative"]:
        if root:
            ra, rb = A ** (one / p), B ** (one / p)
            L = ra / (rb + eps)
            with np.errstate(divide="ignore", invalid="ignore"):
                LA = ra / (p * A) / (rb + eps)
            LB = -ra * rb / (p * B) / (rb + eps) ** 2
        else:
            L, LA, LB = A / (B + eps), one / (B + eps), -A / (B + eps) ** 2
    else:
        LB = np.zeros_like(A)
        if root:
            L = (w * A) ** (one / p)
            with np.errstate(divide="ignore", invalid="ignore"):
                LA = L / (p * A)
        else:
            L, LA = w * A, w * np.ones_like(A)
    go = np.asarray(go, dtype=dt)
    if reduction == "none":
        out, g = L, go
    else:
        out = L.sum() if reduction == "sum" else L.sum() / dt(max(L.size, 1))
        g = np.full(lead, go if reduction == "sum" else go / dt(max(L.size, 1)), dtype=dt)
    g = g.reshape(lead + (1,) * d)
    gx = g * LA.reshape(lead + (1,) * d) * dA
    gy = -gx + g * LB.reshape(lead + (1,) * d) * dB
    return np.asarray(out), gx, gy


def close(got, want, rtol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = float(np.abs(want).max()) if want.size else 0.0
    err = np.abs(got - want)
    assert np.all(err <= rtol * np.abs(want) + rtol * 1e-3 * scale), (what, float(err.max()), scale)


# ---------------------------------------------------------------- the cases

def field(gen, lead, grid, modes=3):
    """Sums of sines on the grid (random integer wave vectors, amplitudes
    and phases per function) plus a little noise."""
    d = len(grid)
    coords = torch.meshgrid(*[torch.arange(n, dtype=torch.float64) * TAU / n for n in grid], indexing="ij")
    out = torch.zeros(tuple(lead) + tuple(grid), dtype=torch.float64)
    bshape = tuple(lead) + (1,) * d
    for _ in range(modes):
        k = torch.randint(0, 3, (d,), generator=gen)
        arg = sum(int(k[j]) * coords[j] for j in range(d)) if d else torch.zeros(())
        amp = 0.5 + torch.rand(bshape, generator=gen, dtype=torch.float64)
        phase = TAU * torch.rand(bshape, generator=gen, dtype=torch.float64)
        out = out + amp * torch.sin(arg + phase)
    return out + 0.05 * torch.randn(out.shape, generator=gen, dtype=torch.float64)


def periodic_list(spec, d):
    vals = [s.strip() == "true" for s in spec.split(",")]
    return vals * d if len(vals) == 1 else vals


class Writer:
    def __init__(self, g, gen):
        self.g, self.gen, self.count, self.counts = g, gen, 0, {LP: 0, H1: 0}

    def case(self, op, name, dtype, lead, grid, reduction, opts, equal=None):
        """opts: the options the case stores (absent: kloss's default);
        equal: the index of a function whose input is its target."""
        o = {"grid_ndim": 1, "p": 2.0, "relative": True, "root": True, "measure": 1.0, "eps": 1e-8,
             "periodic": "true"}
        o.update(opts)
        assert len(grid) == o["grid_ndim"]
        o["periodic"] = periodic_list(o["periodic"], o["grid_ndim"])
        y = field(self.gen, lead, grid)
        x = y + 0.4 * field(self.gen, lead, grid, modes=2)
        if equal is not None:
            x[equal] = y[equal]
        x, y = rounded(x, dtype), rounded(y, dtype)
        xl, yl = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        red = reduction or "mean"
        out = reference(op, xl, yl, o, red)
        go = rounded(0.5 + torch.rand(out.shape, generator=self.gen, dtype=torch.float64), dtype)
        gx, gy = torch.autograd.grad(out, [xl, yl], go)
        out = out.detach()
        if red != "none":  # reduce_all agrees with the functions taken alone
            close(out, getattr(reference(op, x, y, o, "none"), red)(), 1e-14, "reduce_all")
        # the independent implementation, within 1e-12
        n_out, n_gx, n_gy = numpy_loss(op, x.numpy(), y.numpy(), o, go.numpy(), red)
        close(out.numpy(), n_out, 1e-12, name + ": output")
        close(gx.numpy(), n_gx, 1e-11, name + ": grad_input")
        close(gy.numpy(), n_gy, 1e-11, name + ": grad_target")
        for t in (out, gx, gy):
            assert torch.isfinite(t).all(), name
        # the tolerance: rtol from the writer; atol the writer's, down to
        # rtol times the smallest of the three tensors' scales (so a small
        # gradient is still checked), not below what a float computation
        # rounded to the dtype reaches
        rtol, atol = tolerances(dtype)
        scale = min(float(t.abs().max()) for t in (out, gx, gy))
        atol = max(ATOL_FLOOR[dtype], min(atol, rtol * scale))
        if dtype != "float64":
            f_out, f_gx, f_gy = numpy_loss(op, x.numpy(), y.numpy(), o, go.numpy(), red, np.float32, True)
            for got, want, what in ((f_out, out, "output"), (f_gx, gx, "grad_input"), (f_gy, gy, "grad_target")):
                got = rounded(torch.from_numpy(np.asarray(got, np.float64)), dtype)
                err = (got - want).abs()
                assert bool((err <= atol + rtol * want.abs()).all()), (name, what, float(err.max()), atol)
        full = "%s_%s_%s_%s" % (op, name, reduction or "default", dtype)
        self.g.add_case(full, op, dtype, {"input": x, "target": y}, out, grads={"input": gx, "target": gy},
                        grad_output=go, reduction=reduction, options=dict(opts), rtol=rtol, atol=atol)
        self.count += 1
        self.counts[op] += 1


def lead_name(lead):
    return "lead" + ("x".join(map(str, lead)) if lead else "0")


def grid_name(grid):
    return "n" + "x".join(map(str, grid))


def variant(relative, root, measure):
    return "%s_%s_%s" % ("rel" if relative else "abs", "root" if root else "noroot",
                         "m1" if measure == 1.0 else "m2pi")


T, F = True, False
NONE, MEAN, SUM = REDUCTIONS
# lp_loss: every p with every (relative, root); grid_ndim, leading axes,
# reduction and measure spread so that each meets each other and p.
LP_GRID = {1: (16,), 2: (5, 6), 3: (3, 4, 3), 4: (2, 3, 2, 3)}
LP_TABLE = [  # p, relative, root, grid_ndim, leading axes, reduction, measure
    (1.0, T, T, 2, (2, 3), NONE, 1.0),
    (1.0, T, F, 3, (4,), NONE, TAU),
    (1.0, F, T, 1, (2, 3), SUM, TAU),
    (1.0, F, F, 2, (4,), MEAN, 1.0),
    (1.5, T, T, 3, (), MEAN, 1.0),
    (1.5, T, F, 2, (), SUM, 1.0),
    (1.5, F, T, 1, (), NONE, TAU),
    (1.5, F, F, 4, (4,), NONE, TAU),
    (2.0, T, T, 4, (4,), SUM, TAU),
    (2.0, T, F, 4, (2, 3), NONE, 1.0),
    (2.0, F, T, 3, (), MEAN, 1.0),
    (2.0, F, F, 1, (4,), SUM, 1.0),
    (3.0, T, T, 4, (), SUM, TAU),
    (3.0, T, F, 1, (2, 3), MEAN, 1.0),
    (3.0, F, T, 2, (4,), NONE, TAU),
    (3.0, F, F, 3, (2, 3), MEAN, TAU),
]
# h1_loss: every periodic pattern twice with two of the (relative, root)
# pairs; leading axes, reduction and measure spread likewise. Non-periodic
# axes have 4 points or more (exactly 4 in several), periodic ones 3 or more.
H1_TABLE = [  # grid_ndim, periodic, relative, root, leading axes, reduction, measure, grid
    (1, "true", T, F, (), MEAN, 1.0, (16,)),
    (1, "true", F, F, (4,), NONE, TAU, (12,)),
    (1, "false", F, T, (2, 3), SUM, TAU, (4,)),
    (1, "false", T, T, (4,), SUM, 1.0, (10,)),
    (2, "true", T, F, (), MEAN, TAU, (8, 6)),
    (2, "true", F, F, (), SUM, 1.0, (6, 7)),
    (2, "false", T, T, (2, 3), NONE, TAU, (4, 5)),
    (2, "false", T, F, (2, 3), NONE, TAU, (5, 4)),
    (2, "true,false", F, T, (2, 3), NONE, 1.0, (7, 4)),
    (2, "true,false", F, F, (2, 3), MEAN, TAU, (3, 6)),
    (2, "false,true", F, F, (4,), MEAN, 1.0, (6, 5)),
    (2, "false,true", F, T, (4,), MEAN, TAU, (4, 3)),
    (3, "true", T, F, (2, 3), SUM, TAU, (3, 4, 3)),
    (3, "true", T, T, (4,), SUM, 1.0, (4, 3, 5)),
    (3, "false", F, F, (), NONE, TAU, (5, 4, 6)),
    (3, "false", T, T, (), MEAN, 1.0, (4, 4, 4)),
    (3, "false,true,false", F, T, (), SUM, 1.0, (4, 3, 5)),
    (3, "false,true,false", T, F, (4,), NONE, TAU, (6, 3, 4)),
    (3, "true,true,false", F, F, (4,), MEAN, 1.0, (3, 5, 4)),
    (3, "true,true,false", F, T, (), SUM, 1.0, (5, 4, 6)),
]


def lp_cases(w, dtype, keep):
    for i, (p, rel, root, d, lead, red, m) in enumerate(LP_TABLE):
        if keep(i):
            name = "%dd_%s_p%s_%s" % (d, lead_name(lead), ("%g" % p).replace(".", "_"), variant(rel, root, m))
            w.case(LP, name, dtype, lead, LP_GRID[d], red,
                   {"grid_ndim": d, "p": p, "relative": rel, "root": root, "measure": m})


def h1_cases(w, dtype, keep):
    for i, (d, spec, rel, root, lead, red, m, grid) in enumerate(H1_TABLE):
        if keep(i):
            name = "%dd_%s_per_%s_%s_%s" % (d, lead_name(lead), spec.replace(",", ""), variant(rel, root, m),
                                            grid_name(grid))
            w.case(H1, name, dtype, lead, grid, red,
                   {"grid_ndim": d, "relative": rel, "root": root, "measure": m, "periodic": spec})


def extra_cases(w, dtype, di):
    # kloss's defaults (mean, grid_ndim 1, p 2, relative, root, measure 1,
    # eps 1e-8, periodic): no option stored
    w.case(LP, "defaults", dtype, (2, 3), (16,), None, {})
    w.case(H1, "defaults", dtype, (3,), (16,), None, {})
    # no leading axes: a scalar under every reduction (one per 16-bit dtype)
    for k, red in enumerate(REDUCTIONS):
        if dtype != "float64" and k != di % 3:
            continue
        p = (1.5, 2.0, 3.0)[(k + di) % 3]
        w.case(LP, "2d_lead0_p%s_rel_root" % ("%g" % p).replace(".", "_"), dtype, (), (7, 5), red,
               {"grid_ndim": 2, "p": p})
        d = 1 + (k + di) % 3
        spec = ("false", "true,false", "false,true,false")[d - 1]
        grid = {1: (12,), 2: (9, 5), 3: (4, 3, 5)}[d]
        w.case(H1, "%dd_lead0_per_%s_rel_root_%s" % (d, spec.replace(",", ""), grid_name(grid)), dtype, (), grid,
               red, {"grid_ndim": d, "periodic": spec})
    if dtype in ("float64", "float32"):
        # eps after the root (a large eps, so that where it goes shows)
        w.case(LP, "1d_lead4_p2_rel_root_eps", dtype, (4,), (20,), NONE, {"p": 2.0, "eps": 0.25})
        w.case(LP, "2d_lead4_p3_rel_noroot_eps", dtype, (4,), (5, 6), MEAN,
               {"grid_ndim": 2, "p": 3.0, "root": False, "eps": 0.25})
        w.case(H1, "2d_lead4_per_true_rel_root_eps", dtype, (4,), (6, 6), SUM,
               {"grid_ndim": 2, "eps": 0.25, "periodic": "true"})
        # p = 4: neuraloperator's other even power (no abs)
        w.case(LP, "3d_lead2x3_p4_abs_root_m2pi", dtype, (2, 3), (3, 4, 3), MEAN,
               {"grid_ndim": 3, "p": 4.0, "relative": False, "measure": TAU})
    if dtype == "float64":
        # a function equal to its target (A = 0), root false (autograd's
        # gradient under the root is NaN there, kloss's 0)
        for rel in (True, False):
            tag = "rel" if rel else "abs"
            w.case(LP, "1d_lead4_p2_%s_noroot_equal" % tag, dtype, (4,), (10,), NONE,
                   {"p": 2.0, "relative": rel, "root": False}, equal=1)
            w.case(H1, "2d_lead4_per_falsetrue_%s_noroot_equal" % tag, dtype, (4,), (5, 4), SUM,
                   {"grid_ndim": 2, "relative": rel, "root": False, "periodic": "false,true"}, equal=2)


def main(out_dir):
    gen = torch.Generator().manual_seed(20261207)
    with golden_file(out_dir, "grid.h5", **GRID_LAYOUT) as g:
        w = Writer(g, gen)
        for di, dtype in enumerate(DTYPES):
            # float64 every row of the tables, float32 half, the 16-bit types a quarter each
            keep = {"float64": lambda i: True, "float32": lambda i: (i + i // 4) % 2 == 0,
                    "float16": lambda i: (i + i // 4) % 4 == 1, "bfloat16": lambda i: (i + i // 4) % 4 == 3}[dtype]
            lp_cases(w, dtype, keep)
            h1_cases(w, dtype, keep)
            extra_cases(w, dtype, di)
    print("wrote %d cases (lp_loss %d, h1_loss %d) to %s (%d bytes)" % (w.count, w.counts[LP], w.counts[H1], g.path,
                                                                        os.path.getsize(g.path)))


if __name__ == "__main__":
    import sys
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT_DIR)
