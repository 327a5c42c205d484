#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times PyTorch CPU on the work perf_tests/bench_embedding.cpp does, for the
side-by-side numbers. Protocol of tools/torch_bench_common.py: `--threads N`
first, prints "key milliseconds" lines (median of repeats): fwd, bwd
(backward alone = fwdbwd - fwd), fwdbwd. Uniform random indices, as the
C++ benchmark. Silent (no output) when torch is absent.

  torch_bench_embedding.py --threads 1 embedding --indices 262144 --rows 50257 --dim 768
  torch_bench_embedding.py --threads 1 embedding_bag --mode sum --rows 1000000 --dim 64 --bags 65536 --bag-size 20
"""
import argparse

from torch_bench_common import DTYPE_NAMES, dtype_of, fwd_bwd, import_torch, print_times

torch, F = import_torch()


def run(fwd_fn, w):
    return fwd_bwd(torch, fwd_fn, [w], torch.randn_like(fwd_fn()), repeats=5, warmup=1)


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
    ap.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    w = torch.randn(a.rows, a.dim, dtype=dtype_of(torch, a.dtype), requires_grad=True)
    if a.op == "embedding":
        idx = torch.randint(0, a.rows, (a.indices,))
        print_times(run(lambda: F.embedding(idx, w), w))
    elif a.op == "embedding_bag":
        n = a.bags * a.bag_size
        idx = torch.randint(0, a.rows, (n,))
        offsets = torch.arange(0, n, a.bag_size)
        print_times(run(lambda: F.embedding_bag(idx, w, offsets, mode=a.mode), w))


if __name__ == "__main__":
    main()
