#!/usr/bin/python3
"""Writes a learnable click-through dataset for DeepFM as .npy files.

Each sample has --fields categorical fields of one id each and --dense dense features. Field f
owns the ids [f * V, (f + 1) * V) of one shared id space (V = --field-vocab), so deepfm.fleet
looks every field up in one table of --fields * V rows; within a field, ids are drawn Zipf-like.
Dense features are standard normal.

The label comes from a fixed random teacher drawn once from --seed, an FM with a linear part:
  logit = bias + sum_f w[id_f] + sum_{f < g} <v[id_f], v[id_g]> + u . dense
  label ~ Bernoulli(sigmoid(logit))
so a DeepFM can learn it, its loss has a floor (the teacher's own log loss, printed), and its
AUC can rise well above 0.5.

Files, one sample per row, in the order of deepfm.fleet's data vars:
  C1.npy .. C<F>.npy  int64 [N, 1]
  dense_input.npy     float32 [N, DENSE]
  label.npy           int64 [N, 1] (0 or 1)

Usage: make_data.py OUT_DIR [--samples 4096] [--fields 8] [--field-vocab 32] [--dense 4]
                    [--seed 1]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np

TEACHER_DIM = 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--fields", type=int, default=8, help="deepfm.fleet's SPARSE_FIELDS")
    ap.add_argument("--field-vocab", type=int, default=32,
                    help="ids per field; fields * field-vocab is SPARSE_FEATURE_NUMBER")
    ap.add_argument("--dense", type=int, default=4, help="deepfm.fleet's DENSE_DIM")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if min(a.samples, a.fields, a.field_vocab, a.dense) < 1:
        ap.error("--samples, --fields, --field-vocab and --dense must be positive")
    rng = np.random.default_rng(a.seed)
    features = a.fields * a.field_vocab

    # The teacher.
    w = rng.normal(0.0, 0.8, features)
    v = rng.normal(0.0, 0.45, (features, TEACHER_DIM))
    u = rng.normal(0.0, 0.6, a.dense)
    popularity = 1.0 / np.arange(1, a.field_vocab + 1) ** 0.7
    popularity /= popularity.sum()

    local = np.stack([rng.choice(a.field_vocab, size=a.samples, p=popularity)
                      for _ in range(a.fields)], axis=1)
    ids = local + np.arange(a.fields) * a.field_vocab          # [N, F] global ids
    dense = rng.normal(0.0, 1.0, (a.samples, a.dense))

    emb = v[ids]                                               # [N, F, TEACHER_DIM]
    pairwise = 0.5 * (np.square(emb.sum(axis=1)) - np.square(emb).sum(axis=1)).sum(axis=1)
    logit = w[ids].sum(axis=1) + pairwise + dense @ u
    logit -= np.median(logit)                                  # about half the samples click
    p = 1.0 / (1.0 + np.exp(-logit))
    label = (rng.random(a.samples) < p).astype(np.int64)

    os.makedirs(a.out_dir, exist_ok=True)
    arrays = {f"C{f + 1}": ids[:, f:f + 1] for f in range(a.fields)}
    arrays["dense_input"] = dense.astype(np.float32)
    arrays["label"] = label.reshape(-1, 1)
    for name, array in arrays.items():
        path = os.path.join(a.out_dir, name + ".npy")
        tmp = path + ".tmp.npy"
        np.save(tmp, array)
        os.replace(tmp, path)  # never a half-written file under the final name
    eps = 1e-12
    floor = -np.mean(label * np.log(p + eps) + (1 - label) * np.log(1 - p + eps))
    print(f"wrote {a.samples} samples to {a.out_dir}: {a.fields} fields of {a.field_vocab} ids, "
          f"{a.dense} dense features, {label.mean():.1%} clicks, teacher log loss {floor:.4f} "
          f"(logit std {logit.std():.2f})")


if __name__ == "__main__":
    main()
