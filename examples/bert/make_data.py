#!/usr/bin/python3
"""Writes a learnable sentence-classification dataset for bert.fleet as .npy files.

Each sample is a padded token sequence of --seq-len ids: [CLS] (id 1), then 3 to seq-len - 1
word ids drawn uniformly from [2, --vocab), then padding (id 0). The files, one per data var
of bert.fleet (first dimension = samples):
  src_ids.npy     int64   [N, seq_len]     the tokens
  sent_ids.npy    int64   [N, seq_len]     segment ids: 0 for [CLS] and the first half of the
                                           words, 1 for the second half, 0 on padding
  input_mask.npy  float32 [N, seq_len, 1]  1 on real tokens, 0 on padding
  label.npy       int64   [N, 1]           the class a fixed random teacher gives the sample

The teacher draws, once, a table of random vectors for the words and one random linear map to
--classes scores; a sample's label is the argmax of the scores of the mean vector of its words
(padding excluded), so the labels are a deterministic function of the tokens that an encoder
which pools over the unmasked positions can learn down to a loss near 0.

Usage: make_data.py OUT_DIR [--samples 4096] [--seq-len 16] [--vocab 100] [--classes 4]
                    [--seed 1]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np

CLS, PAD = 1, 0
TEACHER_DIM = 8


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=100)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.samples < 1 or a.seq_len < 4 or a.vocab < 3 or a.classes < 2:
        ap.error("need --samples >= 1, --seq-len >= 4, --vocab >= 3, --classes >= 2")
    rng = np.random.default_rng(a.seed)
    word_vec = rng.normal(0.0, 1.0, (a.vocab, TEACHER_DIM))
    word_vec -= word_vec[2:].mean(axis=0)  # centred, so that no class wins every long sample
    proj = rng.normal(0.0, 1.0, (TEACHER_DIM, a.classes))

    n, length = a.samples, a.seq_len
    src_ids = np.full((n, length), PAD, dtype=np.int64)
    sent_ids = np.zeros((n, length), dtype=np.int64)
    input_mask = np.zeros((n, length, 1), dtype=np.float32)
    label = np.zeros((n, 1), dtype=np.int64)
    for i in range(n):
        words = int(rng.integers(3, length))  # 3 .. seq_len - 1 words after [CLS]
        ids = rng.integers(2, a.vocab, words)
        src_ids[i, 0] = CLS
        src_ids[i, 1:words + 1] = ids
        sent_ids[i, (words + 1) // 2 + 1:words + 1] = 1
        input_mask[i, :words + 1, 0] = 1.0
        label[i, 0] = int(np.argmax(word_vec[ids].mean(axis=0) @ proj))

    os.makedirs(a.out_dir, exist_ok=True)
    for name, arr in (("src_ids", src_ids), ("sent_ids", sent_ids),
                      ("input_mask", input_mask), ("label", label)):
        path = os.path.join(a.out_dir, name + ".npy")
        tmp = path + ".tmp"
        with open(tmp, "wb") as out:
            np.save(out, arr)
        os.replace(tmp, path)  # never a half-written file under the final name
    counts = np.bincount(label[:, 0], minlength=a.classes)
    print(f"wrote {n} samples of {length} tokens to {a.out_dir} "
          f"(classes: {' '.join(str(c) for c in counts)})")


if __name__ == "__main__":
    main()
