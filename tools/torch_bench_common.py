"""Shared by the tools/torch_bench*.py scripts: the timing rule (median of
repeats after warm-up, in milliseconds). Output protocol of every script:
"key ms" lines (fwd, bwd, fwdbwd, ...), `--threads N` first."""
import statistics
import time


def median_ms(fn, repeats=7, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
