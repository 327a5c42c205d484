#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch CPU cross_entropy on the same work as perf_tests/bench_cross_entropy
(tools/torch_bench_common.py's protocol): prints "key milliseconds" lines, median of
repeats - fwd (no grad), fwdbwd (forward + backward), bwd (the difference).

  torch_bench_cross_entropy.py --threads 1 --shape 128 32000 --dtype float32
  torch_bench_cross_entropy.py --threads 1 --best --shape 128 32000

--best runs torch in its fastest configuration on this machine
(ATEN_CPU_CAPABILITY=avx512 GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which
must be set before torch loads: the script re-executes itself).
Silent (no output) when torch is absent.
"""
import argparse

from torch_bench_common import DTYPE_NAMES, best_configuration, dtype_of, fwd_bwd, import_torch, print_times


def main():
    best_configuration()
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--best", action="store_true")
    ap.add_argument("--shape", type=int, nargs=2, required=True)
    ap.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    ap.add_argument("--reduction", default="mean")
    a = ap.parse_args()
    torch, F = import_torch()
    torch.set_num_threads(a.threads)
    n, c = a.shape
    x = (torch.rand(n, c, dtype=torch.float32) * 8 - 4).to(dtype_of(torch, a.dtype)).requires_grad_(True)
    t = torch.randint(0, c, (n,))
    print_times(fwd_bwd(torch, lambda: F.cross_entropy(x, t, reduction=a.reduction), [x]))


if __name__ == "__main__":
    main()
