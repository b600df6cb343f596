"""NumPy references for hierarchical_sigmoid and nce (see run_reference.py).

Written from the ops' definitions in Paddle (the default tree's codes of MatrixBitCode, the nce
cost and its samplers), row by row in float64 with Python integers for the tree and the
random stream, independent of the kernels.
"""
import math

import numpy as np

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def _finalize(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _mix(z):
    return _finalize((z + GAMMA) & MASK)


def _unit(key, i):
    # 53 bits of the keyed SplitMix64 draw i, scaled to [0, 1).
    return (_mix(key ^ _mix(i)) >> 11) * 2.0 ** -53


def _softrelu(v):
    return math.log1p(math.exp(v))


def hierarchical_sigmoid(inputs, attrs):
    x = inputs["X"][0].astype(np.float64)
    w = inputs["W"][0].astype(np.float64)
    label = inputs["Label"][0].reshape(-1)
    bias = inputs["Bias"][0].astype(np.float64).reshape(-1) if inputs.get("Bias") else None
    num_classes = attrs.get("num_classes", 2)
    width = int(num_classes - 1).bit_length()
    n = x.shape[0]
    out = np.zeros((n, 1))
    pre_out = np.zeros((n, width))
    for i in range(n):
        leaf = int(label[i]) + num_classes
        length = leaf.bit_length() - 1
        pre = [0.0] * width
        picked = 0.0
        for j in range(length):
            node = (leaf >> (j + 1)) - 1
            v = float(np.dot(x[i], w[node])) + (bias[node] if bias is not None else 0.0)
            v = min(max(v, -40.0), 40.0)
            pre[j] = v
            if (leaf >> j) & 1:
                picked += v
        soft = [_softrelu(v) for v in pre]
        pre_out[i] = soft
        out[i, 0] = sum(soft) - picked
    dt = inputs["X"][0].dtype
    return {"Out": out.astype(dt), "PreOut": pre_out.astype(dt)}


def _nce_negatives(attrs, n, num_neg, total):
    custom = list(attrs.get("custom_neg_classes", []))
    if custom:
        return [custom for _ in range(n)]
    seed = attrs.get("seed", 0)
    assert seed != 0, "the reference reproduces only a fixed seed's draws"
    key = _mix((seed & MASK) ^ 0x6E6365)
    sampler = attrs.get("sampler", 0)
    rows = []
    for i in range(n):
        row = []
        for k in range(num_neg):
            u = _unit(key, i * num_neg + k)
            if sampler == 1:
                row.append((int(math.exp(u * math.log(total))) - 1) % (total - 1))
            else:
                row.append(min(int(u * total), total - 1))
        rows.append(row)
    return rows


def nce(inputs, attrs):
    x = inputs["Input"][0].astype(np.float64)
    label = inputs["Label"][0]
    w = inputs["Weight"][0].astype(np.float64)
    bias = inputs["Bias"][0].astype(np.float64).reshape(-1) if inputs.get("Bias") else None
    sw = inputs["SampleWeight"][0].reshape(-1) if inputs.get("SampleWeight") else None
    total = attrs["num_total_classes"]
    num_neg = attrs.get("num_neg_samples", 10)
    sampler = attrs.get("sampler", 0)
    n, num_true = label.shape
    negatives = _nce_negatives(attrs, n, num_neg, total)
    cols = num_true + num_neg
    labels = np.zeros((n, cols), dtype=np.int64)
    logits = np.zeros((n, cols))
    cost = np.zeros((n, 1))
    for i in range(n):
        row = [int(v) for v in label[i]] + [int(v) for v in negatives[i]]
        labels[i] = row
        c = 0.0
        for k, cls in enumerate(row):
            z = float(np.dot(x[i], w[cls])) + (bias[cls] if bias is not None else 0.0)
            o = 1.0 / (1.0 + math.exp(-z))
            logits[i, k] = o
            if sampler == 1:
                q = math.log((cls + 2.0) / (cls + 1.0)) / math.log(total)
            else:
                q = 1.0 / total
            b = q * num_neg
            c += -math.log(o / (o + b)) if k < num_true else -math.log(b / (o + b))
        cost[i, 0] = c * (float(sw[i]) if sw is not None else 1.0)
    dt = inputs["Input"][0].dtype
    return {"Cost": cost.astype(dt), "SampleLogits": logits.astype(dt), "SampleLabels": labels}


REFERENCES = {
    "hierarchical_sigmoid": hierarchical_sigmoid,
    "nce": nce,
}
