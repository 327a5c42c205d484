#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's plain unfused LM head on the same work as
perf_tests/bench_fused_linear (tools/torch_bench_common.py's protocol):
logits = x @ w.T in the input dtype, F.cross_entropy(logits, target) (mean),
autograd's backward to x and w. Prints "key value" lines: fwdbwd (median
milliseconds of the forward + backward), extra_MB (the process's peak
resident memory during the runs above what the inputs, their gradients and
the loaded library held before).

  torch_bench_fused_linear.py --threads 1 --shape 4096 2048 32000 --dtype bfloat16

The data: --data synthetic (deterministic patterns) or trained (a Zipf
softmax, as bench_fused_linear's "trained"); torch's time does not depend
on it (nothing is skipped), the loss is printed as loss for a check.
Silent (no output) when torch is absent.
"""
import argparse
import math
import time

from torch_bench_common import import_torch


def rss_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return float(line.split()[1]) * 1024.0
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shape", type=int, nargs=3, required=True)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16", "float64"))
    ap.add_argument("--data", default="synthetic", choices=("synthetic", "trained"))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch, F = import_torch()
    torch.set_num_threads(a.threads)
    n, d, v = a.shape
    dt = getattr(torch, a.dtype)
    g = torch.Generator().manual_seed(2026)
    if a.data == "trained":
        w = torch.randn(v, d, generator=g)
        w[:, 0] = -1.5 * torch.log(torch.arange(1, v + 1, dtype=torch.float32))
        x = torch.randn(n, d, generator=g) / math.sqrt(max(d - 1, 1))
        x[:, 0] = 1.0
        p = torch.arange(1, v + 1, dtype=torch.float64).pow(-1.5)
        t = torch.multinomial(p / p.sum(), n, replacement=True, generator=g)
    else:
        w = 0.02 * torch.rand(v, d, generator=g) - 0.01
        x = 2 * torch.rand(n, d, generator=g) - 1
        t = torch.randint(0, v, (n,), generator=g)
    x = x.to(dt).requires_grad_(True)
    w = w.to(dt).requires_grad_(True)
    x.grad = torch.zeros_like(x)
    w.grad = torch.zeros_like(w)
    base = rss_bytes("VmRSS:")

    def step():
        x.grad = None
        w.grad = None
        loss = F.cross_entropy(x @ w.t(), t)
        loss.backward()
        return loss

    loss = step()  # warm-up
    times = []
    for _ in range(max(a.repeats, 1)):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print("fwdbwd %.6f" % times[len(times) // 2])
    print("extra_MB %.3f" % ((rss_bytes("VmHWM:") - base) / 1e6))
    print("loss %.6f" % float(loss.detach()))


if __name__ == "__main__":
    main()
