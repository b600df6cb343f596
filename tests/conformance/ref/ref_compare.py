"""NumPy references for the comparison, logic, selection and extended reduction ops (see
run_reference.py for the calling convention).

Written from Paddle's documented semantics, not from the C++ kernels: comparisons broadcast by
Paddle's `axis` rule and compare floats for equality within 1e-8; elementwise_mod follows the
sign of the divisor and elementwise_floordiv rounds toward -inf (Python's % and //); reduce_max /
reduce_min's gradient goes to every element equal to the extreme; arg_max / arg_min take the
first index on ties; argsort is stable.
"""
import numpy as np


def _place(x, y, axis):
    """X and Y reshaped so that NumPy broadcasting follows Paddle's axis rule: the operand of
    lower rank is laid at `axis` (-1: its trailing dims at the end) of the other, its trailing 1s
    that would run past the end dropped."""
    if x.ndim == y.ndim:
        return x, y
    flip = x.ndim < y.ndim
    big, small = (y, x) if flip else (x, y)
    start = big.ndim - small.ndim if axis == -1 else axis
    dims = list(small.shape)
    while dims and start + len(dims) > big.ndim and dims[-1] == 1:
        dims.pop()
    if start < 0 or start + len(dims) > big.ndim:
        raise ValueError("axis does not place the smaller operand")
    small = small.reshape([1] * start + dims + [1] * (big.ndim - start - len(dims)))
    return (small, big) if flip else (big, small)


