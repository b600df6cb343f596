"""NumPy references for the shape and indexing ops (see run_reference.py for the calling
convention): unsqueeze2, squeeze2, expand_v2, expand_as_v2, tile, stack, unstack, flip, roll,
tril_triu, gather, index_select, gather_nd, scatter, one_hot_v2, strided_slice, pad3d and pad.

Attributes arrive as the op sets them (schema defaults are not filled in), so every function
applies Paddle's defaults itself. Each is written from Paddle's documented semantics with NumPy's
own routines, not from the kernels' plans.
"""
import numpy as np


def _xshape(x):
    return np.zeros((0,) + x.shape, dtype=x.dtype)


def unsqueeze2(inputs, attrs):
    x = inputs["X"][0]
    out = x
    for a in attrs["axes"]:
        out = np.expand_dims(out, a)  # a negative axis counts from the end of the grown shape
    return {"Out": out, "XShape": _xshape(x)}


def squeeze2(inputs, attrs):
    x = inputs["X"][0]
    axes = [a % x.ndim for a in attrs.get("axes", [])]
    if not axes:
        out = np.squeeze(x)
    else:
        out = np.squeeze(x, axis=tuple(sorted({a for a in axes if x.shape[a] == 1})))
    if out.ndim == 0:
        out = out.reshape([1])
    return {"Out": out, "XShape": _xshape(x)}


def _expand(x, shape):
    shape = list(shape)
    lead = len(shape) - x.ndim
    target = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    return np.broadcast_to(x, target).copy()


def expand_v2(inputs, attrs):
    return {"Out": _expand(inputs["X"][0], attrs["shape"])}


def expand_as_v2(inputs, attrs):
    x = inputs["X"][0]
    if inputs.get("Y"):
        return {"Out": _expand(x, inputs["Y"][0].shape)}
    return {"Out": _expand(x, attrs["target_shape"])}


def tile(inputs, attrs):
    return {"Out": np.tile(inputs["X"][0], attrs["repeat_times"])}


def stack(inputs, attrs):
    return {"Y": np.stack(inputs["X"], axis=attrs.get("axis", 0))}


def unstack(inputs, attrs):
    x = inputs["X"][0]
    axis = attrs.get("axis", 0)
    return {"Y": [np.take(x, i, axis=axis) for i in range(x.shape[axis])]}


def flip(inputs, attrs):
    return {"Out": np.flip(inputs["X"][0], axis=tuple(attrs["axis"]))}


def roll(inputs, attrs):
    x = inputs["X"][0]
    axis = attrs.get("axis", [])
    if not axis:
        return {"Out": np.roll(x.reshape(-1), attrs["shifts"][0]).reshape(x.shape)}
    return {"Out": np.roll(x, attrs["shifts"], axis=tuple(axis))}


def tril_triu(inputs, attrs):
    x = inputs["X"][0]
    k = attrs.get("diagonal", 0)
    if attrs.get("lower", True):
        return {"Out": np.tril(x, k)}
    return {"Out": np.triu(x, k)}


def gather(inputs, attrs):
    x, index = inputs["X"][0], inputs["Index"][0].reshape(-1)
    return {"Out": np.take(x, index, axis=attrs.get("axis", 0))}


def index_select(inputs, attrs):
    x, index = inputs["X"][0], inputs["Index"][0].reshape(-1)
    return {"Out": np.take(x, index, axis=attrs.get("dim", 0))}


def gather_nd(inputs, attrs):
    x, index = inputs["X"][0], inputs["Index"][0]
    depth = index.shape[-1]
    flat = index.reshape(-1, depth)
    rows = [x[tuple(v)] for v in flat]
    tail = x.shape[depth:]
    out = np.array(rows, dtype=x.dtype).reshape(index.shape[:-1] + tail)
    return {"Out": out}


def scatter(inputs, attrs):
    x, ids, updates = inputs["X"][0], inputs["Ids"][0].reshape(-1), inputs["Updates"][0]
    out = x.copy()
    if attrs.get("overwrite", True):
        for i, r in enumerate(ids):
            out[r] = updates[i]
    else:
        for r in set(ids.tolist()):
            out[r] = 0
        for i, r in enumerate(ids):
            out[r] += updates[i]
    return {"Out": out}


def one_hot_v2(inputs, attrs):
    x = inputs["X"][0]
    depth = attrs["depth"]
    dtype = np.float64 if attrs.get("dtype", 9) == 10 else np.float32
    eye = np.vstack([np.eye(depth, dtype=dtype), np.zeros((1, depth), dtype=dtype)])
    flat = x.reshape(-1)
    rows = np.where((flat >= 0) & (flat < depth), flat, depth)
    return {"Out": eye[rows].reshape(x.shape + (depth,))}


def strided_slice(inputs, attrs):
    # Python's extended slicing after Paddle's clamping: a negative start or end counts from
    # the end and stops at 0, except that end -1 with a negative stride runs through index 0
    # (Python's None).
    x = inputs["Input"][0]
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(attrs["axes"], attrs["starts"], attrs["ends"],
                                      attrs["strides"]):
        n = x.shape[axis]
        if start < 0:
            start = max(start + n, 0)
        if end == -1 and step < 0:
            end = None
        elif end < 0:
            end = max(end + n, 0)
        index[axis] = slice(start, end, step)
    out = x[tuple(index)]
    decrease = [d % x.ndim for d in attrs.get("decrease_axis", [])]
    if decrease:
        out = np.squeeze(out, axis=tuple(decrease))
        if out.ndim == 0:
            out = out.reshape([1])
    return {"Out": out}


def pad3d(inputs, attrs):
    x = inputs["X"][0]
    p = list(attrs.get("paddings", [0] * 6))  # left, right, top, bottom, front, back
    spatial = [(p[4], p[5]), (p[2], p[3]), (p[0], p[1])]
    if attrs.get("data_format", "NCDHW") == "NDHWC":
        widths = [(0, 0)] + spatial + [(0, 0)]
    else:
        widths = [(0, 0), (0, 0)] + spatial
    mode = attrs.get("mode", "constant")
    if mode == "constant":
        out = np.pad(x, widths, mode="constant", constant_values=attrs.get("value", 0.0))
    else:
        out = np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge",
                                      "circular": "wrap"}[mode])
    return {"Out": out.astype(x.dtype)}


def pad(inputs, attrs):
    x = inputs["X"][0]
    p = attrs["paddings"]
    widths = [(p[2 * k], p[2 * k + 1]) for k in range(x.ndim)]
    out = np.pad(x, widths, mode="constant", constant_values=attrs.get("pad_value", 0.0))
    return {"Out": out.astype(x.dtype)}


REFERENCES = {
    "unsqueeze2": unsqueeze2,
    "squeeze2": squeeze2,
    "expand_v2": expand_v2,
    "expand_as_v2": expand_as_v2,
    "tile": tile,
    "stack": stack,
    "unstack": unstack,
    "flip": flip,
    "roll": roll,
    "tril_triu": tril_triu,
    "gather": gather,
    "index_select": index_select,
    "gather_nd": gather_nd,
    "scatter": scatter,
    "one_hot_v2": one_hot_v2,
    "strided_slice": strided_slice,
    "pad3d": pad3d,
    "pad": pad,
}
