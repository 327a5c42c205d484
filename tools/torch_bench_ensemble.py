#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times the Python peers of the ensemble scores on PyTorch CPU on the work
perf_tests/bench_ensemble.cpp does (protocol of tools/torch_bench_common.py:
"key milliseconds" lines, median of repeats; keys fwd, bwd, fwdbwd; silent
when torch is absent), and prints the fastest peer's times (and, for the
multivariate scores, each peer's as "<peer>_<key>" lines). Mean over the
points, float32, backward with respect to the ensemble only.

--score crps (default): fair estimator, members last. PhysicsNeMo's sorted
kernel CRPS (physicsnemo/metrics/general/crps.py's kcrps, written out here:
torch.sort of the members, then the sorted sum) and scoringrules' torch
"fair" estimator where scoringrules is installed.

--score energy: fair estimator, input [points, members, vars].
scoringrules 0.10's es_ensemble(obs, fct, estimator="fair",
backend="torch") (the [points, m, m, vars] pairwise differences, then
torch.norm), and anemoi-training's EnergyScoreLoss(fair=True,
norm_over="variables") written out here (anemoi_energy below: no released
anemoi-training has an energy score, this is the form of anemoi-core's
main at 11e8498e4; it takes no torch.cdist).

--score variogram: standard estimator ("nrg"), order --p, input [points,
members, vars]: scoringrules 0.10's vs_ensemble(obs, fct, p=p,
backend="torch") (all-ones weights [points, vars, vars], as it builds them).
At p < 1 torch's autograd gives NaN gradients (|x_a - x_a|^p at the
diagonal: 0 times an infinite derivative); the backward is timed anyway.

The multivariate peers take seconds a call: after one warm-up call each
timing repeats at most --repeats times and at most about --budget seconds.

  torch_bench_ensemble.py --threads 1 --points 1048576 --members 16
  torch_bench_ensemble.py --threads 1 --score energy --points 16384 --members 16 --vars 64
  torch_bench_ensemble.py --threads 1 --score variogram --points 4096 --members 16 --vars 32 --p 0.5
"""
import argparse
import statistics
import time

from torch_bench_common import fwd_bwd, import_torch, print_times


def kcrps_sorted(torch, x, y):
    """PhysicsNeMo's kcrps (fair, sorted): mean |x - y| - sum_k (2k - m - 1) x_(k) / (m (m - 1))."""
    m = x.shape[-1]
    xs, _ = torch.sort(x, dim=-1)
    k = torch.arange(1, m + 1, dtype=x.dtype)
    spread = ((2 * k - m - 1) * xs).sum(-1) / (m * (m - 1))
    return ((x - y[..., None]).abs().mean(-1) - spread).mean()


def anemoi_norm(torch, values, weights, dim):
    """anemoi-core's EnergyScoreLoss._weighted_norm without NaN masking or
    sharding: the norm over `dim`, scaled by its largest magnitude."""
    active = (weights > 0).expand_as(values)
    safe_values = torch.where(active, values, torch.zeros_like(values))
    weighted_abs = torch.abs(safe_values) * torch.sqrt(weights)
    distance_max = weighted_abs.amax(dim=dim, keepdim=True)
    safe_max = torch.where(distance_max > 0, distance_max, torch.ones_like(distance_max))
    scaled_abs = torch.where(distance_max > 0, weighted_abs / safe_max, torch.zeros_like(weighted_abs))
    norm_squared = scaled_abs.square().sum(dim=dim)
    positive = norm_squared > 0
    norm = torch.where(positive, torch.sqrt(torch.where(positive, norm_squared, torch.ones_like(norm_squared))),
                       torch.zeros_like(norm_squared))
    return distance_max.squeeze(dim) * norm


