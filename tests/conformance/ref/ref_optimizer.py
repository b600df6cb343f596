"""NumPy references for the optimizer ops, written from Paddle's update formulas.

Everything is computed in float64 and cast to the parameter's dtype at the end; attributes the
op does not set take Paddle's defaults, which are float32 attributes (so 0.9 is float32(0.9)).
"""
import math

import numpy as np


def _f32(x):
    return float(np.float32(x))


def _scalar(a):
    return float(np.asarray(a, dtype=np.float64).reshape(-1)[0])


def sgd(inputs, attrs):
    p = inputs["Param"][0]
    g = inputs["Grad"][0].astype(np.float64)
    lr = _scalar(inputs["LearningRate"][0])
    return {"ParamOut": (p.astype(np.float64) - lr * g).astype(p.dtype)}


def momentum(inputs, attrs):
    p0 = inputs["Param"][0]
    p = p0.astype(np.float64)
    g = inputs["Grad"][0].astype(np.float64) * attrs.get("rescale_grad", 1.0)
    v = inputs["Velocity"][0].astype(np.float64)
    lr = _scalar(inputs["LearningRate"][0])
    mu = attrs.get("mu", _f32(0.9))
    if attrs.get("regularization_method", "") == "l2_decay":
        g = g + attrs.get("regularization_coeff", 0.0) * p
    v_out = mu * v + g
    if attrs.get("use_nesterov", False):
        p_out = p - (g + mu * v_out) * lr
    else:
        p_out = p - lr * v_out
    return {"ParamOut": p_out.astype(p0.dtype), "VelocityOut": v_out.astype(p0.dtype)}


def _adam(inputs, attrs, decoupled):
    p0 = inputs["Param"][0]
    p = p0.astype(np.float64)
    g = inputs["Grad"][0].astype(np.float64)
    m1 = inputs["Moment1"][0].astype(np.float64)
    m2 = inputs["Moment2"][0].astype(np.float64)
    lr = _scalar(inputs["LearningRate"][0])
    b1p = _scalar(inputs["Beta1Pow"][0])
    b2p = _scalar(inputs["Beta2Pow"][0])
    beta1 = attrs.get("beta1", _f32(0.9))
    beta2 = attrs.get("beta2", _f32(0.999))
    eps = attrs.get("epsilon", _f32(1e-8))
    if decoupled:
        lr = lr * attrs.get("lr_ratio", 1.0)
        if attrs.get("with_decay", False):
            p = p - lr * attrs.get("coeff", _f32(0.01)) * p
    m1_out = beta1 * m1 + (1 - beta1) * g
    m2_out = beta2 * m2 + (1 - beta2) * g * g
    # Bias correction folded into the rate and epsilon, as Paddle's kernel does.
    lr_t = lr * math.sqrt(1 - b2p) / (1 - b1p)
    p_out = p - lr_t * (m1_out / (np.sqrt(m2_out) + eps * math.sqrt(1 - b2p)))
    dt = p0.dtype
    pow_dt = inputs["Beta1Pow"][0].dtype
    return {
        "ParamOut": p_out.astype(dt),
        "Moment1Out": m1_out.astype(dt),
        "Moment2Out": m2_out.astype(dt),
        "Beta1PowOut": np.array([b1p * beta1], dtype=pow_dt),
        "Beta2PowOut": np.array([b2p * beta2], dtype=pow_dt),
    }


def adam(inputs, attrs):
    return _adam(inputs, attrs, False)


def adamw(inputs, attrs):
    return _adam(inputs, attrs, True)


def squared_l2_norm(inputs, attrs):
    x = inputs["X"][0]
    return {"Out": np.array([np.sum(x.astype(np.float64) ** 2)], dtype=x.dtype)}


def _schedule_at(attrs, step):
    kind = attrs.get("type", "constant")
    base = attrs.get("learning_rate", _f32(0.01))
    if kind == "constant":
        return base
    if kind == "piecewise":
        for b, v in zip(attrs["boundaries"], attrs["values"]):
            if step < b:
                return v
        return attrs["values"][-1]
    if kind == "exponential":
        e = step / attrs.get("decay_steps", 1)
        if attrs.get("staircase", False):
            e = math.floor(e)
        return base * attrs.get("gamma", 1.0) ** e
    if kind == "cosine":
        eta_min = attrs.get("eta_min", 0.0)
        t_max = attrs.get("T_max", 1)
        return eta_min + (base - eta_min) * (1 + math.cos(math.pi * step / t_max)) / 2
    if kind == "polynomial":
        steps = attrs.get("decay_steps", 1)
        end = attrs.get("end_learning_rate", _f32(0.0001))
        if attrs.get("cycle", False):
            steps = steps * max(math.ceil(step / steps), 1)
        else:
            step = min(step, steps)
        return (base - end) * (1 - step / steps) ** attrs.get("power", 1.0) + end
    if kind == "noam":
        t = step + 1  # Paddle 1.8's noam counter starts at 1
        warmup = attrs.get("noam_warmup_steps", 1)
        return base * attrs.get("d_model", 1.0) ** -0.5 * min(t ** -0.5, warmup ** -1.5 * t)
    if kind in ("natural_exp", "inverse_time"):
        e = step / attrs.get("decay_steps", 1)
        if attrs.get("staircase", False):
            e = math.floor(e)
        rate = attrs.get("decay_rate", 0.0)
        return base * math.exp(-rate * e) if kind == "natural_exp" else base / (1 + rate * e)
    raise ValueError("unknown schedule " + kind)


def lr_schedule(inputs, attrs):
    step = _scalar(inputs["Step"][0])
    warmup = attrs.get("warmup_steps", 0)
    if warmup > 0 and step < warmup:
        start, end = attrs.get("start_lr", 0.0), attrs.get("end_lr", 0.0)
        lr = start + (end - start) * step / warmup
    else:
        lr = _schedule_at(attrs, step - warmup)
    return {"Out": np.array([lr], dtype=np.float32)}


REFERENCES = {
    "sgd": sgd,
    "momentum": momentum,
    "adam": adam,
    "adamw": adamw,
    "squared_l2_norm": squared_l2_norm,
    "lr_schedule": lr_schedule,
}
