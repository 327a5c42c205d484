#!/usr/bin/python3
"""PyTorch CPU cross_entropy on the same work as perf_tests/bench_cross_entropy
(tools/torch_bench.py's protocol): prints "key milliseconds" lines, median of
repeats - fwd (no grad), fwdbwd (forward + backward), bwd (the difference).

  torch_bench_cross_entropy.py --threads 1 --shape 128 32000 --dtype float32
  torch_bench_cross_entropy.py --threads 1 --best --shape 128 32000

--best runs torch in its fastest configuration on this machine
(ATEN_CPU_CAPABILITY=avx512 GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which
must be set before torch loads: the script re-executes itself).
Silent (no output) when torch is absent.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from torch_bench_common import median_ms  # noqa: E402




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--best", action="store_true")
    ap.add_argument("--shape", type=int, nargs=2, required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--reduction", default="mean")
    a = ap.parse_args()
    if a.best and os.environ.get("KLOSS_TORCH_BEST") != "1":
        env = dict(os.environ, ATEN_CPU_CAPABILITY="avx512", GLIBC_TUNABLES="glibc.malloc.hugetlb=1",
                   KLOSS_TORCH_BEST="1")
        sys.exit(subprocess.call([sys.executable] + sys.argv, env=env))
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return
    torch.set_num_threads(a.threads)
    dtype = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[a.dtype]
    n, c = a.shape
    x = (torch.rand(n, c, dtype=torch.float32) * 8 - 4).to(dtype).requires_grad_(True)
    t = torch.randint(0, c, (n,))
    out = {}
    with torch.no_grad():
        out["fwd"] = median_ms(lambda: F.cross_entropy(x, t, reduction=a.reduction))

    def fb():
        x.grad = None
        F.cross_entropy(x, t, reduction=a.reduction).backward()
    out["fwdbwd"] = median_ms(fb)
    out["bwd"] = max(out["fwdbwd"] - out["fwd"], 0.0)
    for k, v in out.items():
        print(k, "%.6f" % v)


if __name__ == "__main__":
    main()
