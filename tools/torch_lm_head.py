#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The main job's LM head in PyTorch, for the tokens/s comparison that
scripts/main-job.sh prints: the same model as
examples/lm_head_vocab_parallel (an embedding table and an LM head with
bias over the vocabulary of data/markov_tokens.h5, dim 64, batch 1024,
Adam lr 0.01, the same deterministic initial values), the same batches (the
tokens each of `--ranks` ranks would contribute, in rank order), the same
held-out evaluations (every steps/10 steps, 8192 tokens never trained on),
with torch's unfused head: logits = h @ W.T + b, F.cross_entropy, autograd.

  torch_lm_head.py --threads 2 [--steps 300] [--data data/markov_tokens.h5]

Prints one line: "torch_lm_head: S s, R tokens/s; held-out loss A -> B
nats/token (torch X, T threads)". Needs torch, numpy and h5py; exits with
status 2 and a line on stderr when they are missing.
"""
import argparse
import math
import os
import sys
import time


def init_values(v, d, begin=0):
    """kloss's deterministic initial values (the example's hash of row, column)."""
    import numpy as np
    r = (np.arange(v, dtype=np.uint64) + np.uint64(begin))[:, None]
    c = np.arange(d, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        s = r * np.uint64(1315423911) + c * np.uint64(2654435761) + np.uint64(7)
        s ^= s >> np.uint64(29)
        s *= np.uint64(0xBF58476D1CE4E5B9)
        s ^= s >> np.uint64(32)
    return ((s >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0) - 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--ranks", type=int, default=2, help="the kloss run's rank count (its batch composition)")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data", "markov_tokens.h5"))
    a = ap.parse_args()
    try:
        import h5py
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("torch_lm_head: needs torch, numpy and h5py (%s)" % e, file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(a.threads)
    with h5py.File(a.data, "r") as f:
        tokens = np.asarray(f["tokens"][:], dtype=np.int64)
        vocab = int(f.attrs["vocab_size"])
    held_n = 8192
    train = len(tokens) - held_n
    held = tokens[train:]
    N, D, P = a.batch, a.dim, a.ranks
    u = init_values(vocab, D)
    emb = torch.tensor(u, dtype=torch.float32, requires_grad=True)
    head = torch.tensor(0.05 * u, dtype=torch.float32, requires_grad=True)
    bias = torch.zeros(vocab, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.Adam([emb, head, bias], lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    # the ranks' shards of the training tokens and their per-step pairs
    shards = []
    for r in range(P):
        count = train // P + (1 if r < train % P else 0)
        begin = r * (train // P) + min(r, train % P)
        shards.append(tokens[begin:begin + count + 1])
    local = [N // P + (1 if r < N % P else 0) for r in range(P)]

    def batch(s):
        xs, ys = [], []
        for r in range(P):
            pairs = len(shards[r]) - 1
            start = ((s - 1) * local[r]) % max(pairs - local[r], 1)
            xs.append(shards[r][start:start + local[r]])
            ys.append(shards[r][start + 1:start + 1 + local[r]])
        return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

    def held_out():
        total, batches = 0.0, 0
        with torch.no_grad():
            off = 0
            while off + N + 1 <= len(held):
                x = torch.from_numpy(held[off:off + N])
                y = torch.from_numpy(held[off + 1:off + N + 1])
                total += float(F.cross_entropy(F.embedding(x, emb) @ head.t() + bias, y))
                batches += 1
                off += N
        return total / batches

    first = held_out()
    last = first
    t0 = time.perf_counter()
    for s in range(1, a.steps + 1):
        x, y = batch(s)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(F.embedding(x, emb) @ head.t() + bias, y)
        loss.backward()
        opt.step()
        if s % max(1, a.steps // 10) == 0 or s == a.steps:
            last = held_out()
    secs = time.perf_counter() - t0
    print("torch_lm_head: %.1f s, %.0f tokens/s; held-out loss %.4f -> %.4f nats/token (torch %s, %d threads)"
          % (secs, a.steps * N / secs, first, last, torch.__version__, a.threads))


if __name__ == "__main__":
    main()
