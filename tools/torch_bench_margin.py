#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times PyTorch CPU on the work perf_tests/bench_margin.cpp does, for its
side-by-side numbers (tools/torch_bench_common.py's protocol): prints "key ms"
lines, the median of repeats, for fwd (under no_grad), bwd (fwdbwd - fwd)
and fwdbwd. Run with /usr/bin/python3 (python3-torch); silent (no output)
when torch is absent.

  torch_bench_margin.py --threads 1 cosine_embedding_loss --shape 65536 256 --dtype float32

Inputs match the C++ benchmark: [N, D] floating inputs, ±1 targets, class
targets in [0, D), multilabel rows of 4 labels then -1, reduction mean.
"""
import argparse

from torch_bench_common import DTYPE_NAMES, dtype_of, fwd_bwd, import_torch, print_times

torch, F = import_torch()


def make(op, n, d, dtype):
    """(function of the differentiable tensors, list of those tensors)."""
    def x():
        return (torch.rand(n, d, dtype=torch.float32) * 2 - 1).to(dtype).requires_grad_(True)

    def sign(*shape):
        return (torch.randint(0, 2, shape) * 2 - 1).to(dtype)
    if op == "hinge_embedding_loss":
        a, t = x(), sign(n, d)
        return (lambda: F.hinge_embedding_loss(a, t)), [a]
    if op == "margin_ranking_loss":
        a, b, t = x(), x(), sign(n, d)
        return (lambda: F.margin_ranking_loss(a, b, t, margin=0.1)), [a, b]
    if op == "triplet_margin_loss":
        a, p, q = x(), x(), x()
        return (lambda: F.triplet_margin_loss(a, p, q)), [a, p, q]
    if op == "cosine_embedding_loss":
        a, b, t = x(), x(), sign(n)
        return (lambda: F.cosine_embedding_loss(a, b, t, margin=0.1)), [a, b]
    if op == "multi_margin_loss":
        a, t = x(), torch.randint(0, d, (n,))
        return (lambda: F.multi_margin_loss(a, t)), [a]
    if op == "multilabel_margin_loss":
        a = x()
        t = torch.full((n, d), -1, dtype=torch.long)
        t[:, :4] = torch.randint(0, d, (n, 4))
        return (lambda: F.multilabel_margin_loss(a, t)), [a]
    if op == "multilabel_soft_margin_loss":
        a, t = x(), torch.randint(0, 2, (n, d)).to(dtype)
        return (lambda: F.multilabel_soft_margin_loss(a, t)), [a]
    raise SystemExit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("op")
    ap.add_argument("--shape", type=int, nargs=2, default=[65536, 256])
    ap.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    fn, leaves = make(a.op, a.shape[0], a.shape[1], dtype_of(torch, a.dtype))
    print_times(fwd_bwd(torch, fn, leaves, repeats=5, warmup=1))


if __name__ == "__main__":
    main()
