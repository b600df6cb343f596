"""NumPy references for the tensor ops (see run_reference.py for the calling convention).

Attributes arrive as the op sets them (schema defaults are not filled in), so every function
applies Paddle's defaults itself. Dtype attributes hold FLEET_DTYPE_* values.
"""
import numpy as np

FLEET_DTYPES = {
    1: np.bool_,
    2: np.int8,
    3: np.uint8,
    4: np.int16,
    5: np.int32,
    6: np.int64,
    7: np.float16,
    9: np.float32,
    10: np.float64,
}


def _xshape(x):
    return np.zeros((0,) + x.shape, dtype=x.dtype)


def reshape2(inputs, attrs):
    x = inputs["X"][0]
    shape = [x.shape[i] if s == 0 else s for i, s in enumerate(attrs.get("shape", []))]
    return {"Out": x.reshape(shape), "XShape": _xshape(x)}


def transpose2(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": np.transpose(x, attrs["axis"]), "XShape": _xshape(x)}


def flatten_contiguous_range(inputs, attrs):
    x = inputs["X"][0]
    if x.ndim == 0:
        return {"Out": x.reshape([1]), "XShape": _xshape(x)}
    start = attrs.get("start_axis", 1) % x.ndim
    stop = attrs.get("stop_axis", 1) % x.ndim
    shape = list(x.shape[:start]) + [int(np.prod(x.shape[start:stop + 1]))] + \
        list(x.shape[stop + 1:])
    return {"Out": x.reshape(shape), "XShape": _xshape(x)}


def flatten2(inputs, attrs):
    x = inputs["X"][0]
    axis = attrs.get("axis", 1)
    rows = int(np.prod(x.shape[:axis]))
    return {"Out": x.reshape([rows, x.size // rows if rows else 0]), "XShape": _xshape(x)}


def concat(inputs, attrs):
    return {"Out": np.concatenate(inputs["X"], axis=attrs.get("axis", 0))}


def split(inputs, attrs):
    x = inputs["X"][0]
    axis = attrs.get("axis", 0) % x.ndim
    num = attrs.get("num", 0)
    if num > 0:
        return {"Out": np.split(x, num, axis=axis)}
    sections = list(attrs["sections"])
    if -1 in sections:
        sections[sections.index(-1)] = x.shape[axis] - (sum(sections) + 1)
    return {"Out": np.split(x, np.cumsum(sections)[:-1], axis=axis)}


def slice_(inputs, attrs):
    # Python's slicing clamps exactly as Paddle documents for positive steps.
    x = inputs["Input"][0]
    index = [slice(None)] * x.ndim
    for axis, start, end in zip(attrs["axes"], attrs["starts"], attrs["ends"]):
        index[axis] = slice(start, end)
    out = x[tuple(index)]
    decrease = [d % x.ndim for d in attrs.get("decrease_axis", [])]
    if decrease:
        out = np.squeeze(out, axis=tuple(decrease))
        if out.ndim == 0:
            out = out.reshape([1])
    return {"Out": out}


def cast(inputs, attrs):
    return {"Out": inputs["X"][0].astype(FLEET_DTYPES[attrs.get("out_dtype", 9)])}


def assign(inputs, attrs):
    return {"Out": inputs["X"][0].copy()}


def fill_constant(inputs, attrs):
    dtype = FLEET_DTYPES[attrs.get("dtype", 9)]
    text = attrs.get("str_value", "")
    if text:
        value = int(text) if np.issubdtype(dtype, np.integer) else float(text)
    else:
        value = attrs.get("value", 0.0)
    return {"Out": np.full(attrs.get("shape", []), value, dtype=dtype)}


def fill_any_like(inputs, attrs):
    x = inputs["X"][0]
    code = attrs.get("dtype", -1)
    dtype = x.dtype if code == -1 else FLEET_DTYPES[code]
    return {"Out": np.full(x.shape, attrs.get("value", 0.0), dtype=dtype)}


def fill_zeros_like(inputs, attrs):
    return {"Out": np.zeros_like(inputs["X"][0])}


def increment(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": (x + np.asarray(attrs.get("step", 1.0)).astype(x.dtype)).astype(x.dtype)}


# ---- the random streams (specified in plugins/cpu/kernels/tensor_create_kernels.cc) ----------

_MASK = (1 << 64) - 1


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z):
    """SplitMix64's output function on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _unit(seed, n):
    """u(i) for i < n: SplitMix64 outputs for state seed + (i + 1) * golden, to [0, 1)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed & _MASK) + (np.arange(n, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
    return (_mix(z) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def uniform_random(inputs, attrs):
    shape = attrs.get("shape", [])
    dtype = FLEET_DTYPES[attrs.get("dtype", 9)]
    lo, hi = attrs.get("min", -1.0), attrs.get("max", 1.0)
    n = int(np.prod(shape))
    out = (lo + (hi - lo) * _unit(attrs["seed"], n)).astype(dtype)
    lo_t, hi_t = dtype(lo), dtype(hi)
    if lo_t < hi_t:
        out[out >= hi_t] = max(lo_t, np.nextafter(hi_t, lo_t))
    return {"Out": out.reshape(shape)}


def gaussian_random(inputs, attrs):
    shape = attrs.get("shape", [])
    dtype = FLEET_DTYPES[attrs.get("dtype", 9)]
    n = int(np.prod(shape))
    pairs = (n + 1) // 2
    u = _unit(attrs["seed"], 2 * pairs)
    r = np.sqrt(-2.0 * np.log(1.0 - u[0::2]))
    theta = 2.0 * np.pi * u[1::2]
    z = np.empty(2 * pairs)
    z[0::2] = r * np.cos(theta)
    z[1::2] = r * np.sin(theta)
    out = attrs.get("mean", 0.0) + attrs.get("std", 1.0) * z[:n]
    return {"Out": out.astype(dtype).reshape(shape)}


def truncated_gaussian_random(inputs, attrs):
    shape = attrs.get("shape", [])
    dtype = FLEET_DTYPES[attrs.get("dtype", 9)]
    n = int(np.prod(shape))
    keys = _mix(np.uint64(attrs["seed"] & _MASK) +
                (np.arange(n, dtype=np.uint64) + np.uint64(1)) * _GOLDEN)
    z = np.empty(n)
    for i in range(n):
        a = 0
        while True:
            u = _unit(int(keys[i]), 2 * a + 2)[2 * a:]
            value = np.sqrt(-2.0 * np.log(1.0 - u[0])) * np.cos(2.0 * np.pi * u[1])
            if abs(value) <= 2.0:
                break
            a += 1
        z[i] = value
    out = attrs.get("mean", 0.0) + attrs.get("std", 1.0) * z
    return {"Out": out.astype(dtype).reshape(shape)}


def range_(inputs, attrs):
    """Start + i * Step for i below ceil(|End - Start| / |Step|), each product and sum rounded
    in the inputs' dtype (NumPy scalar arithmetic in that dtype)."""
    start, end, step = (inputs[k][0].reshape(-1)[0] for k in ("Start", "End", "Step"))
    dtype = inputs["Start"][0].dtype
    count = int(np.ceil(abs((float(end) - float(start)) / float(step))))
    out = np.array([start + dtype.type(i) * step for i in range(count)], dtype=dtype)
    return {"Out": out}


REFERENCES = {
    "range": range_,
    "reshape2": reshape2,
    "transpose2": transpose2,
    "flatten_contiguous_range": flatten_contiguous_range,
    "flatten2": flatten2,
    "concat": concat,
    "split": split,
    "slice": slice_,
    "cast": cast,
    "assign": assign,
    "fill_constant": fill_constant,
    "fill_any_like": fill_any_like,
    "fill_zeros_like": fill_zeros_like,
    "increment": increment,
    "uniform_random": uniform_random,
    "gaussian_random": gaussian_random,
    "truncated_gaussian_random": truncated_gaussian_random,
}
