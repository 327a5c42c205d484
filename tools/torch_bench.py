#!/usr/bin/python3
"""Times PyTorch CPU on the same work a kloss benchmark does, for the
benchmarks' side-by-side numbers. Prints "key milliseconds" lines (median of
repeats): fwd, bwd (backward alone), fwdbwd. Run with /usr/bin/python3
(Debian's python3-torch). Silent failure (no output) when torch is absent.

  torch_bench.py --threads 1 mse_loss --numel 16777216 --dtype float32
  torch_bench.py --threads 1 cross_entropy --shape 128 32000 --dtype float32
"""
import argparse
import statistics
import sys
import time
from torch_bench_common import median_ms  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(0)

DTYPES = {"float32": torch.float32, "float64": torch.float64,
          "float16": torch.float16, "bfloat16": torch.bfloat16}




def bench_binary(op, n, dtype, reduction="mean"):
    fn = getattr(F, op)
    x = torch.randn(n, dtype=dtype, requires_grad=True)
    y = torch.randn(n, dtype=dtype)
    out = {}
    with torch.no_grad():
        out["fwd"] = median_ms(lambda: fn(x, y, reduction=reduction))

    def fb():
        x.grad = None
        fn(x, y, reduction=reduction).backward()
    out["fwdbwd"] = median_ms(fb)
    out["bwd"] = max(out["fwdbwd"] - out["fwd"], 0.0)
    return out


def bench_cross_entropy(n, c, dtype):
    x = torch.randn(n, c, dtype=dtype, requires_grad=True)
    t = torch.randint(0, c, (n,))
    out = {}
    with torch.no_grad():
        out["fwd"] = median_ms(lambda: F.cross_entropy(x, t))

    def fb():
        x.grad = None
        F.cross_entropy(x, t).backward()
    out["fwdbwd"] = median_ms(fb)
    out["bwd"] = max(out["fwdbwd"] - out["fwd"], 0.0)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("op")
    ap.add_argument("--numel", type=int)
    ap.add_argument("--shape", type=int, nargs="+")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--reduction", default="mean")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = DTYPES[a.dtype]
    if a.op == "cross_entropy":
        res = bench_cross_entropy(a.shape[0], a.shape[1], dtype)
    elif a.numel:
        res = bench_binary(a.op, a.numel, dtype, a.reduction)
    else:
        return
    for k, v in res.items():
        print(k, "%.6f" % v)


if __name__ == "__main__":
    main()
