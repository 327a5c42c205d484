#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Compare the benchmark programs of two kloss builds in one run.

Runs each named perf_tests program of the old build and of the new build
alternately at each thread count, for --rounds rounds (old then new in
even rounds, new then old in odd ones, so neither build always runs
second), keeps the fastest time per benchmark of each build (the run least
disturbed by whatever else the machine did), and prints a Markdown table
of new / old per benchmark and the median ratio per thread count. Running
the two builds alternately in the same session is what makes the ratio
mean something on a shared VM, whose speed drifts between minutes.

  perf_tests/compare_builds.py /tmp/old/build build/omp \
      --programs bench_cross_entropy bench_pointwise bench_embedding --threads 1 2

A second pass over the benchmarks a first one marked, with a --filter of
their names and more rounds, keeps each program's run short, so that the
two builds' runs of one benchmark lie minutes closer together.

The peer is not run (KLOSS_BENCH_TORCH=0): this compares kloss with
kloss. Threads are bound to cores as in thread_scaling.py.
"""
import argparse
import os
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from thread_scaling import run  # noqa: E402  one program's run: threads bound, its JSON read


def best_of(acc, rows):
    for name, row in rows.items():
        acc[name] = min(row["ms"], acc.get(name, row["ms"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=pathlib.Path, help="the reference build directory (holds perf_tests/bench_*)")
    ap.add_argument("new", type=pathlib.Path, help="the build under test")
    ap.add_argument("--programs", nargs="+", required=True, help="bench_* program names")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--rounds", type=int, default=2, help="runs of each build, in alternating order")
    ap.add_argument("--min-time", default="0.2", help="Google Benchmark --benchmark_min_time")
    ap.add_argument("--filter", default="", help="Google Benchmark --benchmark_filter")
    ap.add_argument("--flag", type=float, default=1.05, help="mark ratios above this")
    args = ap.parse_args()
    os.environ["KLOSS_BENCH_TORCH"] = "0"  # kloss against kloss: no peer
    for build in (args.old, args.new):
        for name in args.programs:
            if not (build / "perf_tests" / name).is_file():
                sys.exit(f"{build / 'perf_tests' / name} does not exist")

    print("| threads | program | benchmark | old ms | new ms | new / old |")
    print("|---|---|---|---|---|---|")
    medians = {}
    for threads in args.threads:
        ratios = []
        for name in args.programs:
            old, new = {}, {}
            for rnd in range(args.rounds):
                order = [(old, args.old), (new, args.new)]
                for acc, build in (order if rnd % 2 == 0 else order[::-1]):
                    best_of(acc, run(build / "perf_tests" / name, threads, args.min_time, args.filter, 1))
            for bench in old:
                if bench not in new:
                    continue
                r = new[bench] / old[bench]
                ratios.append(r)
                mark = " **" if r > args.flag else ""
                print(f"| {threads} | {name} | {bench} | {old[bench]:.3g} | {new[bench]:.3g} | {r:.2f}{mark} |",
                      flush=True)
        medians[threads] = (statistics.median(ratios), min(ratios), max(ratios), len(ratios)) if ratios else None
    print()
    for threads, m in medians.items():
        if m:
            print(f"{threads} thread(s): {m[3]} benchmarks in common, new / old median {m[0]:.3f} "
                  f"(min {m[1]:.2f}, max {m[2]:.2f})")


if __name__ == "__main__":
    main()
