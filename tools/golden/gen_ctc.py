# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Golden cases for ctc_loss (schema kloss-golden/1, docs/golden-schema.md).

References: torch 1.13's F.ctc_loss in float64 on inputs rounded to the case
dtype (torch has no 16-bit CPU ctc_loss; kloss computes 16-bit in float), the
gradient from autograd with a random grad_output. Cases with the attribute
ctc_grad = "true" store the plain partial derivative instead of autograd's
value: on frames t < input_length, autograd's gradient minus exp(log_probs)
times the sequence's upstream gradient (checked against finite differences
of the forward below).

Left out, on purpose: input_length 0 (torch 1.13 reads log_alpha[-1], so its
value is garbage) and labels equal to blank or outside [0, C) (torch 1.13
accepts them and computes garbage; kloss raises IndexOutOfRange).

Run: cd tools/golden && /usr/bin/python3 -c "import gen_ctc as g; g.main('../../data/golden')"
"""

import torch
import torch.nn.functional as F

from golden_writer import DEFAULT_OUT_DIR, golden_file, rounded

OP = "ctc_loss"


def log_probs(T, N, C, gen, batched=True, spread=3.0):
    x = (torch.rand(T, N, C, generator=gen, dtype=torch.float64) * 2 - 1) * spread
    lp = x.log_softmax(-1)
    return lp if batched else lp[:, 0, :]


def labels(n, C, blank, gen):
    """n labels drawn from the C - 1 classes other than blank."""
    v = torch.randint(0, C - 1, (n,), generator=gen)
    return v + (v >= blank).long()


def upstream(shape, gen):
    return torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5


def sequence_scale(go, reduction, tl, N):
    """The upstream gradient of each sequence's loss, shape [N]."""
    if reduction == "none":
        return go.reshape(N)
    g = go.reshape(()).expand(N)
    if reduction == "mean":
        return g / N / tl.clamp(min=1).to(torch.float64)
    return g


