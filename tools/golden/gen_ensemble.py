# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases of the ensemble scores (kloss/ensemble.hpp): crps_ensemble
with every estimator, members on the first, a middle and the last axis,
every reduction and dtype, tied members, one member, a member equal to the
observation.

References: scoringrules' crps_ensemble on its torch backend (float64), so
that autograd gives the gradients: estimator "nrg" (the pairwise form of
the standard CRPS) and "fair"; the almost-fair score is anemoi's convention,
alpha of the fair estimator plus 1 - alpha of the standard one, each from
scoringrules. Values are checked against scoringrules' numpy backend and,
for the standard estimator, properscoring's crps_ensemble.

  cd tools/golden && /opt/torch/bin/python -c "import gen_ensemble as g; g.main('../../data/golden')"
"""
import os
import warnings

import numpy as np
import torch

from golden_writer import DEFAULT_OUT_DIR, DTYPES, golden_file, rounded, tolerances

warnings.simplefilter("ignore")
OP = "crps_ensemble"
REDUCTIONS = ["none", "mean", "sum"]
SR_NAME = {"standard": "nrg", "fair": "fair"}


def uniform(gen, shape, lo, hi):
    return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)


def crps(x, y, dim, estimator, alpha):
    """Per point, scoringrules (torch backend) with the members' axis `dim`."""
    import scoringrules
    if estimator == "almost_fair":
        return alpha * crps(x, y, dim, "fair", alpha) + (1 - alpha) * crps(x, y, dim, "standard", alpha)
    return scoringrules.crps_ensemble(y, x, m_axis=dim, estimator=SR_NAME[estimator], backend="torch")


def check(x, y, dim, estimator, alpha, per_point):
    """The values against scoringrules' numpy backend and properscoring."""
    import properscoring
    import scoringrules
    xn, yn = x.detach().numpy(), y.detach().numpy()

    def sr(e):
        return scoringrules.crps_ensemble(yn, xn, m_axis=dim, estimator=SR_NAME[e], backend="numpy")

    def ps(e):
        return properscoring.crps_ensemble(yn, np.moveaxis(xn, dim, -1))

    want = alpha * sr("fair") + (1 - alpha) * sr("standard") if estimator == "almost_fair" else sr(estimator)
    assert np.allclose(per_point.detach().numpy(), want, rtol=1e-12, atol=1e-14)
    if estimator == "standard":
        assert np.allclose(per_point.detach().numpy(), ps("standard"), rtol=1e-10, atol=1e-12)


class Writer:
    def __init__(self, g, gen):
        self.g, self.gen, self.count = g, gen, 0

    def case(self, name, dtype, x, y, dim, estimator, alpha, reduction):
        x, y = rounded(x, dtype), rounded(y, dtype)
        xl, yl = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        per_point = crps(xl, yl, dim, estimator, alpha)
        check(xl, yl, dim, estimator, alpha, per_point)
        out = {"none": per_point, "mean": per_point.mean(), "sum": per_point.sum()}[reduction]
        go = rounded(uniform(self.gen, out.shape, 0.5, 1.5), dtype)
        gx, gy = torch.autograd.grad(out, [xl, yl], go)
        rtol, atol = tolerances(dtype)
        big = max([float(t.abs().max()) for t in (out.detach(), gx, gy) if t.numel()] + [1.0])
        m = x.shape[dim]
        atol = max(atol, rtol * big * m)  # a member's gradient: the difference of terms ~ m times its size
        options = {"estimator": estimator, "member_dim": dim}
        if estimator == "almost_fair":
            options["alpha"] = alpha
        self.g.add_case("%s_%s_%s_%s" % (OP, name, reduction, dtype), OP, dtype, {"input": x, "target": y},
                        out.detach(), grads={"input": gx, "target": gy}, grad_output=go, reduction=reduction,
                        options=options, rtol=rtol, atol=atol)
        self.count += 1


def main(out_dir):
    gen = torch.Generator().manual_seed(20261206)
    with golden_file(out_dir, "ensemble.h5") as g:
        w = Writer(g, gen)
        for di, dtype in enumerate(DTYPES):
            for k, estimator in enumerate(("standard", "fair", "almost_fair")):
                alpha = 0.95
                # members last ([points, m], m = 8), first ([m, 3, 4]) and in the middle ([2, m, 5])
                for dim, shape in ((-1, (6, 8)), (0, (5, 3, 4)), (1, (2, 16, 5))):
                    x = uniform(gen, shape, -2, 2)
                    ys = list(shape)
                    del ys[dim]
                    y = uniform(gen, tuple(ys), -2, 2)
                    red = REDUCTIONS[(k + di + dim) % 3]
                    w.case("dim%d_%s" % (dim, estimator), dtype, x, y, dim, estimator, alpha, red)
            # ties among members and a member on the observation
            x = torch.tensor([[1.0, 1.0, 1.0, 3.0, 0.5], [0.25, 0.25, -1.0, -1.0, 2.0]], dtype=torch.float64)
            y = torch.tensor([1.0, 0.25], dtype=torch.float64)
            for estimator in ("standard", "fair", "almost_fair"):
                w.case("ties_" + estimator, dtype, x, y, -1, estimator, 0.5, "none")
            # one member: the absolute error
            w.case("one_member", dtype, uniform(gen, (7, 1), -2, 2), uniform(gen, (7,), -2, 2), 1, "standard", 0.95,
                   REDUCTIONS[di % 3])
    print("wrote %d cases to %s (%d bytes)" % (w.count, g.path, os.path.getsize(g.path)))


if __name__ == "__main__":
    import sys
    main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT_DIR)
