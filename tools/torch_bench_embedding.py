#!/usr/bin/python3
"""Times PyTorch CPU on the work perf_tests/bench_embedding.cpp does, for the
side-by-side numbers. Same protocol as tools/torch_bench.py: `--threads N`
first, prints "key milliseconds" lines (median of repeats): fwd, bwd
(backward alone = fwdbwd - fwd), fwdbwd. Uniform random indices, as the
C++ benchmark. Silent (no output) when torch is absent.

  torch_bench_embedding.py --threads 1 embedding --indices 262144 --rows 50257 --dim 768
  torch_bench_embedding.py --threads 1 embedding_bag --mode sum --rows 1000000 --dim 64 --bags 65536 --bag-size 20
"""
import argparse
import statistics
import sys
import time
from torch_bench_common import median_ms as _median_ms  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(0)

DTYPES = {"float32": torch.float32, "float64": torch.float64,
          "float16": torch.float16, "bfloat16": torch.bfloat16}


def median_ms(fn, repeats=5, warmup=1):
    return _median_ms(fn, repeats, warmup)


def run(fwd_fn, w):
    out = {}
    with torch.no_grad():
        out["fwd"] = median_ms(fwd_fn)
    go = torch.randn_like(fwd_fn())

    def fb():
        w.grad = None
        fwd_fn().backward(go)
    out["fwdbwd"] = median_ms(fb)
    out["bwd"] = max(out["fwdbwd"] - out["fwd"], 0.0)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("op")
    ap.add_argument("--indices", type=int, default=262144)
    ap.add_argument("--rows", type=int, default=50257)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--bags", type=int, default=65536)
    ap.add_argument("--bag-size", type=int, default=20)
    ap.add_argument("--mode", default="sum")
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = DTYPES[a.dtype]
    w = torch.randn(a.rows, a.dim, dtype=dtype, requires_grad=True)
    if a.op == "embedding":
        idx = torch.randint(0, a.rows, (a.indices,))
        res = run(lambda: F.embedding(idx, w), w)
    elif a.op == "embedding_bag":
        n = a.bags * a.bag_size
        idx = torch.randint(0, a.rows, (n,))
        offsets = torch.arange(0, n, a.bag_size)
        res = run(lambda: F.embedding_bag(idx, w, offsets, mode=a.mode), w)
    else:
        return
    for k, v in res.items():
        print(k, "%.6f" % v)


if __name__ == "__main__":
    main()
