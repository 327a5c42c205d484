#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The peers of perf_tests/bench_lm_shapes and bench_pointwise on a CUDA GPU
(docs/gpu.md): PyTorch, Liger-Kernel and Cut Cross-Entropy on the same
work, timed with CUDA events (triton.testing.do_bench, median).

  gpu_peers.py            every table
  gpu_peers.py --only ce  one of: copy, ce, head, pointwise, embedding

Liger-Kernel and Cut Cross-Entropy are optional (a row says when one is
missing). Liger's cross-entropy computes the gradient inside its forward
when the input requires it (one read of the logits, one write), so its
forward + backward moves 2 N V elements where kloss's forward + in-place
backward moves 3; its forward alone runs on an input without grad.
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

CE_SHAPES = [(4096, 32000), (16384, 128256), (2048, 256000)]
HEAD_SHAPES = [(4096, 2048, 32000), (8192, 2048, 128256)]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def ms(fn):
    return do_bench(fn, warmup=50, rep=300, return_mode="median")


def row(*cells):
    print(" | ".join(str(c) for c in cells), flush=True)


def copy_gbs():
    a = torch.rand(1 << 28, device="cuda")
    b = torch.empty_like(a)
    t = ms(lambda: b.copy_(a))
    return 2 * a.numel() * 4 / (t * 1e-3) / 1e9


def logits(n, v, dtype, seed=2026):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.rand(n, v, device="cuda", generator=g) * 8 - 4).to(dtype)
    t = torch.randint(0, v, (n,), device="cuda", generator=g)
    return x, t


def table_ce(bw):
    try:
        from liger_kernel.transformers import LigerCrossEntropyLoss
        liger = LigerCrossEntropyLoss()
    except Exception as e:  # noqa: BLE001
        liger = None
        row("liger-kernel unavailable:", e)
    row("op", "dtype", "N", "V", "pass", "peer", "ms", "GBps", "x_floor")
    for name, dt in DTYPES.items():
        for n, v in CE_SHAPES:
            x, t = logits(n, v, dt)
            esize = x.element_size()
            for pas in ("fwd", "fwdbwd"):
                bytes_ = (1 if pas == "fwd" else 3) * n * v * esize
                floor_ms = bytes_ / (bw * 1e9) * 1e3
                if pas == "fwd":
                    with torch.no_grad():
                        cases = {"torch": lambda: F.cross_entropy(x, t)}
                        if liger:
                            cases["liger"] = lambda: liger(x, t)
                        for peer, fn in cases.items():
                            m = ms(fn)
                            row("cross_entropy", name, n, v, pas, peer, "%.3f" % m, "%.0f" % (bytes_ / m / 1e6),
                                "%.2f" % (m / floor_ms))
                else:
                    xg = x.clone().requires_grad_(True)

                    def torch_fb():
                        xg.grad = None
                        F.cross_entropy(xg, t).backward()
                    m = ms(torch_fb)
                    row("cross_entropy", name, n, v, pas, "torch", "%.3f" % m, "%.0f" % (bytes_ / m / 1e6),
                        "%.2f" % (m / floor_ms))
                    del xg
                    if liger:
                        xl = x.clone().requires_grad_(True)

                        def liger_fb():
                            xl.grad = None
                            liger(xl, t).backward()
                        m = ms(liger_fb)
                        row("cross_entropy", name, n, v, pas, "liger", "%.3f" % m, "%.0f" % (bytes_ / m / 1e6),
                            "%.2f" % (m / floor_ms))
                        del xl
            del x, t
            torch.cuda.empty_cache()


def table_head():
    peers = {}

    def torch_head(x, w, t):
        return F.cross_entropy((x @ w.t()).float(), t)
    peers["torch"] = torch_head
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        lf = LigerFusedLinearCrossEntropyLoss()
        peers["liger"] = lambda x, w, t: lf(w, x, t)
    except Exception as e:  # noqa: BLE001
        row("liger-kernel unavailable:", e)
    try:
        from cut_cross_entropy import linear_cross_entropy
        peers["cce"] = lambda x, w, t: linear_cross_entropy(x, w, t)
    except Exception as e:  # noqa: BLE001
        row("cut-cross-entropy unavailable:", e)
    row("op", "dtype", "N", "D", "V", "peer", "ms", "TFLOPs", "extra_MB")
    for name, dt in DTYPES.items():
        for n, d, v in HEAD_SHAPES:
            g = torch.Generator(device="cuda").manual_seed(7)
            x = (torch.rand(n, d, device="cuda", generator=g) * 2 - 1).to(dt).requires_grad_(True)
            w = (0.05 * (torch.rand(v, d, device="cuda", generator=g) * 2 - 1)).to(dt).requires_grad_(True)
            t = torch.randint(0, v, (n,), device="cuda", generator=g)
            for peer, f in peers.items():
                def fb():
                    x.grad = None
                    w.grad = None
                    f(x, w, t).backward()
                try:
                    fb()
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    fb()
                    torch.cuda.synchronize()
                    extra = (torch.cuda.max_memory_allocated() - base) / 1e6
                    m = ms(fb)
                    row("fused_linear_ce", name, n, d, v, peer, "%.2f" % m, "%.1f" % (6.0 * n * d * v / m / 1e9),
                        "%.0f" % extra)
                except Exception as e:  # noqa: BLE001
                    row("fused_linear_ce", name, n, d, v, peer, "failed:", str(e).splitlines()[0][:120])
            del x, w, t
            torch.cuda.empty_cache()


