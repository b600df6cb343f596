"""NumPy references for adagrad, rmsprop, lamb, adamax and clip_by_norm, written from Paddle's update
formulas in float64 (see ref_optimizer.py for the conventions; float32 attribute defaults are
rounded as Paddle stores them).
"""
import numpy as np


def _f32(x):
    return float(np.float32(x))


def _scalar(a):
    return float(np.asarray(a, dtype=np.float64).reshape(-1)[0])


def _f64(inputs, slot):
    return inputs[slot][0].astype(np.float64)


def adagrad(inputs, attrs):
    dt = inputs["Param"][0].dtype
    p, g, m = _f64(inputs, "Param"), _f64(inputs, "Grad"), _f64(inputs, "Moment")
    lr = _scalar(inputs["LearningRate"][0])
    eps = attrs.get("epsilon", _f32(1e-6))
    m_out = m + g * g
    p_out = p - lr * g / (np.sqrt(m_out) + eps)
    return {"ParamOut": p_out.astype(dt), "MomentOut": m_out.astype(dt)}


def rmsprop(inputs, attrs):
    dt = inputs["Param"][0].dtype
    p, g = _f64(inputs, "Param"), _f64(inputs, "Grad")
    mom, ms = _f64(inputs, "Moment"), _f64(inputs, "MeanSquare")
    lr = _scalar(inputs["LearningRate"][0])
    rho = attrs.get("decay", _f32(0.9))
    eps = attrs.get("epsilon", _f32(1e-10))
    momentum = attrs.get("momentum", 0.0)
    ms_out = rho * ms + (1 - rho) * g * g
    out = {}
    if attrs.get("centered", False):
        mg_out = rho * _f64(inputs, "MeanGrad") + (1 - rho) * g
        mom_out = momentum * mom + lr * g / np.sqrt(ms_out - mg_out * mg_out + eps)
        out["MeanGradOut"] = mg_out.astype(dt)
    else:
        mom_out = momentum * mom + lr * g / np.sqrt(ms_out + eps)
    out.update({"ParamOut": (p - mom_out).astype(dt), "MomentOut": mom_out.astype(dt),
                "MeanSquareOut": ms_out.astype(dt)})
    return out


def lamb(inputs, attrs):
    dt = inputs["Param"][0].dtype
    p, g = _f64(inputs, "Param"), _f64(inputs, "Grad")
    m1, m2 = _f64(inputs, "Moment1"), _f64(inputs, "Moment2")
    lr = _scalar(inputs["LearningRate"][0])
    b1p, b2p = _scalar(inputs["Beta1Pow"][0]), _scalar(inputs["Beta2Pow"][0])
    beta1 = attrs.get("beta1", _f32(0.9))
    beta2 = attrs.get("beta2", _f32(0.999))
    eps = attrs.get("epsilon", _f32(1e-6))
    wd = attrs.get("weight_decay", _f32(0.01))
    m1_out = beta1 * m1 + (1 - beta1) * g
    m2_out = beta2 * m2 + (1 - beta2) * g * g
    r = (m1_out / (1 - b1p)) / (np.sqrt(m2_out / (1 - b2p)) + eps) + wd * p
    p_norm = np.sqrt(np.sum(p * p))
    r_norm = np.sqrt(np.sum(r * r))
    trust = p_norm / r_norm if p_norm > 0 and r_norm > 0 else 1.0
    pow_dt = inputs["Beta1Pow"][0].dtype
    return {
        "ParamOut": (p - lr * trust * r).astype(dt),
        "Moment1Out": m1_out.astype(dt),
        "Moment2Out": m2_out.astype(dt),
        "Beta1PowOut": np.array([b1p * beta1], dtype=pow_dt),
        "Beta2PowOut": np.array([b2p * beta2], dtype=pow_dt),
    }


def adamax(inputs, attrs):
    dt = inputs["Param"][0].dtype
    p, g = _f64(inputs, "Param"), _f64(inputs, "Grad")
    m, u = _f64(inputs, "Moment"), _f64(inputs, "InfNorm")
    lr = _scalar(inputs["LearningRate"][0])
    b1p = _scalar(inputs["Beta1Pow"][0])
    beta1 = attrs.get("beta1", _f32(0.9))
    beta2 = attrs.get("beta2", _f32(0.999))
    eps = attrs.get("epsilon", _f32(1e-8))
    m_out = beta1 * m + (1 - beta1) * g
    u_out = np.maximum(beta2 * u + eps, np.abs(g))
    p_out = p - lr / (1 - b1p) * m_out / u_out
    return {"ParamOut": p_out.astype(dt), "MomentOut": m_out.astype(dt),
            "InfNormOut": u_out.astype(dt)}


def clip_by_norm(inputs, attrs):
    x = inputs["X"][0]
    xd = x.astype(np.float64)
    norm = np.sqrt(np.sum(xd * xd))
    max_norm = attrs.get("max_norm", 1.0)
    out = xd * (max_norm / norm) if norm > max_norm else xd
    return {"Out": out.astype(x.dtype)}


REFERENCES = {
    "adagrad": adagrad,
    "rmsprop": rmsprop,
    "lamb": lamb,
    "adamax": adamax,
    "clip_by_norm": clip_by_norm,
}
