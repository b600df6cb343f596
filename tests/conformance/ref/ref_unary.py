"""NumPy references for the unary math ops, the activations of math_unary_ops.cc, prelu and
cumsum (see run_reference.py for the calling convention).

Written from Paddle's documented definitions, not from the C++ kernels. `attrs` holds only the
attributes a test set, so every default is spelled out here; Paddle's float attributes are
float32, so their defaults are the float32 values (f32 below).
"""
import math

import numpy as np


def f32(v):
    return float(np.float32(v))


_erf = np.vectorize(math.erf)


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _softplus(x, beta, threshold):
    # ln(1 + exp(beta x)) / beta below the threshold, x above it.
    return np.where(beta * x > threshold, x, np.logaddexp(0.0, beta * x) / beta)


def _hard_swish(x, a):
    threshold = a.get("threshold", 6.0)
    scale = a.get("scale", 6.0)
    offset = a.get("offset", 3.0)
    return x * np.minimum(np.maximum(x + offset, 0.0), threshold) / scale


def _selu(x, a):
    scale = a.get("scale", f32(1.0507009873554804934193349852946))
    alpha = a.get("alpha", f32(1.6732632423543772848170429916717))
    return scale * np.where(x > 0, x, alpha * np.expm1(x))


def _mish(x, a):
    threshold = a.get("threshold", 20.0)
    sp = np.where(x > threshold, x, np.logaddexp(0.0, x))
    return x * np.tanh(sp)


_FORMULAS = {
    "rsqrt": lambda x, a: 1.0 / np.sqrt(x),
    "sin": lambda x, a: np.sin(x),
    "cos": lambda x, a: np.cos(x),
    "floor": lambda x, a: np.floor(x),
    "ceil": lambda x, a: np.ceil(x),
    "round": lambda x, a: _round_half_away(x),
    "reciprocal": lambda x, a: 1.0 / x,
    "log1p": lambda x, a: np.log1p(x),
    "erf": lambda x, a: _erf(x),
    "pow": lambda x, a: np.power(x, a.get("factor", 1.0)),
    "clip": lambda x, a: np.minimum(np.maximum(x, a.get("min", 0.0)), a.get("max", 0.0)),
    "relu6": lambda x, a: np.minimum(np.maximum(x, 0.0), a.get("threshold", 6.0)),
    "swish": lambda x, a: x / (1.0 + np.exp(-a.get("beta", 1.0) * x)),
    "silu": lambda x, a: x / (1.0 + np.exp(-x)),
    "elu": lambda x, a: np.where(x > 0, x, a.get("alpha", 1.0) * np.expm1(x)),
    "selu": _selu,
    "hard_swish": _hard_swish,
    "hard_sigmoid": lambda x, a: np.clip(a.get("slope", f32(0.2)) * x + a.get("offset", 0.5),
                                         0.0, 1.0),
    "softplus": lambda x, a: _softplus(x, a.get("beta", 1.0), a.get("threshold", 20.0)),
    "softsign": lambda x, a: x / (1.0 + np.abs(x)),
    "mish": _mish,
    "logsigmoid": lambda x, a: -np.logaddexp(0.0, -x),
}


def _unary(fn):
    def ref(inputs, attrs):
        x = inputs["X"][0]
        return {"Out": fn(x.astype(np.float64), attrs).astype(x.dtype)}
    return ref


def abs_op(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": np.abs(x)}


def hard_swish_grad(inputs, attrs):
    """Paddle's rule, which takes the slope above the threshold as 1 (not threshold / scale)."""
    x = inputs["X"][0].astype(np.float64)
    g = inputs["Out@GRAD"][0].astype(np.float64)
    threshold = attrs.get("threshold", 6.0)
    scale = attrs.get("scale", 6.0)
    offset = attrs.get("offset", 3.0)
    t = x + offset
    slope = np.where(t >= threshold, 1.0, np.where(t > 0, (2 * x + offset) / scale, 0.0))
    return {"X@GRAD": (g * slope).astype(inputs["X"][0].dtype)}


# ---- prelu ----------------------------------------------------------------------------------

def _prelu_alpha(x, alpha, attrs):
    """Alpha reshaped to broadcast against x."""
    mode = attrs.get("mode", "all")
    fmt = attrs.get("data_format", "NCHW")
    if mode == "all":
        return alpha.reshape(())
    if mode == "channel":
        shape = [1] * x.ndim
        shape[1 if fmt == "NCHW" else x.ndim - 1] = alpha.size
        return alpha.reshape(shape)
    assert mode == "element", mode
    return alpha.reshape((1,) + x.shape[1:])


def prelu(inputs, attrs):
    x, alpha = inputs["X"][0], inputs["Alpha"][0]
    a = _prelu_alpha(x, alpha.astype(np.float64), attrs)
    xd = x.astype(np.float64)
    return {"Out": np.where(xd > 0, xd, a * xd).astype(x.dtype)}


# ---- cumsum ---------------------------------------------------------------------------------

def _cumsum(x, attrs):
    if attrs.get("flatten", False):
        x = x.reshape(-1)
        axis = 0
    else:
        axis = attrs.get("axis", -1) % x.ndim
    if attrs.get("reverse", False):
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs.get("exclusive", False):
        out = out - x
    if attrs.get("reverse", False):
        out = np.flip(out, axis)
    return out


def cumsum(inputs, attrs):
    x = inputs["X"][0]
    if np.issubdtype(x.dtype, np.integer):
        return {"Out": _cumsum(x, attrs).astype(x.dtype)}
    return {"Out": _cumsum(x.astype(np.float64), attrs).astype(x.dtype)}


REFERENCES = {name: _unary(fn) for name, fn in _FORMULAS.items()}
REFERENCES.update({
    "abs": abs_op,
    "hard_swish_grad": hard_swish_grad,
    "prelu": prelu,
    "cumsum": cumsum,
})
