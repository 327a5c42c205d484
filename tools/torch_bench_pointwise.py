#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times PyTorch CPU on the work perf_tests/bench_pointwise.cpp does, for its
side-by-side numbers. Protocol of tools/torch_bench_common.py: `--threads N` first,
prints "key milliseconds" lines (median of repeats): fwd (no_grad forward),
fwdbwd (forward + backward w.r.t. input), bwd (their difference). The op is
torch.nn.functional's of that name with its defaults (reduction 'mean');
the input range and operand count come from the C++ benchmark's row; only
`input` requires grad. Silent (no output) when torch or the op is absent.
`gaussian_nll_loss_beta` is beta-NLL (beta 0.5) as written on torch: the
loss with reduction 'none' times var.detach() ** 0.5, then the mean;
`mse_loss_weighted` is F.mse_loss with its third operand as `weight=`;
`mse_loss_masked` is the weighted, masked MSE with non-finite targets
masked as written on torch (anemoi's form: torch.where on the mask and
isfinite, the weighted sum over the counted weights; the third operand the
weight, the fourth the mask);
`quantile_loss` is the pinball loss (q 0.5) as neuraloperator's
PointwiseQuantileLoss writes it on torch (torch.max of the two branches);
`crps_gaussian` is the closed form as PhysicsNeMo writes it on torch (the
third operand the std).

  torch_bench_pointwise.py --threads 1 kl_div --numel 16777216 --low -4 --high 0
  torch_bench_pointwise.py --threads 1 --best binary_cross_entropy --low 0.02 --high 0.98
  (--best re-runs itself with ATEN_CPU_CAPABILITY=avx512 and
   GLIBC_TUNABLES=glibc.malloc.hugetlb=1, torch's fastest configuration
   on an AVX-512 CPU)
"""
import argparse
import math
import warnings

from torch_bench_common import DTYPE_NAMES, best_configuration, dtype_of, fwd_bwd, import_torch, print_times

best_configuration()
torch, F = import_torch()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--best", action="store_true")
    ap.add_argument("op")
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    ap.add_argument("--low", type=float, default=-2.0, help="input range, as the C++ benchmark's row")
    ap.add_argument("--high", type=float, default=2.0)
    ap.add_argument("--operands", type=int, default=2,
                    help="3: a third operand (var) in [0.5, 1.5); 4: and a fourth, the same range")
    a = ap.parse_args()
    if a.op == "gaussian_nll_loss_beta":
        def fn(x, y, v):
            return (F.gaussian_nll_loss(x, y, v, reduction="none") * v.detach() ** 0.5).mean()
    elif a.op == "mse_loss_weighted":
        def fn(x, y, v):
            return F.mse_loss(x, y, weight=v)
    elif a.op == "mse_loss_masked":
        def fn(x, y, w, m):
            keep = (m != 0) & torch.isfinite(y)
            wk = torch.where(keep, w, torch.zeros_like(w))
            return (wk * torch.where(keep, (x - y) ** 2, torch.zeros_like(x))).sum() / wk.sum()
    elif a.op == "crps_gaussian":
        def fn(x, y, v):
            # PhysicsNeMo's Gaussian CRPS (physicsnemo/metrics/general/crps.py), mean over the elements
            z = (y - x) / v
            pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
            cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2)))
            return (v * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))).mean()
    elif a.op == "quantile_loss":
        def fn(x, y):
            e = y - x
            return torch.max(0.5 * e, -0.5 * e).mean()
    else:
        fn = getattr(F, a.op, None)
    if fn is None:
        return
    torch.set_num_threads(a.threads)
    warnings.simplefilter("ignore")
    lo, hi, nops = a.low, a.high, a.operands
    dtype, n = dtype_of(torch, a.dtype), a.numel
    g = torch.Generator().manual_seed(0)
    x = (lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)).to(dtype).requires_grad_(True)
    y = torch.rand(n, generator=g, dtype=torch.float64).to(dtype)
    v = (0.5 + torch.rand(n, generator=g, dtype=torch.float64)).to(dtype) if nops > 2 else None
    m = (0.5 + torch.rand(n, generator=g, dtype=torch.float64)).to(dtype) if nops > 3 else None
    args = (x, y, v, m) if nops > 3 else ((x, y, v) if nops > 2 else (x, y))
    print_times(fwd_bwd(torch, lambda: fn(*args), [x]))


if __name__ == "__main__":
    main()
