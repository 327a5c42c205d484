#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times the Python peers of crps_ensemble on PyTorch CPU on the work
perf_tests/bench_ensemble.cpp does (protocol of tools/torch_bench_common.py:
"key milliseconds" lines, median of repeats; keys fwd, bwd, fwdbwd; silent
when torch is absent), and prints the fastest peer's times: PhysicsNeMo's
sorted kernel CRPS (physicsnemo/metrics/general/crps.py's kcrps, written out
here: torch.sort of the members, then the sorted sum) and scoringrules'
torch "fair" estimator where scoringrules is installed. Fair estimator,
members last, mean over the points, float32.

  torch_bench_ensemble.py --threads 1 --points 1048576 --members 16
"""
import argparse

from torch_bench_common import fwd_bwd, import_torch, print_times


def kcrps_sorted(torch, x, y):
    """PhysicsNeMo's kcrps (fair, sorted): mean |x - y| - sum_k (2k - m - 1) x_(k) / (m (m - 1))."""
    m = x.shape[-1]
    xs, _ = torch.sort(x, dim=-1)
    k = torch.arange(1, m + 1, dtype=x.dtype)
    spread = ((2 * k - m - 1) * xs).sum(-1) / (m * (m - 1))
    return ((x - y[..., None]).abs().mean(-1) - spread).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--points", type=int, required=True)
    ap.add_argument("--members", type=int, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch, _ = import_torch()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(a.points, a.members, generator=g) * 4 - 2).requires_grad_()
    y = torch.rand(a.points, generator=g) * 4 - 2
    best = fwd_bwd(torch, lambda: kcrps_sorted(torch, x, y), [x], repeats=a.repeats, warmup=1)
    try:
        import scoringrules
        sr = fwd_bwd(torch, lambda: scoringrules.crps_ensemble(y, x, estimator="fair", backend="torch").mean(), [x],
                     repeats=a.repeats, warmup=1)
        if sr["fwdbwd"] < best["fwdbwd"]:
            best = sr
    except Exception:  # not installed, or out of memory at large m
        pass
    print_times(best)


if __name__ == "__main__":
    main()
