# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Shared by the tools/torch_bench_*.py scripts, the PyTorch peers that
perf_tests/ runs in the same process run. Their protocol: `--threads N`
first; "key milliseconds" lines out, median of repeats after warm-up:
fwd (forward under no_grad), fwdbwd (forward + backward), bwd (their
difference); no output at all when torch is absent."""
import os
import statistics
import subprocess
import sys
import time

DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16")


def median_ms(fn, repeats=7, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def best_configuration():
    """With --best, re-runs this script in torch's fastest CPU configuration
    on this machine (ATEN_CPU_CAPABILITY=avx512, GLIBC_TUNABLES=
    glibc.malloc.hugetlb=1; both are read once at start-up, ATen's when
    torch loads and glibc's before main, so they must be in the
    environment of a fresh process) and exits with its status."""
    if "--best" in sys.argv and os.environ.get("KLOSS_TORCH_BEST") != "1":
        env = dict(os.environ, ATEN_CPU_CAPABILITY="avx512", GLIBC_TUNABLES="glibc.malloc.hugetlb=1",
                   KLOSS_TORCH_BEST="1")
        sys.exit(subprocess.call([sys.executable] + sys.argv, env=env))


def import_torch():
    """(torch, torch.nn.functional); exits silently (status 0) without torch."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        sys.exit(0)
    return torch, F


def dtype_of(torch, name):
    return getattr(torch, name)


def fwd_bwd(torch, fn, leaves, grad=None, repeats=7, warmup=2):
    """The protocol's times of fn() (no arguments, returns the loss), whose
    differentiable tensors are `leaves`; backward of `grad` (None: a scalar
    loss)."""
    out = {}
    with torch.no_grad():
        out["fwd"] = median_ms(fn, repeats, warmup)

    def fb():
        for t in leaves:
            t.grad = None
        fn().backward(grad)
    out["fwdbwd"] = median_ms(fb, repeats, warmup)
    out["bwd"] = max(out["fwdbwd"] - out["fwd"], 0.0)
    return out


def print_times(out):
    for k, v in out.items():
        print(k, "%.6f" % v)
