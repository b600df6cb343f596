"""NumPy references for the nn ops (see run_reference.py for the calling convention).

Written from the ops' definitions with plain loops, independent of the kernels: convolution
and pooling visit every output position and its window explicitly.
"""
import numpy as np


def _window(attrs, in_hw, ksize, dilation_attr):
    """Paddle's 2-D window rules -> (kernel, stride, dilation, pad_begin, pad_end)."""
    strides = list(attrs.get("strides", [1, 1]))
    pads = list(attrs.get("paddings", [0, 0]))
    if len(pads) == 2:
        pads = [pads[0], pads[0], pads[1], pads[1]]
    dil = list(attrs.get("dilations", [1, 1])) if dilation_attr else [1, 1]
    algo = attrs.get("padding_algorithm", "EXPLICIT")
    begin = [pads[0], pads[2]]
    end = [pads[1], pads[3]]
    if algo == "SAME":
        for i in range(2):
            out = -(-in_hw[i] // strides[i])
            total = max((out - 1) * strides[i] + ksize[i] - in_hw[i], 0)
            begin[i], end[i] = total // 2, total - total // 2
            dil[i] = 1
    elif algo == "VALID":
        begin, end = [0, 0], [0, 0]
    return list(ksize), strides, dil, begin, end


def conv2d(inputs, attrs):
    x = inputs["Input"][0]
    f = inputs["Filter"][0]
    groups = attrs.get("groups", 1)
    n, c, h, w = x.shape
    o, cg, kh, kw = f.shape
    k, s, d, pb, pe = _window(attrs, (h, w), (kh, kw), True)
    xp = np.pad(x, ((0, 0), (0, 0), (pb[0], pe[0]), (pb[1], pe[1])))
    span = [d[0] * (kh - 1) + 1, d[1] * (kw - 1) + 1]
    oh = (h + pb[0] + pe[0] - span[0]) // s[0] + 1
    ow = (w + pb[1] + pe[1] - span[1]) // s[1] + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * s[0]:i * s[0] + span[0]:d[0],
                           j * s[1]:j * s[1] + span[1]:d[1]]
                out[:, oc, i, j] = np.einsum("nckl,ckl->n", patch.astype(np.float64),
                                             f[oc].astype(np.float64))
    return {"Output": out.astype(x.dtype)}


def pool2d(inputs, attrs):
    x = inputs["X"][0]
    n, c, h, w = x.shape
    is_max = attrs.get("pooling_type", "max") == "max"
    exclusive = attrs.get("exclusive", True)
    if attrs.get("global_pooling", False):
        k, s, pb, pe = [h, w], [1, 1], [0, 0], [0, 0]
    else:
        k, s, _, pb, pe = _window(attrs, (h, w), attrs["ksize"], False)
    ceil = attrs.get("ceil_mode", False)
    dims = []
    for i, size in enumerate((h, w)):
        padded = size + pb[i] + pe[i] - k[i]
        dims.append((padded + (s[i] - 1 if ceil else 0)) // s[i] + 1)
    out = np.zeros((n, c, dims[0], dims[1]), dtype=np.float64)
    for i in range(dims[0]):
        h0 = i * s[0] - pb[0]
        hs, he = max(h0, 0), min(h0 + k[0], h)
        for j in range(dims[1]):
            w0 = j * s[1] - pb[1]
            ws, we = max(w0, 0), min(w0 + k[1], w)
            win = x[:, :, hs:he, ws:we].astype(np.float64)
            if is_max:
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = win.shape[2] * win.shape[3] if exclusive else k[0] * k[1]
                out[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return {"Out": out.astype(x.dtype)}


def cross_entropy(inputs, attrs):
    x = inputs["X"][0].astype(np.float64)
    label = inputs["Label"][0]
    if attrs.get("soft_label", False):
        y = -(label.astype(np.float64) * np.log(x)).sum(axis=-1, keepdims=True)
    else:
        ignore = attrs.get("ignore_index", -100)
        flat = x.reshape(-1, x.shape[-1])
        lab = label.reshape(-1)
        y = np.zeros(flat.shape[0])
        for r in range(flat.shape[0]):
            if lab[r] != ignore:
                y[r] = -np.log(flat[r, lab[r]])
        y = y.reshape(x.shape[:-1] + (1,))
    return {"Y": y.astype(inputs["X"][0].dtype)}


def softmax_with_cross_entropy(inputs, attrs):
    logits = inputs["Logits"][0]
    label = inputs["Label"][0]
    axis = attrs.get("axis", -1) % logits.ndim
    z = np.moveaxis(logits.astype(np.float64), axis, -1)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    sm = e / e.sum(axis=-1, keepdims=True)
    if attrs.get("soft_label", False):
        lab = np.moveaxis(label.astype(np.float64), axis, -1)
        loss = -(lab * np.log(sm)).sum(axis=-1, keepdims=True)
    else:
        ignore = attrs.get("ignore_index", -100)
        lab = np.moveaxis(label, axis, -1)[..., 0]
        loss = np.zeros(lab.shape + (1,))
        for idx in np.ndindex(*lab.shape):
            if lab[idx] != ignore:
                loss[idx + (0,)] = -np.log(sm[idx + (lab[idx],)])
    dtype = logits.dtype
    return {"Softmax": np.moveaxis(sm, -1, axis).astype(dtype),
            "Loss": np.moveaxis(loss, -1, axis).astype(dtype)}


def batch_norm(inputs, attrs):
    x = inputs["X"][0].astype(np.float64)
    scale, bias = inputs["Scale"][0], inputs["Bias"][0]
    mean_in, var_in = inputs["Mean"][0], inputs["Variance"][0]
    # Paddle's float attributes are float32: use the values the kernel sees.
    eps = float(np.float32(attrs.get("epsilon", 1e-5)))
    momentum = float(np.float32(attrs.get("momentum", 0.9)))
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    if attrs.get("is_test", False) or attrs.get("use_global_stats", False):
        mean, var = mean_in.astype(np.float64), var_in.astype(np.float64)
        mean_out, var_out = mean_in, var_in
    else:
        mean = x.mean(axis=axes)
        var = ((x - mean.reshape(shape)) ** 2).mean(axis=axes)
        mean_out = mean_in * momentum + mean * (1 - momentum)
        var_out = var_in * momentum + var * (1 - momentum)
    inv_std = 1.0 / np.sqrt(var + eps)
    y = (x - mean.reshape(shape)) * inv_std.reshape(shape) * scale.reshape(shape) + \
        bias.reshape(shape)
    dt = inputs["X"][0].dtype
    return {"Y": y.astype(dt), "MeanOut": np.asarray(mean_out).astype(dt),
            "VarianceOut": np.asarray(var_out).astype(dt), "SavedMean": mean.astype(dt),
            "SavedVariance": inv_std.astype(dt)}


def batch_norm_grad(inputs, attrs):
    """dX, dScale, dBias of batch_norm with batch statistics, written out from the forward
    formula y = (x - mean) / sqrt(var + eps) * scale + bias (mean and biased var over every
    axis but 1)."""
    x = inputs["X"][0].astype(np.float64)
    dy = inputs["Y@GRAD"][0].astype(np.float64)
    scale = inputs["Scale"][0].astype(np.float64)
    eps = float(np.float32(attrs.get("epsilon", 1e-5)))
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    count = x.size // x.shape[1]
    mean = x.mean(axis=axes).reshape(shape)
    inv_std = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=axes).reshape(shape) + eps)
    xhat = (x - mean) * inv_std
    dbias = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    dx = scale.reshape(shape) * inv_std * (dy - dbias.reshape(shape) / count -
                                           xhat * dscale.reshape(shape) / count)
    dt = inputs["X"][0].dtype
    return {"X@GRAD": dx.astype(dt), "Scale@GRAD": dscale.astype(dt),
            "Bias@GRAD": dbias.astype(dt)}


