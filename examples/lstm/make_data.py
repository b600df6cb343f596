#!/usr/bin/python3
"""Writes a learnable synthetic text-classification dataset as .npy files.

Every sample is a sentence of 8 to --seq-len token ids in [1, --vocab), padded in front with id 0
to exactly --seq-len ids (Keras' padding="pre", so the last step of every row is a real token):

  ids.npy    int64 [N, seq_len]  the padded token ids
  label.npy  int64 [N, 1]        the class, 0 .. --classes - 1

The label comes from a fixed random teacher: a tanh recurrent network (its own embedding table,
input and recurrent weights) read over the real tokens only, then a linear readout and argmax.
The readout's logits are standardised per class over the dataset first, so the classes come
out about equally often. The teacher is deterministic, so a model that learns it can take the
loss far below log(classes).

Usage: make_data.py OUT_DIR [--samples 8192] [--seq-len 32] [--vocab 200] [--classes 4]
                    [--seed 1]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np

TEACHER_EMB = 16
TEACHER_HIDDEN = 16
MIN_LEN = 8


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=200, help="ids per table, id 0 is padding")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.samples < 1 or a.seq_len < MIN_LEN or a.vocab < 2 or a.classes < 2:
        ap.error(f"--samples must be positive, --seq-len at least {MIN_LEN}, --vocab and "
                 "--classes at least 2")
    rng = np.random.default_rng(a.seed)

    # The teacher, drawn once. The recurrent matrix is a scaled orthogonal one, so the state
    # neither dies out nor saturates over a sentence and early tokens still matter.
    emb = rng.normal(0.0, 1.0, (a.vocab, TEACHER_EMB))
    w_x = rng.normal(0.0, 1.0 / np.sqrt(TEACHER_EMB), (TEACHER_EMB, TEACHER_HIDDEN))
    q, _ = np.linalg.qr(rng.normal(0.0, 1.0, (TEACHER_HIDDEN, TEACHER_HIDDEN)))
    w_h = 0.9 * q
    w_o = rng.normal(0.0, 1.0, (TEACHER_HIDDEN, a.classes))

    lengths = rng.integers(MIN_LEN, a.seq_len + 1, a.samples)
    ids = np.zeros((a.samples, a.seq_len), dtype=np.int64)
    h = np.zeros((a.samples, TEACHER_HIDDEN))
    for t in range(a.seq_len):
        # Row r holds its tokens in the last lengths[r] columns.
        real = t >= a.seq_len - lengths
        tok = rng.integers(1, a.vocab, a.samples)
        ids[real, t] = tok[real]
        step = np.tanh(emb[tok] @ w_x + h @ w_h)
        h = np.where(real[:, None], step, h)
    logits = h @ w_o
    logits = (logits - logits.mean(axis=0)) / logits.std(axis=0)
    label = logits.argmax(axis=1).astype(np.int64).reshape(-1, 1)

    os.makedirs(a.out_dir, exist_ok=True)
    for name, array in (("ids", ids), ("label", label)):
        path = os.path.join(a.out_dir, f"{name}.npy")
        tmp = path + ".tmp.npy"
        np.save(tmp, array)
        os.replace(tmp, path)  # never a half-written file under the final name
    counts = np.bincount(label[:, 0], minlength=a.classes)
    print(f"wrote {a.samples} sentences of {a.seq_len} ids to {a.out_dir} "
          f"(mean length {lengths.mean():.1f}, class counts {counts.tolist()})")


if __name__ == "__main__":
    main()
