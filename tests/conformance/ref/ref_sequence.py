"""NumPy references for the sequence ops (see run_reference.py for the calling convention).

A sequence input comes with its offsets in the extra slot "Lod" (int64, sequences + 1 values):
sequence s is rows lod[s]:lod[s + 1] of X (of Y for sequence_expand_as); rows past lod[-1] are
padding, and sequence outputs are compared on the rows before it. Written from Paddle's
documentation of each op, one sequence at a time in float64, independent of the kernels.
"""
import numpy as np


def _pool_one(rows, pooltype):
    if pooltype == "SUM":
        return rows.sum(axis=0), None
    if pooltype == "AVERAGE":
        return rows.mean(axis=0), None
    if pooltype == "SQRT":
        return rows.sum(axis=0) / np.sqrt(rows.shape[0]), None
    if pooltype == "MAX":
        arg = rows.argmax(axis=0)  # the first of equal values, as Paddle keeps it
        return rows.max(axis=0), arg
    if pooltype == "LAST":
        return rows[-1], None
    if pooltype == "FIRST":
        return rows[0], None
    raise ValueError(pooltype)


def sequence_pool(inputs, attrs):
    x = inputs["X"][0]
    lod = inputs["Lod"][0].astype(np.int64)
    pooltype = attrs["pooltype"]
    xd = x.astype(np.float64)
    width = int(np.prod(x.shape[1:], dtype=np.int64))
    out = np.zeros((len(lod) - 1,) + x.shape[1:], dtype=np.float64)
    index = np.full((len(lod) - 1, width), -1, dtype=np.int32)
    for s in range(len(lod) - 1):
        begin, end = int(lod[s]), int(lod[s + 1])
        if end == begin:
            out[s] = attrs["pad_value"]
            continue
        value, arg = _pool_one(xd[begin:end].reshape(end - begin, width), pooltype)
        out[s] = value.reshape(x.shape[1:])
        if arg is not None:
            index[s] = arg + begin  # rows of X, not of the sequence
    result = {"Out": out.astype(x.dtype)}
    if pooltype == "MAX":
        result["MaxIndex"] = index.reshape(out.shape)
    return result


def _lod(inputs):
    return [int(v) for v in inputs["Lod"][0].astype(np.int64)]


def sequence_softmax(inputs, attrs):
    x = inputs["X"][0]
    lod = _lod(inputs)
    out = np.zeros(x.shape, dtype=np.float64)
    flat = x.astype(np.float64).reshape(-1)
    res = out.reshape(-1)
    for s in range(len(lod) - 1):
        v = flat[lod[s]:lod[s + 1]]
        if v.size:
            e = np.exp(v - v.max())
            res[lod[s]:lod[s + 1]] = e / e.sum()
    return {"Out": out.astype(x.dtype)}


def sequence_reverse(inputs, attrs):
    x = inputs["X"][0]
    lod = _lod(inputs)
    y = np.zeros_like(x)
    for s in range(len(lod) - 1):
        y[lod[s]:lod[s + 1]] = x[lod[s]:lod[s + 1]][::-1]
    return {"Y": y}


def sequence_pad(inputs, attrs):
    x = inputs["X"][0]
    pad = inputs["PadValue"][0]
    lod = _lod(inputs)
    length = attrs["padded_length"]
    row = x.shape[1:]
    out = np.empty((len(lod) - 1, length) + row, dtype=x.dtype)
    out[...] = pad.reshape(row) if pad.size != 1 else pad.reshape(())
    lengths = np.zeros(len(lod) - 1, dtype=np.int64)
    for s in range(len(lod) - 1):
        n = lod[s + 1] - lod[s]
        assert n <= length, "the test asks for a sequence longer than padded_length"
        out[s, :n] = x[lod[s]:lod[s + 1]]
        lengths[s] = n
    return {"Out": out, "Length": lengths}


# FLEET_DTYPE_* values of the dtypes sequence_mask writes.
_MASK_DTYPES = {9: np.float32, 10: np.float64, 6: np.int64, 5: np.int32, 1: np.bool_}


def sequence_mask(inputs, attrs):
    x = inputs["X"][0].astype(np.int64)
    steps = np.arange(attrs["maxlen"], dtype=np.int64)
    y = steps < x[..., None]
    return {"Y": y.astype(_MASK_DTYPES[attrs["out_dtype"]])}


def sequence_expand_as(inputs, attrs):
    x = inputs["X"][0]
    y = inputs["Y"][0]
    lod = _lod(inputs)
    out = np.zeros((y.shape[0],) + x.shape[1:], dtype=x.dtype)
    for s in range(len(lod) - 1):
        out[lod[s]:lod[s + 1]] = x[s]
    return {"Out": out}


def _rows(parts, like):
    if parts:
        return np.concatenate(parts, axis=0)
    return np.zeros((0,) + like.shape[1:], dtype=like.dtype)


def sequence_concat(inputs, attrs):
    xs = inputs["X"]
    lods = [[int(v) for v in lod.astype(np.int64)] for lod in inputs["Lods"]]
    parts, out_lod = [], [0]
    for s in range(len(lods[0]) - 1):
        for x, lod in zip(xs, lods):
            parts.append(x[lod[s]:lod[s + 1]])
        out_lod.append(out_lod[-1] + sum(lod[s + 1] - lod[s] for lod in lods))
    return {"Out": _rows(parts, xs[0]), "OutLod": np.array(out_lod, dtype=np.int64)}


def sequence_slice(inputs, attrs):
    x = inputs["X"][0]
    lod = _lod(inputs)
    offset = inputs["Offset"][0].reshape(-1).astype(np.int64)
    length = inputs["Length"][0].reshape(-1).astype(np.int64)
    parts, out_lod = [], [0]
    for s in range(len(lod) - 1):
        begin = lod[s] + offset[s]
        assert offset[s] + length[s] <= lod[s + 1] - lod[s], "the test slices past a sequence"
        parts.append(x[begin:begin + length[s]])
        out_lod.append(out_lod[-1] + int(length[s]))
    return {"Out": _rows(parts, x), "OutLod": np.array(out_lod, dtype=np.int64)}


def sequence_unpad(inputs, attrs):
    x = inputs["X"][0]
    length = inputs["Length"][0].reshape(-1).astype(np.int64)
    parts = [x[s, :length[s]] for s in range(x.shape[0])]
    out = _rows(parts, x[0])
    if x.ndim == 2:
        out = out.reshape(-1, 1)
    out_lod = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
    return {"Out": out, "OutLod": out_lod}


REFERENCES = {
    "sequence_pool": sequence_pool,
    "sequence_softmax": sequence_softmax,
    "sequence_reverse": sequence_reverse,
    "sequence_pad": sequence_pad,
    "sequence_mask": sequence_mask,
    "sequence_expand_as": sequence_expand_as,
    "sequence_expand": sequence_expand_as,  # over a dense X, the same op
    "sequence_concat": sequence_concat,
    "sequence_slice": sequence_slice,
    "sequence_unpad": sequence_unpad,
}