def anemoi_energy(torch, pred, target, weights):
    """anemoi-core's EnergyScoreLoss._score_field (fair, norm over the
    variables) on its layout: pred (batch, time, ensemble, grid, vars),
    target (batch, time, 1, grid, vars); the mean over the grid."""
    obs_term = anemoi_norm(torch, pred - target, weights, 4).mean(dim=2)
    m = pred.shape[2]
    pairs = torch.zeros_like(obs_term)
    for k in range(m - 1):
        pairs = pairs + anemoi_norm(torch, pred[:, :, k].unsqueeze(2) - pred[:, :, k + 1:], weights, 4).sum(dim=2)
    return (obs_term - pairs / (m * (m - 1))).mean()


def bounded_fwd_bwd(torch, fn, leaves, repeats, budget_s):
    """fwd_bwd's times (median of at most `repeats` after one warm-up call)
    with the repeats cut so that each of the two timings takes about
    budget_s at most: the multivariate peers take seconds a call."""
    def fb():
        for t in leaves:
            t.grad = None
        fn().backward()

    def median_ms(f):
        t0 = time.perf_counter()
        f()  # warm-up
        first = time.perf_counter() - t0
        times = []
        for _ in range(max(1, min(repeats, int(budget_s / max(first, 1e-9))))):
            t0 = time.perf_counter()
            f()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    out = {}
    with torch.no_grad():
        out["fwd"] = median_ms(fn)
    out["fwdbwd"] = median_ms(fb)
    out["bwd"] = max(out["fwdbwd"] - out["fwd"], 0.0)
    return out


def faster(best, other):
    return other if best is None or other["fwdbwd"] < best["fwdbwd"] else best


def peer_times(name, times):
    """Each peer's own times too, as "<peer>_<key>" lines."""
    return {name + "_" + k: v for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--score", choices=("crps", "energy", "variogram"), default="crps")
    ap.add_argument("--points", type=int, required=True)
    ap.add_argument("--members", type=int, required=True)
    ap.add_argument("--vars", type=int, default=1)
    ap.add_argument("--p", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=8.0,
                    help="energy, variogram: seconds each peer's fwd and fwdbwd timings may take, about")
    a = ap.parse_args()
    torch, _ = import_torch()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    best = None
    if a.score == "crps":
        x = (torch.rand(a.points, a.members, generator=g) * 4 - 2).requires_grad_()
        y = torch.rand(a.points, generator=g) * 4 - 2
        best = fwd_bwd(torch, lambda: kcrps_sorted(torch, x, y), [x], repeats=a.repeats, warmup=1)
        try:
            import scoringrules
            best = faster(best, fwd_bwd(
                torch, lambda: scoringrules.crps_ensemble(y, x, estimator="fair", backend="torch").mean(), [x],
                repeats=a.repeats, warmup=1))
        except Exception:  # not installed, or out of memory at large m
            pass
        print_times(best)
        return
    x = (torch.rand(a.points, a.members, a.vars, generator=g) * 4 - 2).requires_grad_()
    y = torch.rand(a.points, a.vars, generator=g) * 4 - 2
    each = {}
    if a.score == "energy":
        # anemoi's own layout (batch, time, ensemble, grid, vars), the same values.
        xa = x.detach().transpose(0, 1).contiguous()[None, None].requires_grad_()
        ya = y[None, None, None]
        wa = torch.ones_like(ya)  # its norm weights: ones_like(target) with no norm scaler
        best = bounded_fwd_bwd(torch, lambda: anemoi_energy(torch, xa, ya, wa), [xa], a.repeats, a.budget)
        each.update(peer_times("anemoi", best))
    try:
        import scoringrules
        if a.score == "energy":
            fn = lambda: scoringrules.es_ensemble(y, x, estimator="fair", backend="torch").mean()  # noqa: E731
        else:
            fn = lambda: scoringrules.vs_ensemble(y, x, p=a.p, backend="torch").mean()  # noqa: E731
        sr = bounded_fwd_bwd(torch, fn, [x], a.repeats, a.budget)
        each.update(peer_times("scoringrules", sr))
        best = faster(best, sr)
    except Exception:  # not installed, or out of memory
        pass
    if best is not None:
        print_times(dict(best, **each))


if __name__ == "__main__":
    main()
