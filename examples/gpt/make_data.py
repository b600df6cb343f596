#!/usr/bin/python3
"""Writes a learnable language-modelling dataset for gpt.fleet as one .npy file.

tokens.npy holds int64 [N, seq_len + 1]: each row is a walk of a fixed random Markov chain over
--vocab token ids. The chain is drawn once: every token has --successors possible next tokens,
with probabilities drawn from a sharp Dirichlet, so the next token is far from uniform (the
script prints the chain's entropy rate, the cross-entropy a perfect model reaches, against
log(vocab) for a uniform guess). The first token of a row is uniform. gpt.fleet reads the first
seq_len tokens of a row as its input and the last seq_len as the targets.

Usage: make_data.py OUT_DIR [--samples 4096] [--seq-len 16] [--vocab 64] [--successors 4]
                    [--seed 1]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--successors", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.samples < 1 or a.seq_len < 1 or a.vocab < 2 or not 1 <= a.successors <= a.vocab:
        ap.error("need --samples, --seq-len >= 1, --vocab >= 2, 1 <= --successors <= --vocab")
    rng = np.random.default_rng(a.seed)
    # The teacher: a transition table whose row t gives P(next | t), nonzero on a few successors.
    trans = np.zeros((a.vocab, a.vocab))
    for t in range(a.vocab):
        nxt = rng.choice(a.vocab, a.successors, replace=False)
        trans[t, nxt] = rng.dirichlet(np.full(a.successors, 0.5))
    cum = np.cumsum(trans, axis=1)

    n = a.samples
    tokens = np.zeros((n, a.seq_len + 1), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, a.vocab, n)
    for j in range(1, a.seq_len + 1):
        u = rng.random(n)[:, None]
        tokens[:, j] = np.minimum((u > cum[tokens[:, j - 1]]).sum(axis=1), a.vocab - 1)

    # The entropy rate under the chain's stationary distribution (power iteration).
    pi = np.full(a.vocab, 1.0 / a.vocab)
    for _ in range(1000):
        pi = pi @ trans
    with np.errstate(divide="ignore", invalid="ignore"):
        row_h = -np.nansum(np.where(trans > 0, trans * np.log(trans), 0.0), axis=1)
    entropy = float(pi @ row_h)

    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "tokens.npy")
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        np.save(out, tokens)
    os.replace(tmp, path)  # never a half-written file under the final name
    print(f"wrote {n} sequences of {a.seq_len + 1} tokens to {path} (entropy rate "
          f"{entropy:.3f} nats per token, log(vocab) = {np.log(a.vocab):.3f})")


if __name__ == "__main__":
    main()
