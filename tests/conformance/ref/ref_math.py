"""NumPy references for the math ops (see run_reference.py for the calling convention).

Written from Paddle's documented semantics, not from the C++ kernels. `attrs` holds only the
attributes the test set on the op, so every default is spelled out here.
"""
import math

import numpy as np


def scale(inputs, attrs):
    x = inputs["X"][0]
    s = attrs.get("scale", 1.0)
    b = attrs.get("bias", 0.0)
    if attrs.get("bias_after_scale", True):
        out = s * x + b
    else:
        out = s * (x + b)
    return {"Out": out.astype(x.dtype)}


# ---- mul / matmul_v2 ------------------------------------------------------------------------

def mul(inputs, attrs):
    x, y = inputs["X"][0], inputs["Y"][0]
    xn = attrs.get("x_num_col_dims", 1)
    yn = attrs.get("y_num_col_dims", 1)
    xm = x.reshape(int(np.prod(x.shape[:xn])), -1).astype(np.float64)
    ym = y.reshape(int(np.prod(y.shape[:yn])), -1).astype(np.float64)
    out = (xm @ ym).reshape(tuple(x.shape[:xn]) + tuple(y.shape[yn:]))
    return {"Out": out.astype(x.dtype)}


def matmul_v2(inputs, attrs):
    x, y = inputs["X"][0].astype(np.float64), inputs["Y"][0].astype(np.float64)
    if attrs.get("trans_x", False) and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if attrs.get("trans_y", False) and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    out = np.matmul(x, y)
    if out.ndim == 0:
        out = out.reshape(1)
    return {"Out": out.astype(inputs["X"][0].dtype)}


# ---- elementwise ----------------------------------------------------------------------------

def _align(x, y, axis):
    """Reshapes the lower-rank operand so NumPy broadcasting follows Paddle's axis rule."""
    swap = x.ndim < y.ndim
    big, small = (y, x) if swap else (x, y)
    if big.ndim != small.ndim:
        ax = big.ndim - small.ndim if axis == -1 else axis
        shape = list(small.shape)
        while shape and ax + len(shape) > big.ndim and shape[-1] == 1:
            shape.pop()
        assert 0 <= ax and ax + len(shape) <= big.ndim, "axis does not fit"
        small = small.reshape([1] * ax + shape + [1] * (big.ndim - ax - len(shape)))
    return (small, big) if swap else (big, small)


def _binary(fn):
    def ref(inputs, attrs):
        x, y = inputs["X"][0], inputs["Y"][0]
        a, b = _align(x.astype(np.float64), y.astype(np.float64), attrs.get("axis", -1))
        return {"Out": fn(a, b).astype(x.dtype)}
    return ref


# ---- sum / mean / reductions ----------------------------------------------------------------

def sum_op(inputs, attrs):
    xs = inputs["X"]
    out = np.zeros(xs[0].shape, np.float64)
    for x in xs:
        out = out + x.astype(np.float64)
    return {"Out": out.astype(xs[0].dtype)}


def mean(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": np.array([x.astype(np.float64).mean()]).astype(x.dtype)}


def _reduce(fn):
    def ref(inputs, attrs):
        x = inputs["X"][0]
        dims = attrs.get("dim", [0])
        keep = attrs.get("keep_dim", False)
        if attrs.get("reduce_all", False) or len(dims) == 0:
            axes = tuple(range(x.ndim))
        else:
            axes = tuple(sorted({d % x.ndim for d in dims}))
        out = fn(x.astype(np.float64), axis=axes, keepdims=keep)
        out = np.asarray(out)
        if out.ndim == 0:
            out = out.reshape(1)
        return {"Out": out.astype(x.dtype)}
    return ref


# ---- activations ----------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def _gelu(x, attrs):
    if attrs.get("approximate", False):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _leaky_relu(x, attrs):
    # alpha is a float32 attribute: its default is float32(0.02), not the double 0.02.
    alpha = attrs.get("alpha", float(np.float32(0.02)))
    return np.where(x > 0, x, alpha * x)


def _unary(fn):
    def ref(inputs, attrs):
        x = inputs["X"][0]
        return {"Out": fn(x.astype(np.float64), attrs).astype(x.dtype)}
    return ref


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": _softmax(x.astype(np.float64), attrs.get("axis", -1)).astype(x.dtype)}


def log_softmax(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": np.log(_softmax(x.astype(np.float64), attrs.get("axis", -1))).astype(x.dtype)}


# ---- hand-derived gradients (checked against the float32 kernels) ---------------------------

def mul_grad(inputs, attrs):
    x, y, g = inputs["X"][0], inputs["Y"][0], inputs["Out@GRAD"][0]
    xn = attrs.get("x_num_col_dims", 1)
    yn = attrs.get("y_num_col_dims", 1)
    xm = x.reshape(int(np.prod(x.shape[:xn])), -1).astype(np.float64)
    ym = y.reshape(int(np.prod(y.shape[:yn])), -1).astype(np.float64)
    gm = g.reshape(xm.shape[0], ym.shape[1]).astype(np.float64)
    return {"X@GRAD": (gm @ ym.T).reshape(x.shape).astype(x.dtype),
            "Y@GRAD": (xm.T @ gm).reshape(y.shape).astype(y.dtype)}


def _reduce_to(g, shape):
    """Sums g over the dims where an operand of (aligned) `shape` was broadcast."""
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True)


def elementwise_add_grad(inputs, attrs):
    x, y, g = inputs["X"][0], inputs["Y"][0], inputs["Out@GRAD"][0].astype(np.float64)
    a, b = _align(x, y, attrs.get("axis", -1))
    return {"X@GRAD": _reduce_to(g, a.shape).reshape(x.shape).astype(x.dtype),
            "Y@GRAD": _reduce_to(g, b.shape).reshape(y.shape).astype(y.dtype)}


def softmax_grad(inputs, attrs):
    out, g = inputs["Out"][0].astype(np.float64), inputs["Out@GRAD"][0].astype(np.float64)
    axis = attrs.get("axis", -1)
    dx = out * (g - (g * out).sum(axis=axis, keepdims=True))
    return {"X@GRAD": dx.astype(inputs["Out"][0].dtype)}


REFERENCES = {
    "scale": scale,
    "mul": mul,
    "matmul_v2": matmul_v2,
    "elementwise_add": _binary(lambda a, b: a + b),
    "elementwise_sub": _binary(lambda a, b: a - b),
    "elementwise_mul": _binary(lambda a, b: a * b),
    "elementwise_div": _binary(lambda a, b: a / b),
    "elementwise_max": _binary(np.maximum),
    "elementwise_min": _binary(np.minimum),
    "sum": sum_op,
    "mean": mean,
    "reduce_sum": _reduce(np.sum),
    "reduce_mean": _reduce(np.mean),
    "relu": _unary(lambda x, a: np.maximum(x, 0)),
    "tanh": _unary(lambda x, a: np.tanh(x)),
    "sigmoid": _unary(lambda x, a: 1 / (1 + np.exp(-x))),
    "sqrt": _unary(lambda x, a: np.sqrt(x)),
    "exp": _unary(lambda x, a: np.exp(x)),
    "gelu": _unary(_gelu),
    "leaky_relu": _unary(_leaky_relu),
    "square": _unary(lambda x, a: x * x),
    "sign": _unary(lambda x, a: np.sign(x)),
    "log": _unary(lambda x, a: np.log(x)),
    "softmax": softmax,
    "log_softmax": log_softmax,
    "mul_grad": mul_grad,
    "elementwise_add_grad": elementwise_add_grad,
    "softmax_grad": softmax_grad,
}