def reference(lp, targets, il, tl, blank, reduction, zero_infinity, go, plain):
    """torch's forward output and gradient (or the plain partial derivative)."""
    x = lp.clone().requires_grad_()
    out = F.ctc_loss(x, targets, il, tl, blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    (out * go).sum().backward()
    grad = x.grad.detach().clone()
    if plain:
        batched = lp.dim() == 3
        T, N = lp.shape[0], (lp.shape[1] if batched else 1)
        g3 = grad if batched else grad.unsqueeze(1)
        lp3 = lp if batched else lp.unsqueeze(1)
        il_ = il.reshape(N)
        s = sequence_scale(go, reduction, tl.reshape(N), N)
        frames = (torch.arange(T).unsqueeze(1) < il_.unsqueeze(0)).to(torch.float64)  # [T, N]
        # zero_infinity zeroes infeasible sequences entirely (nothing to take out)
        nll = F.ctc_loss(lp3, targets, il_, tl.reshape(N),
                         blank=blank, reduction="none")
        keep = ~(torch.isinf(nll) & zero_infinity)
        term = lp3.exp() * (s * keep.to(torch.float64)).reshape(1, N, 1) * frames.unsqueeze(2)
        g3 = g3 - term
        grad = g3 if batched else g3[:, 0, :]
    return out.detach(), grad


def fd_check_plain(gen):
    """The plain-partial convention against central differences of the forward."""
    T, N, C = 5, 2, 4
    lp = log_probs(T, N, C, gen)
    tg = torch.tensor([[1, 2], [3, 3]])
    il, tl = torch.tensor([5, 4]), torch.tensor([2, 2])
    go = upstream((N,), gen)
    _, plain = reference(lp, tg, il, tl, 0, "none", False, go, True)
    eps = 1e-6
    fd = torch.zeros_like(lp)
    flat, fdf = lp.reshape(-1), fd.reshape(-1)
    for i in range(flat.numel()):
        p, m = flat.clone(), flat.clone()
        p[i] += eps
        m[i] -= eps
        fp = (F.ctc_loss(p.reshape(lp.shape), tg, il, tl, reduction="none") * go).sum()
        fm = (F.ctc_loss(m.reshape(lp.shape), tg, il, tl, reduction="none") * go).sum()
        fdf[i] = (fp - fm) / (2 * eps)
    assert torch.allclose(plain, fd, atol=1e-7, rtol=1e-6), (plain - fd).abs().max()


class Builder:
    def __init__(self, g, gen):
        self.g, self.gen, self.n = g, gen, 0

    def add(self, tag, dtype, lp, targets, il, tl, blank=0, reduction="mean", zero_infinity=False,
            index_dtype="int64", plain=False, rtol=None, atol=None):
        lp = rounded(lp, dtype)
        batched = lp.dim() == 3
        N = lp.shape[1] if batched else 1
        out_shape = (N,) if reduction == "none" and batched else ()
        go = rounded(upstream(out_shape, self.gen), dtype)
        out, grad = reference(lp, targets, il, tl, blank, reduction, zero_infinity, go, plain)
        options = {"blank": blank, "zero_infinity": zero_infinity}
        extra = {"ctc_grad": "true"} if plain else None
        self.n += 1
        name = "%03d_%s_%s_%s_%s%s" % (self.n, tag, dtype, index_dtype, reduction, "_plain" if plain else "")
        self.g.add_case(name, OP, dtype,
                        {"log_probs": lp, "targets": targets, "input_lengths": il, "target_lengths": tl},
                        out, grads={"log_probs": grad}, grad_output=go, reduction=reduction,
                        index_dtype=index_dtype, options=options, rtol=rtol, atol=atol, extra_attrs=extra)


def padded(seqs, S, C, gen):
    """[N, S] with junk (random classes) past each length: ignored by the op."""
    t = torch.randint(0, C, (len(seqs), S), generator=gen)
    for b, s in enumerate(seqs):
        t[b, :len(s)] = torch.as_tensor(s, dtype=torch.long)
    return t


def concatenated(seqs):
    parts = [torch.as_tensor(s, dtype=torch.long) for s in seqs]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def main(out_dir):
    gen = torch.Generator().manual_seed(20261122)
    fd_check_plain(gen)
    with golden_file(out_dir, "ctc.h5") as g:
        b = Builder(g, gen)

        def batch(T, C, tls, blank, ils=None, repeat=None):
            seqs = [labels(n, C, blank, gen).tolist() for n in tls]
            if repeat is not None:
                for i, s in repeat.items():
                    seqs[i] = s
            il = torch.tensor(ils if ils is not None else [T - (i % 3) for i in range(len(tls))])
            tl = torch.tensor([len(s) for s in seqs])
            return log_probs(T, len(tls), C, gen), seqs, il, tl

        # float64: every reduction x layout x index dtype x both gradient conventions.
        T, C = 9, 5
        lp, seqs, il, tl = batch(T, C, [3, 1, 4, 2, 0], 0, repeat={2: [1, 1, 2, 2]})
        S = int(tl.max())
        for reduction in ("none", "mean", "sum"):
            for layout in ("padded", "concat"):
                for index_dtype in ("int64", "int32"):
                    tg = padded(seqs, S + 1, C, gen) if layout == "padded" else concatenated(seqs)
                    for plain in (False, True):
                        b.add("basic_" + layout, "float64", lp, tg, il, tl, reduction=reduction,
                              index_dtype=index_dtype, plain=plain)

        # blank != 0 (in the middle and last), repeated labels, empty targets.
        for blank in (2, 4):
            lp, seqs, il, tl = batch(8, 5, [2, 3, 0, 3], blank, repeat={1: [1, 1, 1]})
            for reduction in ("none", "mean"):
                b.add("blank%d" % blank, "float64", lp, padded(seqs, 4, 5, gen), il, tl, blank=blank,
                      reduction=reduction)
                b.add("blank%d_concat" % blank, "float64", lp, concatenated(seqs), il, tl, blank=blank,
                      reduction=reduction, plain=True)
        lp, seqs, il, tl = batch(7, 3, [0, 0, 0], 0)
        for reduction in ("none", "mean", "sum"):
            b.add("all_empty_targets", "float64", lp, padded(seqs, 2, 3, gen), il, tl, reduction=reduction)
        lp, seqs, il, tl = batch(10, 4, [5, 4, 3], 0, ils=[10, 9, 10],
                                 repeat={0: [1, 1, 1, 1, 1], 1: [2, 2, 3, 3], 2: [3, 1, 3]})
        for reduction in ("none", "sum"):
            for plain in (False, True):
                b.add("repeats", "float64", lp, padded(seqs, 6, 4, gen), il, tl, reduction=reduction, plain=plain)

        # Infeasible: a target longer than the input allows (repeats need a
        # blank between them); +inf and NaN gradient, or 0 with zero_infinity.
        lp, seqs, il, tl = batch(6, 4, [2, 3, 4, 1], 0, ils=[6, 4, 3, 6], repeat={1: [2, 2, 2]})
        for zero_infinity in (False, True):
            for reduction in ("none", "mean", "sum"):
                for plain in (False, True):
                    b.add("infeasible_zi%d" % zero_infinity, "float64", lp, padded(seqs, 4, 4, gen), il, tl,
                          reduction=reduction, zero_infinity=zero_infinity, plain=plain)
                b.add("infeasible_concat_zi%d" % zero_infinity, "float64", lp, concatenated(seqs), il, tl,
                      reduction=reduction, zero_infinity=zero_infinity, index_dtype="int32")

        # Unbatched: log_probs [T, C], lengths rank 0, targets [L] or [1, S].
        lp1 = log_probs(7, 1, 4, gen, batched=False)
        s1 = labels(3, 4, 1, gen).tolist()
        for reduction in ("none", "mean", "sum"):
            b.add("unbatched_concat", "float64", lp1, torch.tensor(s1), torch.tensor(7), torch.tensor(3), blank=1,
                  reduction=reduction)
            b.add("unbatched_padded", "float64", lp1, padded([s1], 5, 4, gen), torch.tensor(6), torch.tensor(3),
                  blank=1, reduction=reduction, plain=reduction == "sum")

        # Odd, larger sizes: 13 sequences, states past one host chunk (W = 2*40+1 = 81).
        tls = [(7 * i) % 41 for i in range(13)]
        lp, seqs, il, tl = batch(45, 6, tls, 0, ils=[45 - (i % 4) for i in range(13)])
        b.add("large", "float64", lp, padded(seqs, 41, 6, gen), il, tl, reduction="none")
        b.add("large", "float64", lp, concatenated(seqs), il, tl, reduction="mean", index_dtype="int32", plain=True)

        # float32 and the 16-bit dtypes (computed in float by kloss). Gradients
        # are differences of O(1) terms from a log-space recursion whose
        # exponent carries ~T ulp of |log alpha|: absolute tolerances.
        lp, seqs, il, tl = batch(8, 5, [3, 0, 2, 4], 0, repeat={3: [1, 1, 2, 3]})
        lpi, seqsi, ili, tli = batch(6, 4, [2, 3], 0, ils=[6, 4], repeat={1: [2, 2, 2]})
        for dtype, rtol, atol in (("float32", 1e-4, 2e-5), ("float16", 6e-3, 3e-3), ("bfloat16", 4e-2, 2e-2)):
            for reduction in ("none", "mean", "sum"):
                b.add("small", dtype, lp, padded(seqs, 4, 5, gen), il, tl, reduction=reduction, rtol=rtol, atol=atol)
            b.add("small_concat", dtype, lp, concatenated(seqs), il, tl, reduction="mean", index_dtype="int32",
                  plain=True, rtol=rtol, atol=atol)
            b.add("blank3", dtype, lp, padded([[x if x != 3 else 4 for x in s] for s in seqs], 4, 5, gen), il, tl,
                  blank=3, reduction="sum", rtol=rtol, atol=atol)
            for zero_infinity in (False, True):
                b.add("infeasible_zi%d" % zero_infinity, dtype, lpi, padded(seqsi, 3, 4, gen), ili, tli,
                      reduction="none", zero_infinity=zero_infinity, rtol=rtol, atol=atol)
            b.add("unbatched", dtype, lp1, torch.tensor(s1), torch.tensor(7), torch.tensor(3), blank=1,
                  reduction="none", rtol=rtol, atol=atol)
    return g.path


if __name__ == "__main__":
    main(DEFAULT_OUT_DIR)
