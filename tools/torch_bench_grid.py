#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times neuraloperator's LpLoss and H1Loss (neuralop.losses.data_losses,
written for neuraloperator 2.0.0) on PyTorch CPU on the work
perf_tests/bench_grid.cpp does, for its side-by-side numbers (protocol of
tools/torch_bench_common.py: "key milliseconds" lines, median of repeats;
keys fwd (under no_grad), bwd (fwdbwd - fwd) and fwdbwd (forward + autograd
backward w.r.t. both input and target); silent when torch or neuralop is
absent). The losses are called as a training loop does, `loss(x, y)`: the
relative norm, neuraloperator's default reduction 'sum' over the batch and
channels (bench_grid.cpp passes kloss the same reduction; 'mean' costs the
same), float32, input and target [batch, channels, n, ..., n] uniform in
[-1, 1); timed after two untimed forward + backward passes (the allocator
warm, as in a training loop).

  torch_bench_grid.py --threads 1 lp_loss --shape 8 4 512 512 --grid-ndim 2 --p 2
  torch_bench_grid.py --threads 1 h1_loss --shape 8 4 512 512 --grid-ndim 2 --periodic 1
  torch_bench_grid.py --threads 1 h1_loss --shape 2 1 128 128 128 --grid-ndim 3 --periodic 0
  (--best re-runs itself in torch's fastest CPU configuration, as
   tools/torch_bench_common.py's best_configuration says)
"""
import argparse
import warnings

from torch_bench_common import best_configuration, fwd_bwd, import_torch, print_times

best_configuration()
torch, _ = import_torch()


def make_loss(op, grid_ndim, p, periodic, reduction):
    """The neuraloperator loss object of `op`, or None without neuralop."""
    try:
        from neuralop.losses.data_losses import H1Loss, LpLoss
    except Exception:
        return None
    if op == "lp_loss":
        return LpLoss(d=grid_ndim, p=p, reduction=reduction)
    if op == "h1_loss":
        return H1Loss(d=grid_ndim, reduction=reduction, periodic_in_x=periodic, periodic_in_y=periodic,
                      periodic_in_z=periodic)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--best", action="store_true")
    ap.add_argument("op", choices=("lp_loss", "h1_loss"))
    ap.add_argument("--shape", type=int, nargs="+", required=True,
                    help="input and target's shape: the leading axes, then the grid's")
    ap.add_argument("--grid-ndim", type=int, required=True, help="the trailing axes that form the grid")
    ap.add_argument("--p", type=float, default=2, help="lp_loss's order")
    ap.add_argument("--periodic", type=int, default=1, choices=(0, 1), help="h1_loss: every grid axis periodic")
    ap.add_argument("--reduction", default="sum", choices=("sum", "mean"))
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    p = int(a.p) if a.p == int(a.p) else a.p  # LpLoss tests p % 2 == 0 for its even-power path
    loss = make_loss(a.op, a.grid_ndim, p, bool(a.periodic), a.reduction)
    if loss is None:
        return
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(*a.shape, generator=g) * 2 - 1).requires_grad_(True)
    y = (torch.rand(*a.shape, generator=g) * 2 - 1).requires_grad_(True)
    # Two forward + backward passes first: their freed intermediates raise
    # glibc's mmap threshold, so that later calls reuse heap memory rather
    # than fault in fresh pages (a training loop's steady state; cold, the
    # no_grad forward measured first is 2-3 times slower at these shapes).
    for _ in range(2):
        loss(x, y).backward()
    x.grad = y.grad = None
    print_times(fwd_bwd(torch, lambda: loss(x, y), [x, y], repeats=a.repeats, warmup=1))


if __name__ == "__main__":
    main()
