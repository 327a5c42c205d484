#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times PyTorch CPU ctc_loss on the work bench_ctc does, for the benchmark's
side-by-side numbers (protocol of tools/torch_bench_common.py: "key milliseconds"
lines, median of repeats; keys fwd, bwd (= fwdbwd - fwd), fwdbwd; silent
when torch is absent).

  torch_bench_ctc.py --threads 1 --T 500 --N 32 --C 40 --S 120 --dtype float32

log_probs: log_softmax of uniform logits in [-3, 3); targets padded [N, S]
with labels in [1, C) (blank 0); every input length T, every target length
S; reduction mean - the same shapes and lengths bench_ctc uses.
"""
import argparse

from torch_bench_common import dtype_of, fwd_bwd, import_torch, print_times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--N", type=int, required=True)
    ap.add_argument("--C", type=int, required=True)
    ap.add_argument("--S", type=int, required=True)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch, F = import_torch()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    lp = ((torch.rand(a.T, a.N, a.C, generator=g) * 6 - 3).log_softmax(-1)).to(dtype_of(torch, a.dtype))
    lp.requires_grad_()
    tg = torch.randint(1, a.C, (a.N, a.S), generator=g)
    il = torch.full((a.N,), a.T, dtype=torch.long)
    tl = torch.full((a.N,), a.S, dtype=torch.long)
    print_times(fwd_bwd(torch, lambda: F.ctc_loss(lp, tg, il, tl), [lp], repeats=a.repeats, warmup=1))


if __name__ == "__main__":
    main()
