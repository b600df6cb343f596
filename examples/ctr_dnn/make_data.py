#!/usr/bin/python3
"""Writes a Criteo-shaped, learnable click-through dataset as MultiSlot text files.

Each line is one impression, in the slot order of ctr_dnn.fleet's data.slots:
  dense_input  13 float features (Criteo's I1..I13, log-scaled counts)
  C1 .. C26    26 categorical slots of 0 to 3 ids each (a different count on every line),
               ids drawn Zipf-like from a vocabulary of `--vocab` values per slot, as hashed
               Criteo features are
  label        0 or 1, drawn from a fixed logistic teacher over the dense features and a
               weight per (slot, id), so a model can learn it and its AUC can rise well above 0.5

OUT_DIR/eval/part-000.txt holds --eval-lines more lines of the same teacher, for [eval]:
impressions the model never trains on (none with --eval-lines 0).

Usage: make_data.py OUT_DIR [--files 4] [--lines 2000] [--vocab 10000] [--seed 1]
                    [--eval-lines 1000]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np

DENSE = 13
SLOTS = 26


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--lines", type=int, default=2000, help="lines per file")
    ap.add_argument("--vocab", type=int, default=10000, help="ids per slot, below 2^31")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-lines", type=int, default=1000, help="lines of eval/part-000.txt")
    a = ap.parse_args()
    if a.files < 1 or a.lines < 1 or not 1 <= a.vocab < 2**31 or a.eval_lines < 0:
        ap.error("--files, --lines and --vocab must be positive (vocab below 2^31), "
                 "--eval-lines not negative")
    rng = np.random.default_rng(a.seed)
    # The teacher: a dense weight vector and a weight for each id of each slot, drawn once. Only
    # the most frequent ids carry much signal, as in real click logs.
    dense_w = rng.normal(0.0, 0.6, DENSE)
    id_w = rng.normal(0.0, 1.0, (SLOTS, min(a.vocab, 4096)))
    bias = -1.0  # about a quarter of the impressions are clicks
    os.makedirs(a.out_dir, exist_ok=True)
    total = 0
    clicks = 0

    def impression():
        nonlocal total, clicks
        dense = np.log1p(rng.exponential(3.0, DENSE)) / 3.0
        logit = bias + float(dense @ dense_w)
        parts = [str(DENSE)] + [f"{v:.6f}" for v in dense]
        for s in range(SLOTS):
            count = int(rng.choice(4, p=[0.05, 0.55, 0.3, 0.1]))
            # Zipf-like ids: rank r has weight ~ 1/r, folded into the vocabulary.
            ids = (rng.zipf(1.3, count) - 1) % a.vocab
            parts.append(str(count))
            for i in ids:
                parts.append(str(int(i)))
                if i < id_w.shape[1]:
                    logit += id_w[s, i] / 2.0
        p = 1.0 / (1.0 + np.exp(-logit))
        label = int(rng.random() < p)
        clicks += label
        total += 1
        parts += ["1", str(label)]
        return " ".join(parts)

    def write(path, lines):
        tmp = path + ".tmp"
        with open(tmp, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(tmp, path)  # never a half-written file under the final name

    for f in range(a.files):
        write(os.path.join(a.out_dir, f"part-{f:03d}.txt"), [impression() for _ in range(a.lines)])
    if a.eval_lines > 0:
        os.makedirs(os.path.join(a.out_dir, "eval"), exist_ok=True)
        write(os.path.join(a.out_dir, "eval", "part-000.txt"),
              [impression() for _ in range(a.eval_lines)])
    print(f"wrote {total} lines in {a.files} files{' and eval/' if a.eval_lines else ''} to "
          f"{a.out_dir} ({clicks / total:.1%} clicks)")


if __name__ == "__main__":
    main()
