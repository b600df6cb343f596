#!/usr/bin/python3
"""Writes a learnable synthetic image-classification dataset as .npy files.

  image.npy  float32 [N, 3, 32, 32]  smoothed Gaussian noise (NCHW), each channel with a
                                     contrast of its own, scaled to about unit variance
  label.npy  int64   [N, 1]          the class, 0 .. --classes - 1

The label comes from a fixed random teacher, a small convolutional network: 3x3 conv (3 -> 8)
and relu, 3x3 conv (8 -> 8, stride 2) and relu, global average pooling, a linear layer to the
classes and argmax. Its logits are standardised per class over the dataset first, so the
classes come out about equally often. The teacher is deterministic and, like ResNet, sees the
image through local filters and a global pool, so a ResNet can learn it and take the loss far
below log(classes).

Usage: make_data.py OUT_DIR [--samples 4096] [--classes 10] [--seed 1]
The same arguments always write the same bytes.
"""
import argparse
import os

import numpy as np

SIZE = 32
CHANNELS = 3
TEACHER_WIDTH = 8


def smooth(x, passes=2):
    """Blurs the last two axes with a 3x3 box filter `passes` times (wrapping at the edges)."""
    for _ in range(passes):
        x = sum(np.roll(np.roll(x, dy, axis=-2), dx, axis=-1)
                for dy in (-1, 0, 1) for dx in (-1, 0, 1)) / 9.0
    return x


def conv3x3(x, w, stride=1):
    """x [N, C, H, W], w [K, C, 3, 3], zero padding 1 -> [N, K, H / stride, W / stride]."""
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]  # [N, C, H', W', 3, 3]
    return np.einsum("nchwij,kcij->nkhw", windows, w, optimize=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.samples < 1 or a.classes < 2:
        ap.error("--samples must be positive and --classes at least 2")
    rng = np.random.default_rng(a.seed)

    # The teacher, drawn once (He-scaled filters).
    w1 = rng.normal(0.0, np.sqrt(2.0 / (CHANNELS * 9)), (TEACHER_WIDTH, CHANNELS, 3, 3))
    w2 = rng.normal(0.0, np.sqrt(2.0 / (TEACHER_WIDTH * 9)), (TEACHER_WIDTH, TEACHER_WIDTH, 3, 3))
    w_out = rng.normal(0.0, 1.0, (TEACHER_WIDTH, a.classes))

    noise = rng.normal(0.0, 1.0, (a.samples, CHANNELS, SIZE, SIZE))
    images = smooth(noise)
    images /= images.std()
    contrast = np.exp(rng.normal(0.0, 0.5, (a.samples, CHANNELS, 1, 1)))
    images = (images * contrast / np.sqrt(np.mean(contrast ** 2))).astype(np.float32)

    features = np.zeros((a.samples, TEACHER_WIDTH))
    for start in range(0, a.samples, 512):  # in chunks, to bound the memory of the windows
        x = images[start:start + 512].astype(np.float64)
        h = np.maximum(conv3x3(x, w1), 0.0)
        h = np.maximum(conv3x3(h, w2, stride=2), 0.0)
        features[start:start + 512] = h.mean(axis=(2, 3))
    logits = features @ w_out
    logits = (logits - logits.mean(axis=0)) / logits.std(axis=0)
    label = logits.argmax(axis=1).astype(np.int64).reshape(-1, 1)

    os.makedirs(a.out_dir, exist_ok=True)
    for name, array in (("image", images), ("label", label)):
        path = os.path.join(a.out_dir, f"{name}.npy")
        tmp = path + ".tmp.npy"
        np.save(tmp, array)
        os.replace(tmp, path)  # never a half-written file under the final name
    counts = np.bincount(label[:, 0], minlength=a.classes)
    print(f"wrote {a.samples} images of {CHANNELS}x{SIZE}x{SIZE} to {a.out_dir} "
          f"(class counts {counts.tolist()})")


if __name__ == "__main__":
    main()