def layer_norm(inputs, attrs):
    x = inputs["X"][0]
    axis = attrs.get("begin_norm_axis", 1)
    eps = float(np.float32(attrs.get("epsilon", 1e-5)))
    left = int(np.prod(x.shape[:axis]))
    rows = x.reshape(left, -1).astype(np.float64)
    mean = rows.mean(axis=1)
    var = rows.var(axis=1)
    y = (rows - mean[:, None]) / np.sqrt(var[:, None] + eps)
    if "Scale" in inputs:
        y = y * inputs["Scale"][0][None, :]
    if "Bias" in inputs:
        y = y + inputs["Bias"][0][None, :]
    return {"Y": y.reshape(x.shape).astype(x.dtype), "Mean": mean.astype(x.dtype),
            "Variance": var.astype(x.dtype)}


def lookup_table_v2(inputs, attrs):
    w = inputs["W"][0]
    ids = inputs["Ids"][0]
    pad = attrs.get("padding_idx", -1)
    out = w[ids.reshape(-1)].copy()
    out[ids.reshape(-1) == pad] = 0
    return {"Out": out.reshape(ids.shape + (w.shape[1],))}


def accuracy(inputs, attrs):
    idx = inputs["Indices"][0]
    label = inputs["Label"][0].reshape(-1, 1)
    correct = int((idx == label).any(axis=1).sum())
    total = idx.shape[0]
    return {"Accuracy": np.array([correct / total], dtype=np.float32),
            "Correct": np.array([correct], dtype=np.int32),
            "Total": np.array([total], dtype=np.int32)}


def top_k_v2(inputs, attrs):
    x = inputs["X"][0]
    k = attrs.get("k", 1)
    axis = attrs.get("axis", -1) % x.ndim
    largest = attrs.get("largest", True)
    moved = np.moveaxis(x, axis, -1)
    key = -moved if largest else moved
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(moved, order, axis=-1)
    return {"Out": np.moveaxis(values, -1, axis),
            "Indices": np.moveaxis(order.astype(np.int64), -1, axis)}


REFERENCES = {
    "conv2d": conv2d,
    "pool2d": pool2d,
    "cross_entropy": cross_entropy,
    "softmax_with_cross_entropy": softmax_with_cross_entropy,
    "batch_norm": batch_norm,
    "batch_norm_grad": batch_norm_grad,
    "layer_norm": layer_norm,
    "lookup_table_v2": lookup_table_v2,
    "accuracy": accuracy,
    "top_k_v2": top_k_v2,
}
