"""NumPy reference for the rnn op, written one sequence and one step at a time from the cell
equations (cuDNN's, which Paddle's rnn op and paddle.nn.LSTM / GRU / SimpleRNN share):

  LSTM  i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh)
        c' = sigmoid(f) c + sigmoid(i) tanh(g);  h' = sigmoid(o) tanh(c')
  GRU   r = sigmoid(x_r + h_r);  z = sigmoid(x_z + h_z);  n = tanh(x_n + r h_n)
        h' = (1 - z) n + z h     with x_* = W_ih x + b_ih and h_* = W_hh h + b_hh, split in 3
  RNN   h' = tanh or relu(W_ih x + b_ih + W_hh h + b_hh)

A sequence of length n runs steps 0..n-1 forward and n-1..0 in reverse; later steps output
zeros and the final state is the one after its last processed step."""
import numpy as np


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    gx = w_ih @ x + b_ih
    gh = w_hh @ h + b_hh
    if mode == "LSTM":
        i, f, g, o = np.split(gx + gh, 4)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    if mode == "GRU":
        xr, xz, xn = np.split(gx, 3)
        hr, hz, hn = np.split(gh, 3)
        r = _sigmoid(xr + hr)
        z = _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        return (1.0 - z) * n + z * h, c
    if mode == "RNN_TANH":
        return np.tanh(gx + gh), c
    return np.maximum(gx + gh, 0.0), c


def rnn(inputs, attrs):
    x = inputs["Input"][0]
    dtype = x.dtype
    mode = attrs.get("mode", "LSTM")
    layers = attrs.get("num_layers", 1)
    dirs = 2 if attrs.get("is_bidirec", False) else 1
    hidden = attrs["hidden_size"]
    steps, batch, _ = x.shape
    weights = [w.astype(np.float64) for w in inputs["WeightList"]]
    pre = [s.astype(np.float64) for s in inputs["PreState"]]
    lengths = inputs.get("SequenceLength")
    lengths = [int(v) for v in lengths[0]] if lengths else [steps] * batch
    n_weights = 2 * layers * dirs
    last_h = np.zeros((layers * dirs, batch, hidden))
    last_c = np.zeros((layers * dirs, batch, hidden))
    layer_in = x.astype(np.float64)
    for layer in range(layers):
        out = np.zeros((steps, batch, dirs * hidden))
        for d in range(dirs):
            cell = layer * dirs + d
            w_ih, w_hh = weights[2 * cell], weights[2 * cell + 1]
            b_ih, b_hh = weights[n_weights + 2 * cell], weights[n_weights + 2 * cell + 1]
            for b in range(batch):
                h = pre[0][cell, b].copy()
                c = pre[1][cell, b].copy() if mode == "LSTM" else None
                order = range(lengths[b]) if d == 0 else range(lengths[b] - 1, -1, -1)
                for t in order:
                    h, c = _cell(mode, layer_in[t, b], h, c, w_ih, w_hh, b_ih, b_hh)
                    out[t, b, d * hidden:(d + 1) * hidden] = h
                last_h[cell, b] = h
                if mode == "LSTM":
                    last_c[cell, b] = c
        layer_in = out
    state = [last_h, last_c] if mode == "LSTM" else [last_h]
    return {"Out": layer_in.astype(dtype), "State": [s.astype(dtype) for s in state]}


REFERENCES = {
    "rnn": rnn,
}