def _equal(a, b):
    if np.issubdtype(a.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            close = np.abs(a.astype(np.float64) - b.astype(np.float64)) < 1e-8
        inf = np.isinf(a) | np.isinf(b)
        return np.where(inf, a == b, close)
    return a == b


_COMPARE = {
    "equal": _equal,
    "not_equal": lambda a, b: ~_equal(a, b),
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
}


def _compare(name):
    def ref(inputs, attrs):
        a, b = _place(inputs["X"][0], inputs["Y"][0], attrs.get("axis", -1))
        return {"Out": np.asarray(_COMPARE[name](a, b), dtype=bool)}
    return ref


def _logic(fn):
    def ref(inputs, attrs):
        return {"Out": fn(inputs["X"][0].astype(bool), inputs["Y"][0].astype(bool))}
    return ref


def logical_not(inputs, attrs):
    return {"Out": ~inputs["X"][0].astype(bool)}


def isfinite_v2(inputs, attrs):
    return {"Out": np.isfinite(inputs["X"][0])}


def where(inputs, attrs):
    c, x, y = inputs["Condition"][0].astype(bool), inputs["X"][0], inputs["Y"][0]
    return {"Out": np.where(c, x, y).astype(x.dtype)}


def where_grad(inputs, attrs):
    c, g = inputs["Condition"][0].astype(bool), inputs["Out@GRAD"][0]
    zero = np.zeros_like(g)
    return {"X@GRAD": np.where(c, g, zero), "Y@GRAD": np.where(c, zero, g)}


def _int_pow(a, b):
    out = np.ones(np.broadcast(a, b).shape, dtype=np.int64)
    base = np.broadcast_to(a, out.shape).astype(np.int64)
    exp = np.broadcast_to(b, out.shape).astype(np.int64)
    for idx in np.ndindex(out.shape):
        e = int(exp[idx])
        v = int(base[idx])
        if e < 0:
            out[idx] = 1 if v == 1 else ((-1 if e % 2 else 1) if v == -1 else 0)
        else:
            out[idx] = v ** e
    return out


def _arith(kind):
    def ref(inputs, attrs):
        x, y = inputs["X"][0], inputs["Y"][0]
        a, b = _place(x, y, attrs.get("axis", -1))
        floating = np.issubdtype(x.dtype, np.floating)
        if kind == "pow":
            out = np.power(a.astype(np.float64), b.astype(np.float64)) if floating else \
                _int_pow(a, b)
        elif kind == "mod":
            out = np.mod(a.astype(np.float64), b.astype(np.float64)) if floating else \
                np.mod(a.astype(np.int64), b.astype(np.int64))
        else:
            out = np.floor_divide(a.astype(np.float64), b.astype(np.float64)) if floating else \
                np.floor_divide(a.astype(np.int64), b.astype(np.int64))
        return {"Out": np.asarray(out).astype(x.dtype)}
    return ref


def _axes(x, attrs):
    dims = attrs.get("dim", [0])
    if attrs.get("reduce_all", False) or len(dims) == 0:
        return tuple(range(x.ndim))
    return tuple(sorted({d % x.ndim for d in dims}))


def _scalar_like(out):
    out = np.asarray(out)
    return out.reshape(1) if out.ndim == 0 else out


def _reduce(fn):
    def ref(inputs, attrs):
        x = inputs["X"][0]
        out = fn(x, axis=_axes(x, attrs), keepdims=attrs.get("keep_dim", False))
        return {"Out": _scalar_like(out).astype(x.dtype)}
    return ref


def _extreme_grad(inputs, attrs):
    """Out@GRAD to every element equal to Out."""
    x, out, g = inputs["X"][0], inputs["Out"][0], inputs["Out@GRAD"][0]
    axes = _axes(x, attrs)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    o = out.reshape(shape)
    gg = g.reshape(shape)
    return {"X@GRAD": np.where(x == o, gg, 0).astype(g.dtype)}


def _arg(fn):
    def ref(inputs, attrs):
        x = inputs["X"][0]
        dtype = np.int32 if attrs.get("dtype", -1) == 5 else np.int64
        if attrs.get("flatten", False):
            return {"Out": np.array([fn(x.reshape(-1))], dtype=dtype)}
        axis = attrs.get("axis", 0) % x.ndim
        out = fn(x, axis=axis)
        if attrs.get("keepdims", False):
            out = np.expand_dims(out, axis)
        return {"Out": _scalar_like(out).astype(dtype)}
    return ref


def argsort(inputs, attrs):
    x = inputs["X"][0]
    axis = attrs.get("axis", -1)
    key = -x.astype(np.float64) if attrs.get("descending", False) else x
    idx = np.argsort(key, axis=axis, kind="stable")
    return {"Out": np.take_along_axis(x, idx, axis=axis), "Indices": idx.astype(np.int64)}


def p_norm(inputs, attrs):
    x = inputs["X"][0]
    p = attrs.get("porder", 2.0)
    keep = attrs.get("keepdim", False)
    v = x.astype(np.float64)
    if attrs.get("asvector", False):
        v = v.reshape(-1)
        axis = 0
    else:
        axis = attrs.get("axis", -1) % x.ndim
    a = np.abs(v)
    if p == 0:
        out = (v != 0).sum(axis=axis).astype(np.float64)
    else:
        out = (a ** p).sum(axis=axis) ** (1.0 / p)
    if attrs.get("asvector", False):
        out = np.asarray(out).reshape([1] * x.ndim if keep else [1])
    elif keep:
        out = np.expand_dims(out, axis)
    return {"Out": _scalar_like(out).astype(x.dtype)}


REFERENCES = {
    **{name: _compare(name) for name in _COMPARE},
    "logical_and": _logic(np.logical_and),
    "logical_or": _logic(np.logical_or),
    "logical_xor": _logic(np.logical_xor),
    "logical_not": logical_not,
    "isfinite_v2": isfinite_v2,
    "where": where,
    "where_grad": where_grad,
    "elementwise_pow": _arith("pow"),
    "elementwise_mod": _arith("mod"),
    "elementwise_floordiv": _arith("floordiv"),
    "reduce_max": _reduce(np.max),
    "reduce_min": _reduce(np.min),
    "reduce_prod": _reduce(np.prod),
    "reduce_any": _reduce(np.any),
    "reduce_all": _reduce(np.all),
    "reduce_max_grad": _extreme_grad,
    "reduce_min_grad": _extreme_grad,
    "arg_max": _arg(np.argmax),
    "arg_min": _arg(np.argmin),
    "argsort": argsort,
    "p_norm": p_norm,
}