def table_pointwise(bw):
    n = 1 << 28
    row("op", "dtype", "numel", "pass", "peer", "ms", "GBps", "x_floor")
    for name, dt in list(DTYPES.items()) + [("float64", torch.float64)]:
        x = torch.rand(n, device="cuda").to(dt) * 4 - 2
        y = torch.rand(n, device="cuda").to(dt)
        for op in ("mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits"):
            f = getattr(F, op)
            with torch.no_grad():
                m = ms(lambda: f(x, y))
            b = 2 * n * x.element_size()
            row(op, name, n, "fwd", "torch", "%.3f" % m, "%.0f" % (b / m / 1e6), "%.2f" % (m / (b / (bw * 1e6))))
            xg = x.clone().requires_grad_(True)

            def fb():
                xg.grad = None
                f(xg, y).backward()
            with torch.no_grad():
                m_f = ms(lambda: f(x, y))
            m = max(ms(fb) - m_f, 1e-6)
            b = 3 * n * x.element_size()
            row(op, name, n, "bwd", "torch", "%.3f" % m, "%.0f" % (b / m / 1e6), "%.2f" % (m / (b / (bw * 1e6))))
            del xg
        del x, y
        torch.cuda.empty_cache()


def table_embedding():
    """perf_tests/bench_embedding's work: embedding at 262144 indices into a
    (50257, 768) table, embedding_bag (sum / mean / max) of 65536 bags of 20
    into a (1,000,000, 64) table, float32, uniform random indices; the
    backward alone (the forward's time taken off forward + backward)."""
    row("op", "mode", "pass", "peer", "ms")
    g = torch.Generator(device="cuda").manual_seed(11)
    idx = torch.randint(0, 50257, (262144,), device="cuda", generator=g)
    w = torch.rand(50257, 768, device="cuda", generator=g).requires_grad_(True)
    with torch.no_grad():
        m_f = ms(lambda: F.embedding(idx, w))
    row("embedding", "-", "fwd", "torch", "%.3f" % m_f)
    up = torch.rand(262144, 768, device="cuda", generator=g)

    def fb():
        w.grad = None
        F.embedding(idx, w).backward(up)
    row("embedding", "-", "bwd", "torch", "%.3f" % max(ms(fb) - m_f, 1e-6))
    del idx, w, up
    nb, ln, v, d = 65536, 20, 1000000, 64
    idx = torch.randint(0, v, (nb * ln,), device="cuda", generator=g)
    off = torch.arange(0, nb * ln, ln, device="cuda")
    w = torch.full((v, d), 0.5, device="cuda").requires_grad_(True)
    for mode in ("sum", "mean", "max"):
        with torch.no_grad():
            m_f = ms(lambda: F.embedding_bag(idx, w, off, mode=mode))
        row("embedding_bag", mode, "fwd", "torch", "%.3f" % m_f)
        up = torch.rand(nb, d, device="cuda", generator=g)

        def fbb():
            w.grad = None
            F.embedding_bag(idx, w, off, mode=mode).backward(up)
        row("embedding_bag", mode, "bwd", "torch", "%.3f" % max(ms(fbb) - m_f, 1e-6))
    del idx, w
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["copy", "ce", "head", "pointwise", "embedding"])
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    row("device", torch.cuda.get_device_name(), "torch", torch.__version__)
    bw = copy_gbs()
    row("copy_GBps", "%.0f" % bw)
    if a.only in (None, "ce"):
        table_ce(bw)
    if a.only in (None, "head"):
        table_head()
    if a.only in (None, "pointwise"):
        table_pointwise(bw)
    if a.only in (None, "embedding"):
        table_embedding()
    return 0


if __name__ == "__main__":
    sys.exit(main())
