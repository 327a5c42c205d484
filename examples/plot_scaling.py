"""Plots the CSV of examples/vocab_parallel_scaling.cpp.

usage: python3 plot_scaling.py scaling.csv scaling.png

Four panels per (study, op): time per step, speed-up against one rank (with
the ideal line), parallel efficiency, and the share of the step spent inside
MPI calls.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    rows = list(csv.DictReader(open(src)))
    series = {}
    for r in rows:
        series.setdefault((r["study"], r["op"]), []).append(r)
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    for (study, op), rs in sorted(series.items()):
        rs.sort(key=lambda r: int(r["ranks"]))
        p = [int(r["ranks"]) for r in rs]
        label = f"{op}, {study}"
        style = "-o" if study == "strong" else "--s"
        ax[0][0].plot(p, [float(r["time_ms"]) for r in rs], style, label=label)
        ax[0][1].plot(p, [float(r["speedup"]) for r in rs], style, label=label)
        ax[1][0].plot(p, [float(r["efficiency"]) for r in rs], style, label=label)
        ax[1][1].plot(p, [100 * float(r["mpi_fraction"]) for r in rs], style, label=label)
    pmax = max(int(r["ranks"]) for r in rows)
    ax[0][1].plot([1, pmax], [1, pmax], "k:", label="ideal (strong)")
    titles = ["time per step (ms, slowest rank)", "speed-up vs 1 rank", "parallel efficiency",
              "time inside MPI (% of step)"]
    for a, t in zip(ax.flat, titles):
        a.set_title(t)
        a.set_xlabel("MPI ranks")
        a.set_xticks(range(1, pmax + 1))
        a.grid(alpha=0.3)
    ax[0][0].legend(fontsize=8)
    fig.suptitle("kloss vocabulary-parallel scaling")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
