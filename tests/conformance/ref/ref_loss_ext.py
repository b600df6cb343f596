"""NumPy references for the extra loss ops (see run_reference.py for the calling convention).

Written from the ops' definitions in Paddle's documentation, in float64, element by element
where a clamp or a branch is involved, independent of the kernels.
"""
import math

import numpy as np


def sigmoid_cross_entropy_with_logits(inputs, attrs):
    x = inputs["X"][0]
    label = inputs["Label"][0]
    ignore = attrs.get("ignore_index", -100)
    xd = x.astype(np.float64).ravel()
    ld = label.astype(np.float64).ravel()
    out = np.zeros_like(xd)
    kept = 0
    for i in range(xd.size):
        if ld[i] == ignore:
            continue
        kept += 1
        # log(1 + exp(x)) - x * label, written the stable way by hand.
        v = xd[i]
        softplus = max(v, 0.0) + math.log1p(math.exp(-abs(v)))
        out[i] = softplus - v * ld[i]
    if attrs.get("normalize", False):
        out /= max(kept, 1e-5)
    return {"Out": out.reshape(x.shape).astype(x.dtype)}


def bce_loss(inputs, attrs):
    x = inputs["X"][0].astype(np.float64)
    label = inputs["Label"][0].astype(np.float64)
    with np.errstate(divide="ignore"):
        lx = np.maximum(np.log(x), -100.0)
        l1x = np.maximum(np.log(1.0 - x), -100.0)
    out = -(label * lx + (1.0 - label) * l1x)
    return {"Out": out.astype(inputs["X"][0].dtype)}


def log_loss(inputs, attrs):
    p = inputs["Predicted"][0].astype(np.float64)
    label = inputs["Labels"][0].astype(np.float64)
    eps = attrs.get("epsilon", 1e-4)
    loss = -label * np.log(p + eps) - (1.0 - label) * np.log(1.0 - p + eps)
    return {"Loss": loss.astype(inputs["Predicted"][0].dtype)}


def huber_loss(inputs, attrs):
    x = inputs["X"][0]
    r = inputs["Y"][0].astype(np.float64) - x.astype(np.float64)
    delta = attrs.get("delta", 1.0)
    out = np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))
    return {"Out": out.astype(x.dtype), "Residual": r.astype(x.dtype)}


def smooth_l1_loss(inputs, attrs):
    x = inputs["X"][0]
    d = x.astype(np.float64) - inputs["Y"][0].astype(np.float64)
    if "InsideWeight" in inputs:
        d = d * inputs["InsideWeight"][0]
    s2 = attrs.get("sigma", 1.0) ** 2
    v = np.where(np.abs(d) < 1.0 / s2, 0.5 * s2 * d * d, np.abs(d) - 0.5 / s2)
    if "OutsideWeight" in inputs:
        v = v * inputs["OutsideWeight"][0]
    out = v.reshape(x.shape[0], -1).sum(axis=1, keepdims=True)
    return {"Out": out.astype(x.dtype), "Diff": d.astype(x.dtype)}


def kldiv_loss(inputs, attrs):
    x = inputs["X"][0]
    t = inputs["Target"][0].astype(np.float64)
    safe = np.where(t > 0, t, 1.0)
    l = np.where(t > 0, t * (np.log(safe) - x.astype(np.float64)), 0.0)
    red = attrs.get("reduction", "mean")
    if red == "none":
        out = l
    elif red == "sum":
        out = np.array([l.sum()])
    elif red == "batchmean":
        out = np.array([l.sum() / x.shape[0]])
    else:
        out = np.array([l.mean()])
    return {"Loss": out.astype(x.dtype)}


def label_smooth(inputs, attrs):
    x = inputs["X"][0]
    eps = attrs.get("epsilon", 0.0)
    k = x.shape[-1]
    if "PriorDist" in inputs:
        prior = inputs["PriorDist"][0].astype(np.float64).reshape(k)
    else:
        prior = np.full(k, 1.0 / k)
    out = (1.0 - eps) * x.astype(np.float64) + eps * prior
    return {"Out": out.astype(x.dtype)}


def margin_rank_loss(inputs, attrs):
    x1, x2, label = (inputs[k][0].astype(np.float64) for k in ("X1", "X2", "Label"))
    out = np.maximum(0.0, -label * (x1 - x2) + attrs.get("margin", 0.0))
    dtype = inputs["X1"][0].dtype
    return {"Out": out.astype(dtype), "Activated": (out > 0).astype(dtype)}


REFERENCES = {
    "margin_rank_loss": margin_rank_loss,
    "sigmoid_cross_entropy_with_logits": sigmoid_cross_entropy_with_logits,
    "bce_loss": bce_loss,
    "log_loss": log_loss,
    "huber_loss": huber_loss,
    "smooth_l1_loss": smooth_l1_loss,
    "kldiv_loss": kldiv_loss,
    "label_smooth": label_smooth,
}
