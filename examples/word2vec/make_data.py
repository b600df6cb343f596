#!/usr/bin/python3
"""Writes a learnable skip-gram dataset (center word, context word, negatives) as .npy files.

The teacher, drawn once from --seed: every word of a --vocab word vocabulary belongs to one of
--topics topics, and centre words are drawn Zipf-like over the vocabulary. A context word comes
from the centre word's own topic with probability --in-topic (uniformly among the topic's
words) and from the whole vocabulary otherwise, so co-occurrence has low entropy and a model
whose embeddings find the topics can score the true context above random words. Negatives are
drawn uniformly from the vocabulary, as word2vec's sampler would without the unigram table.
The loss has a floor, printed: that of the best possible scores under this teacher.

Files, one sample per row, in the order of word2vec.fleet's data vars:
  input_word.npy  int64 [N, 1]    the centre word
  true_label.npy  int64 [N, 1]    the context word
  neg_label.npy   int64 [N, NEG]  the negative words

Usage: make_data.py OUT_DIR [--samples 4096] [--vocab 256] [--topics 16] [--neg 5]
                    [--in-topic 0.9] [--seed 1]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=256, help="words; word2vec.fleet's DICT_SIZE")
    ap.add_argument("--topics", type=int, default=16)
    ap.add_argument("--neg", type=int, default=5, help="negatives per sample; NEG_NUM")
    ap.add_argument("--in-topic", type=float, default=0.9,
                    help="probability that the context word shares the centre word's topic")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.samples < 1 or a.neg < 1 or not 1 <= a.topics <= a.vocab or not 0 <= a.in_topic <= 1:
        ap.error("--samples and --neg must be positive, 1 <= --topics <= --vocab, "
                 "0 <= --in-topic <= 1")
    rng = np.random.default_rng(a.seed)

    # The teacher: a random topic per word (every topic non-empty) and Zipf-like word frequencies.
    topic = rng.permutation(np.arange(a.vocab) % a.topics)
    members = [np.flatnonzero(topic == t) for t in range(a.topics)]
    freq = 1.0 / np.arange(1, a.vocab + 1) ** 0.8
    freq = rng.permutation(freq / freq.sum())

    center = rng.choice(a.vocab, size=a.samples, p=freq)
    in_topic = rng.random(a.samples) < a.in_topic
    context = rng.integers(0, a.vocab, size=a.samples)
    for i in np.flatnonzero(in_topic):
        group = members[topic[center[i]]]
        context[i] = group[rng.integers(0, len(group))]
    negatives = rng.integers(0, a.vocab, size=(a.samples, a.neg))

    os.makedirs(a.out_dir, exist_ok=True)
    arrays = {
        "input_word": center.reshape(-1, 1),
        "true_label": context.reshape(-1, 1),
        "neg_label": negatives,
    }
    for name, array in arrays.items():
        path = os.path.join(a.out_dir, name + ".npy")
        tmp = path + ".tmp.npy"
        np.save(tmp, array.astype(np.int64))
        os.replace(tmp, path)  # never a half-written file under the final name
    # The loss floor: the best score of a pair (c, o) puts sigmoid(score) at
    # P(o | c) / (P(o | c) + neg * P_noise(o)); its expected loss per sample is the floor.
    same = topic[:, None] == topic[None, :]
    sizes = np.array([len(m) for m in members])[topic]
    p_ctx = a.in_topic * same / sizes[:, None] + (1.0 - a.in_topic) / a.vocab
    best = p_ctx / (p_ctx + a.neg / a.vocab)
    floor = float(freq @ (-(p_ctx * np.log(best)).sum(axis=1)
                          - a.neg / a.vocab * np.log(1.0 - best).sum(axis=1)))
    neg_in_topic = float(np.mean(topic[negatives] == topic[center][:, None]))
    print(f"wrote {a.samples} samples to {a.out_dir}: vocab {a.vocab}, {a.topics} topics, "
          f"{a.neg} negatives ({in_topic.mean():.1%} of contexts and {neg_in_topic:.1%} of "
          f"negatives in the centre word's topic), loss floor {floor:.4f}")


if __name__ == "__main__":
    main()
