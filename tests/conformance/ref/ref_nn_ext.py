"""NumPy references for the nn extension ops: adaptive pool2d, depthwise_conv2d, group_norm,
instance_norm, bilinear_interp_v2 and nearest_interp_v2. Written from Paddle's documented definitions, one output position at a time,
independently of the kernels' index plans.
"""
import numpy as np


def _adaptive_bounds(o, size, out):
    start = (o * size) // out
    end = -((-(o + 1) * size) // out)  # ceil((o + 1) * size / out)
    return start, end


def pool2d_adaptive(inputs, attrs):
    """pool2d with adaptive=True: ksize is the output size; global_pooling resets it to H, W."""
    x = inputs["X"][0]
    n, c, h, w = x.shape
    oh, ow = (h, w) if attrs.get("global_pooling", False) else attrs["ksize"]
    is_max = attrs.get("pooling_type", "max") == "max"
    out = np.zeros((n, c, oh, ow), dtype=np.float64)
    for i in range(oh):
        hs, he = _adaptive_bounds(i, h, oh)
        for j in range(ow):
            ws, we = _adaptive_bounds(j, w, ow)
            win = x[:, :, hs:he, ws:we].astype(np.float64)
            out[:, :, i, j] = win.max(axis=(2, 3)) if is_max else win.mean(axis=(2, 3))
    return {"Out": out.astype(x.dtype)}


def depthwise_conv2d(inputs, attrs):
    """Each output channel oc reads input channel oc // (O / C) only (groups == C)."""
    x = inputs["Input"][0].astype(np.float64)
    f = inputs["Filter"][0].astype(np.float64)
    n, c, h, w = x.shape
    o, _, kh, kw = f.shape
    s = attrs.get("strides", [1, 1])
    p = attrs.get("paddings", [0, 0])
    d = attrs.get("dilations", [1, 1])
    oh = (h + 2 * p[0] - (d[0] * (kh - 1) + 1)) // s[0] + 1
    ow = (w + 2 * p[1] - (d[1] * (kw - 1) + 1)) // s[1] + 1
    out = np.zeros((n, o, oh, ow))
    mult = o // c
    for oc in range(o):
        ic = oc // mult
        for i in range(oh):
            for j in range(ow):
                acc = np.zeros(n)
                for a in range(kh):
                    for b in range(kw):
                        r = i * s[0] - p[0] + a * d[0]
                        q = j * s[1] - p[1] + b * d[1]
                        if 0 <= r < h and 0 <= q < w:
                            acc += x[:, ic, r, q] * f[oc, 0, a, b]
                out[:, oc, i, j] = acc
    return {"Output": out.astype(inputs["Input"][0].dtype)}


def _affine(y, inputs, c):
    shape = (1, c) + (1,) * (y.ndim - 2)
    if inputs.get("Scale"):
        y = y * inputs["Scale"][0].astype(np.float64).reshape(shape)
    if inputs.get("Bias"):
        y = y + inputs["Bias"][0].astype(np.float64).reshape(shape)
    return y


def group_norm(inputs, attrs):
    x = inputs["X"][0]
    n, c = x.shape[:2]
    groups = attrs["groups"]
    eps = attrs.get("epsilon", 1e-5)
    xg = x.astype(np.float64).reshape(n, groups, -1)
    mean = xg.mean(axis=2)
    var = ((xg - mean[:, :, None]) ** 2).mean(axis=2)
    y = ((xg - mean[:, :, None]) / np.sqrt(var[:, :, None] + eps)).reshape(x.shape)
    y = _affine(y, inputs, c)
    return {"Y": y.astype(x.dtype), "Mean": mean.astype(x.dtype),
            "Variance": var.astype(x.dtype)}


def instance_norm(inputs, attrs):
    """SavedVariance holds 1 / sqrt(var + epsilon), as in Paddle."""
    x = inputs["X"][0]
    n, c = x.shape[:2]
    eps = attrs.get("epsilon", 1e-5)
    xs = x.astype(np.float64).reshape(n, c, -1)
    mean = xs.mean(axis=2)
    var = ((xs - mean[:, :, None]) ** 2).mean(axis=2)
    inv = 1.0 / np.sqrt(var + eps)
    y = ((xs - mean[:, :, None]) * inv[:, :, None]).reshape(x.shape)
    y = _affine(y, inputs, c)
    return {"Y": y.astype(x.dtype), "SavedMean": mean.reshape(-1).astype(x.dtype),
            "SavedVariance": inv.reshape(-1).astype(x.dtype)}


def _interp_setup(x, attrs):
    """Output size and per-dim ratios of Paddle's interp_v2 ops (coordinates in double)."""
    n, c, h, w = x.shape
    scale = list(attrs.get("scale", []))
    scaled = len(scale) == 2 and scale[0] > 0 and scale[1] > 0
    if scaled:
        out = [int(h * scale[0]), int(w * scale[1])]
    else:
        out = [attrs["out_h"], attrs["out_w"]]
    corners = attrs.get("align_corners", True)
    ratios = []
    for i, size in enumerate((h, w)):
        if out[i] <= 1:
            ratios.append(0.0)
        elif corners:
            ratios.append((size - 1) / (out[i] - 1))
        elif scaled:
            ratios.append(1.0 / scale[i])
        else:
            ratios.append(size / out[i])
    return out, ratios, corners


def bilinear_interp_v2(inputs, attrs):
    x = inputs["X"][0]
    n, c, h, w = x.shape
    (oh, ow), (rh, rw), corners = _interp_setup(x, attrs)
    half = attrs.get("align_mode", 1) == 0 and not corners

    def taps(k, ratio, size):
        if half:
            src = ratio * (k + 0.5) - 0.5
            lo = max(int(src), 0)
            frac = max(src, 0.0) - lo
        else:
            lo = max(int(ratio * k), 0)
            frac = ratio * k - lo
        return lo, min(lo + 1, size - 1), frac

    xd = x.astype(np.float64)
    out = np.zeros((n, c, oh, ow))
    for k in range(oh):
        n0, s0, dn = taps(k, rh, h)
        for l in range(ow):
            w0, e0, dw = taps(l, rw, w)
            out[:, :, k, l] = (xd[:, :, n0, w0] * (1 - dn) * (1 - dw) +
                               xd[:, :, s0, w0] * dn * (1 - dw) +
                               xd[:, :, n0, e0] * (1 - dn) * dw +
                               xd[:, :, s0, e0] * dn * dw)
    return {"Out": out.astype(x.dtype)}


def nearest_interp_v2(inputs, attrs):
    x = inputs["X"][0]
    n, c, h, w = x.shape
    (oh, ow), (rh, rw), corners = _interp_setup(x, attrs)
    add = 0.5 if corners else 0.0
    rows = [min(int(rh * k + add), h - 1) for k in range(oh)]
    cols = [min(int(rw * l + add), w - 1) for l in range(ow)]
    return {"Out": x[:, :, rows, :][:, :, :, cols]}


REFERENCES = {
    "pool2d_adaptive": pool2d_adaptive,
    "depthwise_conv2d": depthwise_conv2d,
    "group_norm": group_norm,
    "instance_norm": instance_norm,
    "bilinear_interp_v2": bilinear_interp_v2,
    "nearest_interp_v2": nearest_interp_v2,
}
