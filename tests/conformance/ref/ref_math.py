"""NumPy references for the math ops (see run_reference.py for the calling convention)."""
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


REFERENCES = {
    "scale": scale,
}
