"""NumPy references for the sequence ops (see run_reference.py for the calling convention).

A sequence input comes with its offsets in the extra slot "Lod" (int64, sequences + 1 values):
sequence s is rows lod[s]:lod[s + 1] of X. Written from Paddle's sequence_pool documentation,
one sequence at a time in float64, independent of the kernels.
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


REFERENCES = {"sequence_pool": sequence_pool}
