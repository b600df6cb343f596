"""NumPy reference for conv2d_transpose, written as a scatter: every Input pixel adds its
value times the filter onto the Output canvas at stride spacing, and the canvas is then cropped
by the leading paddings to the Output size (output_size, or the natural size plus
output_padding)."""
import numpy as np


def _transpose_window(attrs, in_hw, k_hw):
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("paddings", [0, 0]))
    if len(pads) == 2:
        pads = [pads[0], pads[0], pads[1], pads[1]]
    begin, end = [pads[0], pads[2]], [pads[1], pads[3]]
    algo = attrs.get("padding_algorithm", "EXPLICIT")
    for i in range(2):
        if algo == "SAME":
            dil[i] = 1
            out = -(-in_hw[i] // strides[i])
            total = max((out - 1) * strides[i] + k_hw[i] - in_hw[i], 0)
            begin[i], end[i] = total // 2, total - total // 2
        elif algo == "VALID":
            begin[i] = end[i] = 0
    return strides, dil, begin, end


def conv2d_transpose(inputs, attrs):
    x = inputs["Input"][0]
    f = inputs["Filter"][0]
    groups = attrs.get("groups", 1)
    n, cin, h, w = x.shape
    _, cout_g, kh, kw = f.shape
    s, d, pb, pe = _transpose_window(attrs, (h, w), (kh, kw))
    sizes = []
    for i, (size, k) in enumerate(((h, kh), (w, kw))):
        natural = (size - 1) * s[i] - pb[i] - pe[i] + d[i] * (k - 1) + 1
        if attrs.get("output_size"):
            natural = attrs["output_size"][i]
        elif attrs.get("output_padding"):
            natural += attrs["output_padding"][i]
        sizes.append(natural)
    span = [d[0] * (kh - 1) + 1, d[1] * (kw - 1) + 1]
    canvas_h = max((h - 1) * s[0] + span[0], pb[0] + sizes[0])
    canvas_w = max((w - 1) * s[1] + span[1], pb[1] + sizes[1])
    canvas = np.zeros((n, cout_g * groups, canvas_h, canvas_w), dtype=np.float64)
    cin_g = cin // groups
    xd, fd = x.astype(np.float64), f.astype(np.float64)
    for g in range(groups):
        src = slice(g * cin_g, (g + 1) * cin_g)
        dst = slice(g * cout_g, (g + 1) * cout_g)
        for i in range(h):
            for j in range(w):
                piece = np.einsum("nc,cokl->nokl", xd[:, src, i, j], fd[src])
                canvas[:, dst, i * s[0]:i * s[0] + span[0]:d[0],
                       j * s[1]:j * s[1] + span[1]:d[1]] += piece
    out = canvas[:, :, pb[0]:pb[0] + sizes[0], pb[1]:pb[1] + sizes[1]]
    return {"Output": out.astype(x.dtype)}


REFERENCES = {
    "conv2d_transpose": conv2d_transpose,
}
