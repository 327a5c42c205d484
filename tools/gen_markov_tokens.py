#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes data/markov_tokens.h5: token ids drawn from a known Markov chain
over a GPT-2-sized vocabulary (50257), with the chain's true conditional
entropy stored beside them, for the vocabulary-parallel language-model-head
example (examples/lm_head_vocab_parallel.cpp).

The chain: every token belongs to one of G clusters (cluster = a fixed
random map); the next token depends only on the current token's cluster and
is drawn from that cluster's Zipf-like distribution over K tokens spread
across the whole vocabulary. A bigram model (embedding + linear head) of
dimension >= G can represent it exactly, so training can approach the floor

    H = sum_c pi(c) * H(next | cluster c)   [nats/token]

with pi the stationary distribution of the induced chain over clusters
(computed exactly by power iteration). Layout:

    /tokens          int32 [n]   the sequence (gzip)
    attrs: vocab_size, clusters, support, entropy_nats, empirical_entropy_nats, seed, description

Run with /usr/bin/python3 (numpy + h5py). Deterministic.
"""
import os
import sys

import h5py
import numpy as np

V, G, K, N, SEED = 50257, 48, 96, 600_000, 20261122


def main(path):
    rng = np.random.default_rng(SEED)
    cluster_of = rng.integers(0, G, size=V)
    support = np.stack([rng.choice(V, size=K, replace=False) for _ in range(G)])  # [G, K]
    ranks = np.arange(1, K + 1, dtype=np.float64)
    probs = []
    for g in range(G):
        p = ranks ** -rng.uniform(0.7, 1.3)
        p = rng.permutation(p / p.sum())
        probs.append(p)
    probs = np.stack(probs)  # [G, K]
    # induced chain over clusters and its stationary distribution
    trans = np.zeros((G, G))
    for g in range(G):
        np.add.at(trans[g], cluster_of[support[g]], probs[g])
    pi = np.full(G, 1.0 / G)
    for _ in range(10000):
        nxt = pi @ trans
        if np.abs(nxt - pi).max() < 1e-15:
            break
        pi = nxt
    h_cluster = -(probs * np.log(probs)).sum(axis=1)
    entropy = float(pi @ h_cluster)
    # sample the sequence
    cdf = np.cumsum(probs, axis=1)
    tokens = np.empty(N, dtype=np.int32)
    t = int(support[0, 0])
    u = rng.random(N)
    for i in range(N):
        g = cluster_of[t]
        t = int(support[g, min(np.searchsorted(cdf[g], u[i]), K - 1)])
        tokens[i] = t
    # empirical conditional entropy of the sample under the true chain
    prev = np.concatenate([[support[0, 0]], tokens[:-1]])
    g_prev = cluster_of[prev]
    logp = np.log(probs)
    idx = np.full((G, V), -1, dtype=np.int64)  # position of a token in each cluster's support
    for g in range(G):
        idx[g, support[g]] = np.arange(K)
    lp = logp[g_prev, idx[g_prev, tokens]]
    empirical = float(-lp.mean())
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=tokens, compression="gzip", compression_opts=6)
        f.attrs["vocab_size"] = np.int64(V)
        f.attrs["clusters"] = np.int64(G)
        f.attrs["support"] = np.int64(K)
        f.attrs["entropy_nats"] = np.float64(entropy)
        f.attrs["empirical_entropy_nats"] = np.float64(empirical)
        f.attrs["seed"] = np.int64(SEED)
        f.attrs["description"] = ("token ids from a clustered Markov chain over a GPT-2-sized vocabulary; "
                                  "entropy_nats is the chain's true conditional entropy per token")
    print("wrote %s: %d tokens, vocab %d, entropy %.4f nats/token (sample: %.4f)" %
          (path, N, V, entropy, empirical))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "markov_tokens.h5"))
