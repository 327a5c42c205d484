# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Figures of the kloss examples, drawn with matplotlib from the CSVs the
programs write (the programs call this script themselves when they finish).
The CSVs open with `# key: value` lines (examples/common/csv.hpp): the
build's configuration, whose kloss version, commit and backend each figure
shows in its corner.

usage: /usr/bin/python3 plot.py sim_surrogate sim_surrogate.csv sim_surrogate.png [NOTE]
       /usr/bin/python3 plot.py lm_head lm_head.csv lm_head.png [NOTE]
       /usr/bin/python3 plot.py scaling scaling.csv scaling.png [NOTE]

NOTE (optional) is added to the figure's title: the run's settings that the
CSV does not hold (ranks, sizes).

sim_surrogate: the surrogate's MSE and Huber loss (log scale: they span
decades), its training objective (Gaussian NLL, or the ensemble's CRPS) and
its spread-skill (the predicted spread against the mean's RMSE) per
training round, against the simulation step. lm_head: training and held-out cross-entropy per step with the data's
entropy floor drawn as a line. scaling: time per step, speed-up against one
rank (with the ideal line), parallel efficiency (ideal 1) and the share of
the step spent in MPI calls, per (study, op).
"""
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 100


def read(path):
    """The rows of a CSV, and its `# key: value` head (the build's
    configuration and the run's command line) as a dict."""
    head, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                head[key.strip()] = value.strip()
            else:
                lines.append(line)
    return list(csv.DictReader(lines)), head


def provenance(fig, head):
    """kloss's version, commit and backend in the figure's corner."""
    if "kloss_version" in head:
        text = (f"kloss {head['kloss_version']} (git {head.get('git_hash', '?')}), "
                f"Kokkos {head.get('kokkos_version', '?')} {head.get('default_execution_space', '')}")
        fig.text(0.995, 0.005, text, ha="right", va="bottom", fontsize=6, color="gray")


def titled(title, note):
    return f"{title}\n({note})" if note else title


def column(rows, name):
    """The column as floats; empty cells (no value at that step) skipped,
    with the step of every kept value."""
    xs, ys = [], []
    for r in rows:
        if r[name] != "":
            xs.append(float(r["step"]))
            ys.append(float(r[name]))
    return xs, ys


def sim_surrogate(rows, dst, note, head):
    objective = head.get("objective", "gaussian_nll")
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.2))
    s, mse = column(rows, "mse")
    _, huber = column(rows, "huber")
    _, obj = column(rows, "objective")
    _, spread = column(rows, "spread")
    _, rmse = column(rows, "rmse")
    a.semilogy(s, mse, "-", color="tab:red", label="MSE of the predicted mean")
    a.semilogy(s, huber, "-", color="tab:blue", label="Huber (delta = 1) of the predicted mean")
    a.set_xlabel("simulation step")
    a.set_ylabel("loss per cell (u squared, log scale)")
    a.set_title(f"accuracy: MSE {mse[0]:.2g} -> {mse[-1]:.2g} ({100 * mse[-1] / mse[0]:.3g} % of the first round)",
                fontsize=10)
    a.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    if objective == "crps_ensemble":
        b.semilogy(s, obj, "-", color="tab:green", label="almost-fair crps_ensemble (training objective)")
        b.set_ylabel("CRPS per cell (log scale)")
        b.set_title("the objective: the ensemble's members together", fontsize=10)
    else:
        b.plot(s, obj, "-", color="tab:green", label="gaussian_nll_loss (training objective)")
        b.set_ylabel("Gaussian NLL per cell (nats)")
        b.set_title("the objective: mean and variance together", fontsize=10)
    b.set_xlabel("simulation step")
    b.grid(True, alpha=0.3)
    b.legend(fontsize=8)
    what = "the members' spread" if objective == "crps_ensemble" else "the predicted standard deviation"
    c.semilogy(s, rmse, "-", color="tab:red", label="RMSE of the predicted mean (skill)")
    c.semilogy(s, spread, "--", color="tab:purple", label=what + " (spread)")
    c.set_xlabel("simulation step")
    c.set_ylabel("per cell (u, log scale)")
    c.set_title(f"spread-skill: spread / RMSE {spread[-1] / rmse[-1]:.2f} at the end (1: calibrated)", fontsize=10)
    c.grid(True, which="both", alpha=0.3)
    c.legend(fontsize=8)
    fig.suptitle(titled("sim_surrogate: an MLP surrogate learns the advection-diffusion update online", note))
    fig.tight_layout()
    provenance(fig, head)
    fig.savefig(dst, dpi=DPI)


def lm_head(rows, dst, note, head):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    s, train = column(rows, "train_loss")
    hs, held = column(rows, "held_out_loss")
    floor = float(rows[0]["entropy_floor"])
    ax.plot(s, train, "-", color="tab:red", lw=1, alpha=0.8, label="training batch loss")
    ax.plot(hs, held, "o-", color="tab:blue", ms=4, label="held-out loss (8192 unseen tokens)")
    ax.axhline(floor, color="black", ls="--", lw=1.2, label=f"entropy floor of the data ({floor:.3f} nats/token)")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(0, math.ceil(max(train + held) + 0.5))
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(f"lm_head_vocab_parallel: held-out loss {held[0]:.2f} -> {held[-1]:.2f} nats/token, "
                 f"{held[-1] - floor:.2f} above the floor", fontsize=10)
    fig.suptitle(titled("Vocabulary-parallel embedding + fused LM head on Markov-chain tokens", note))
    fig.tight_layout()
    provenance(fig, head)
    fig.savefig(dst, dpi=DPI)


def scaling(rows, dst, note, head):
    series = {}
    for r in rows:
        series.setdefault((r["study"], r["op"]), []).append(r)
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    for (study, op), rs in sorted(series.items()):
        rs.sort(key=lambda r: int(r["ranks"]))
        p = [int(r["ranks"]) for r in rs]
        label = f"{op}, {study} scaling"
        style = "-o" if study == "strong" else "--s"
        ax[0][0].plot(p, [float(r["time_ms"]) for r in rs], style, label=label)
        ax[0][1].plot(p, [float(r["speedup"]) for r in rs], style, label=label)
        ax[1][0].plot(p, [float(r["efficiency"]) for r in rs], style, label=label)
        ax[1][1].plot(p, [100 * float(r["mpi_fraction"]) for r in rs], style, label=label)
    pmax = max(int(r["ranks"]) for r in rows)
    ax[0][1].plot([1, pmax], [1, pmax], "k:", label="ideal (strong): p")
    ax[1][0].axhline(1.0, color="black", ls=":", label="ideal: 1")
    panels = [("time per step, slowest rank", "time (ms)"), ("speed-up against 1 rank", "speed-up (x)"),
              ("parallel efficiency (strong: speed-up / p; weak: t1 / tp)", "efficiency"),
              ("time inside MPI calls", "share of the step (%)")]
    for a, (title, ylabel) in zip(ax.flat, panels):
        a.set_title(title, fontsize=10)
        a.set_xlabel("MPI ranks")
        a.set_ylabel(ylabel)
        a.set_xticks(range(1, pmax + 1))
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(titled("kloss vocabulary-parallel ops: strong and weak scaling", note))
    fig.tight_layout()
    provenance(fig, head)
    fig.savefig(dst, dpi=DPI)


def main(argv):
    kinds = {"sim_surrogate": sim_surrogate, "lm_head": lm_head, "scaling": scaling}
    if len(argv) not in (4, 5) or argv[1] not in kinds:
        sys.stderr.write(__doc__)
        return 2
    rows, head = read(argv[2])
    if not rows:
        sys.stderr.write(f"plot.py: {argv[2]} has no rows\n")
        return 1
    kinds[argv[1]](rows, argv[3], argv[4] if len(argv) == 5 else "", head)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
