#!/usr/bin/python3
"""Times PyTorch CPU on the work perf_tests/bench_pointwise.cpp does, for its
side-by-side numbers. Protocol of tools/torch_bench_common.py: `--threads N` first,
prints "key milliseconds" lines (median of repeats): fwd (no_grad forward),
fwdbwd (forward + backward w.r.t. input), bwd (their difference). Reduction
'mean'; inputs in the same ranges as the C++ benchmark; only `input`
requires grad. Silent (no output) when torch is absent.

  torch_bench_pointwise.py --threads 1 kl_div --numel 16777216 --dtype float32
  torch_bench_pointwise.py --threads 1 --best bce --numel 16777216
  (--best re-runs itself with ATEN_CPU_CAPABILITY=avx512 and
   GLIBC_TUNABLES=glibc.malloc.hugetlb=1, torch's fastest configuration
   here; see /work/shared/PERF-NOTES.md)
"""
import argparse
import warnings

from torch_bench_common import DTYPE_NAMES, best_configuration, dtype_of, fwd_bwd, import_torch, print_times

best_configuration()
torch, F = import_torch()

# op -> (input range, number of operands, call)
OPS = {
    "mse_loss": ((-2, 2), 2, lambda x, y, v: F.mse_loss(x, y)),
    "l1_loss": ((-2, 2), 2, lambda x, y, v: F.l1_loss(x, y)),
    "smooth_l1_loss": ((-2, 2), 2, lambda x, y, v: F.smooth_l1_loss(x, y)),
    "huber_loss": ((-2, 2), 2, lambda x, y, v: F.huber_loss(x, y)),
    "soft_margin_loss": ((-2, 2), 2, lambda x, y, v: F.soft_margin_loss(x, y)),
    "binary_cross_entropy": ((0.02, 0.98), 2, lambda x, y, v: F.binary_cross_entropy(x, y)),
    "binary_cross_entropy_with_logits": ((-8, 8), 2, lambda x, y, v: F.binary_cross_entropy_with_logits(x, y)),
    "kl_div": ((-4, 0), 2, lambda x, y, v: F.kl_div(x, y, reduction="mean")),
    "poisson_nll_loss": ((-2, 2), 2, lambda x, y, v: F.poisson_nll_loss(x, y)),
    "gaussian_nll_loss": ((-2, 2), 3, lambda x, y, v: F.gaussian_nll_loss(x, y, v)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--best", action="store_true")
    ap.add_argument("op")
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    a = ap.parse_args()
    if a.op not in OPS:
        return
    torch.set_num_threads(a.threads)
    warnings.simplefilter("ignore")
    (lo, hi), nops, fn = OPS[a.op]
    dtype, n = dtype_of(torch, a.dtype), a.numel
    g = torch.Generator().manual_seed(0)
    x = (lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)).to(dtype).requires_grad_(True)
    y = torch.rand(n, generator=g, dtype=torch.float64).to(dtype)
    v = (0.5 + torch.rand(n, generator=g, dtype=torch.float64)).to(dtype) if nops > 2 else None
    print_times(fwd_bwd(torch, lambda: fn(x, y, v), [x]))


if __name__ == "__main__":
    main()
