"""Per-op kernel time of Fleet against PyTorch, side by side, in one run.

Each case is one op at the layer sizes of a small real model. Fleet's kernel runs through the
plugin ABI as the executor calls it (build/bin/fleet_op_bench: prepared once, then launched);
PyTorch runs the equivalent call on tensors of the same shapes and dtype. The two are run
alternately `--runs` times; each run times `--iters` calls after a warm-up, one call at a time
(on a GPU each call is followed by a synchronise on both sides, and TF32 is off for torch, as
Fleet's kernels compute float32 in float32). The table gives the median
microseconds per call of each and the ratio torch/fleet (above 1: Fleet is faster).

  /usr/bin/python3 bench/ops.py [--device cpu|cuda] [--threads 1] [--runs 5] [--iters 200]
                                [--only NAME,...] [--build build]

On the CPU, PyTorch needs a real BLAS (scripts/install-bench-deps.sh, see train_throughput.py);
on a GPU it needs a CUDA build of PyTorch. A case whose op this build of Fleet does not have is
listed as "no kernel" rather than failing the run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def f32(*dims, low=-1.0, high=1.0):
    return {"dims": list(dims), "dtype": "float32", "low": low, "high": high}


def i64(*dims, high):
    return {"dims": list(dims), "dtype": "int64", "low": 0, "high": high}


def cases(torch, F):
    """(name, fleet spec, torch builder): the builder takes a device and returns a no-argument
    callable doing the op on tensors it made once."""
    def rand(dev, *dims):
        return torch.rand(*dims, device=dev) * 2 - 1

    def ids(dev, n, high):
        return torch.randint(0, high, (n,), device=dev)

    return [
        ("softmax 256x1024", {"type": "softmax", "attrs": {"axis": -1},
                              "inputs": {"X": [f32(256, 1024)]}},
         lambda d: (lambda x: lambda: torch.softmax(x, -1))(rand(d, 256, 1024))),
        ("elementwise_add 256x1024 + 1024",
         {"type": "elementwise_add", "attrs": {"axis": -1},
          "inputs": {"X": [f32(256, 1024)], "Y": [f32(1024)]}},
         lambda d: (lambda x, y: lambda: x + y)(rand(d, 256, 1024), rand(d, 1024))),
        ("matmul_v2 512x512x512", {"type": "matmul_v2",
                                   "inputs": {"X": [f32(512, 512)], "Y": [f32(512, 512)]}},
         lambda d: (lambda x, y: lambda: x @ y)(rand(d, 512, 512), rand(d, 512, 512))),
        ("conv2d 32x64x32x32 k3 p1", {"type": "conv2d",
                                      "attrs": {"strides": [1, 1], "paddings": [1, 1]},
                                      "inputs": {"Input": [f32(32, 64, 32, 32)],
                                                 "Filter": [f32(64, 64, 3, 3)]}},
         lambda d: (lambda x, w: lambda: F.conv2d(x, w, padding=1))(
             rand(d, 32, 64, 32, 32), rand(d, 64, 64, 3, 3))),
        ("lookup_table_v2 100000x64, 8192 ids",
         {"type": "lookup_table_v2", "inputs": {"W": [f32(100000, 64)],
                                                "Ids": [i64(8192, high=100000)]}},
         lambda d: (lambda w, i: lambda: F.embedding(i, w))(rand(d, 100000, 64),
                                                            ids(d, 8192, 100000))),
        ("layer_norm 256x1024", {"type": "layer_norm", "attrs": {"begin_norm_axis": 1},
                                 "inputs": {"X": [f32(256, 1024)], "Scale": [f32(1024)],
                                            "Bias": [f32(1024)]}},
         lambda d: (lambda x, g, b: lambda: F.layer_norm(x, (1024,), g, b))(
             rand(d, 256, 1024), rand(d, 1024), rand(d, 1024))),
        ("reduce_max 256x4096 dim 1", {"type": "reduce_max", "attrs": {"dim": [1]},
                                       "inputs": {"X": [f32(256, 4096)]}},
         lambda d: (lambda x: lambda: torch.amax(x, 1))(rand(d, 256, 4096))),
        ("cumsum 64x4096 axis 1", {"type": "cumsum", "attrs": {"axis": 1},
                                   "inputs": {"X": [f32(64, 4096)]}},
         lambda d: (lambda x: lambda: torch.cumsum(x, 1))(rand(d, 64, 4096))),
        ("gather 100000x64, 8192 rows", {"type": "gather",
                                         "inputs": {"X": [f32(100000, 64)],
                                                    "Index": [i64(8192, high=100000)]}},
         lambda d: (lambda x, i: lambda: torch.index_select(x, 0, i))(
             rand(d, 100000, 64), ids(d, 8192, 100000))),
        ("scatter 100000x64, 8192 rows", {"type": "scatter",
                                          "inputs": {"X": [f32(100000, 64)],
                                                     "Ids": [i64(8192, high=100000)],
                                                     "Updates": [f32(8192, 64)]}},
         lambda d: (lambda x, i, u: lambda: x.index_copy(0, i, u))(
             rand(d, 100000, 64), ids(d, 8192, 100000), rand(d, 8192, 64))),
        ("tile 64x256 by 4x4", {"type": "tile", "attrs": {"repeat_times": [4, 4]},
                                "inputs": {"X": [f32(64, 256)]}},
         lambda d: (lambda x: lambda: torch.tile(x, (4, 4)))(rand(d, 64, 256))),
        ("argsort 256x1024", {"type": "argsort", "attrs": {"axis": -1},
                              "inputs": {"X": [f32(256, 1024)]}},
         lambda d: (lambda x: lambda: torch.sort(x, dim=-1, stable=True))(rand(d, 256, 1024))),
        ("tril_triu 16x512x512", {"type": "tril_triu", "attrs": {"lower": True},
                                  "inputs": {"X": [f32(16, 512, 512)]}},
         lambda d: (lambda x: lambda: torch.tril(x))(rand(d, 16, 512, 512))),
        ("softplus 256x4096", {"type": "softplus", "inputs": {"X": [f32(256, 4096)]}},
         lambda d: (lambda x: lambda: F.softplus(x))(rand(d, 256, 4096))),
        ("bilinear_interp_v2 16x64x32x32 -> 64x64",
         {"type": "bilinear_interp_v2", "attrs": {"out_h": 64, "out_w": 64, "align_corners": True},
          "inputs": {"X": [f32(16, 64, 32, 32)]}},
         lambda d: (lambda x: lambda: F.interpolate(x, size=(64, 64), mode="bilinear",
                                                    align_corners=True))(
             rand(d, 16, 64, 32, 32))),
        ("group_norm 32x64x32x32, 8 groups",
         {"type": "group_norm", "attrs": {"groups": 8},
          "inputs": {"X": [f32(32, 64, 32, 32)], "Scale": [f32(64)], "Bias": [f32(64)]}},
         lambda d: (lambda x, g, b: lambda: F.group_norm(x, 8, g, b))(
             rand(d, 32, 64, 32, 32), rand(d, 64), rand(d, 64))),
        ("adaptive avg pool2d 32x64x32x32 -> 7x7",
         {"type": "pool2d", "attrs": {"pooling_type": "avg", "ksize": [7, 7], "adaptive": True},
          "inputs": {"X": [f32(32, 64, 32, 32)]}},
         lambda d: (lambda x: lambda: F.adaptive_avg_pool2d(x, (7, 7)))(rand(d, 32, 64, 32, 32))),
        ("conv2d_transpose 32x64x16x16 k4 s2 p1",
         {"type": "conv2d_transpose", "attrs": {"strides": [2, 2], "paddings": [1, 1]},
          "inputs": {"Input": [f32(32, 64, 16, 16)], "Filter": [f32(64, 64, 4, 4)]}},
         lambda d: (lambda x, w: lambda: F.conv_transpose2d(x, w, stride=2, padding=1))(
             rand(d, 32, 64, 16, 16), rand(d, 64, 64, 4, 4))),
        *rnn_cases(torch, rand),
        *sequence_cases(torch),
        ("less_than 256x4096", {"type": "less_than",
                                "inputs": {"X": [f32(256, 4096)], "Y": [f32(256, 4096)]}},
         lambda d: (lambda x, y: lambda: x < y)(rand(d, 256, 4096), rand(d, 256, 4096))),
    ]


def sequence_cases(torch):
    """Sequence ops on a CTR-sized batch: 4096 sequences of 0 to 16 rows of 64 floats. Fleet
    gets the offsets; torch gets the same lengths as a tensor and does what a PyTorch user writes
    for ragged rows: index_add_ over per-row segment ids (made once, as Fleet's offsets are), and
    for the ops whose result has new offsets, index tensors built from the lengths at every call
    (Fleet makes the output's offsets at every call too)."""
    import random
    rng = random.Random(5)
    seqs, width = 4096, 64
    la = [rng.randint(0, 16) for _ in range(seqs)]
    lb = [rng.randint(0, 16) for _ in range(seqs)]

    def offsets(lengths):
        out = [0]
        for n in lengths:
            out.append(out[-1] + n)
        return out

    lod_a, lod_b = offsets(la), offsets(lb)
    start = [rng.randint(0, n) for n in la]
    take = [rng.randint(0, n - o) for n, o in zip(la, start)]
    pad = 16

    def seq(lod):
        spec = f32(lod[-1], width)
        spec["lod"] = lod
        return spec

    def given(values, *dims):
        spec = i64(*dims, high=1)
        spec["values"] = values
        return spec

    def prepared(d):
        t = lambda v: torch.tensor(v, device=d)
        a = torch.rand(lod_a[-1], width, device=d)
        b = torch.rand(lod_b[-1], width, device=d)
        return a, b, t(la), t(lb), t(lod_a), t(lod_b), t(start), t(take)

    def pool(d):
        a, _, la_t, *_ = prepared(d)
        segment = torch.repeat_interleave(torch.arange(seqs, device=d), la_t)
        return lambda: torch.zeros(seqs, width, device=d).index_add_(0, segment, a)

    def concat(d):
        a, b, la_t, lb_t, lod_a_t, lod_b_t, *_ = prepared(d)

        def run():
            both = la_t + lb_t
            out_start = torch.cumsum(both, 0) - both
            rows_a = torch.arange(a.shape[0], device=d)
            rows_b = torch.arange(b.shape[0], device=d)
            to_a = (torch.repeat_interleave(out_start, la_t) + rows_a
                    - torch.repeat_interleave(lod_a_t[:-1], la_t))
            to_b = (torch.repeat_interleave(out_start + la_t, lb_t) + rows_b
                    - torch.repeat_interleave(lod_b_t[:-1], lb_t))
            out = torch.empty(a.shape[0] + b.shape[0], width, device=d)
            out.index_copy_(0, to_a, a)
            out.index_copy_(0, to_b, b)
            return out
        return run

    def slice_(d):
        a, _, _, _, lod_a_t, _, start_t, take_t = prepared(d)

        def run():
            first = torch.repeat_interleave(lod_a_t[:-1] + start_t, take_t)
            out_start = torch.repeat_interleave(torch.cumsum(take_t, 0) - take_t, take_t)
            rows = torch.arange(first.shape[0], device=d)
            return a.index_select(0, first + rows - out_start)
        return run

    def unpad(d):
        x = torch.rand(seqs, pad, width, device=d)
        lengths = torch.tensor(la, device=d)
        steps = torch.arange(pad, device=d)
        return lambda: x[steps[None, :] < lengths[:, None]]

    rows = f"{seqs} seqs x {width}"
    return [
        (f"sequence_pool SUM {rows}", {"type": "sequence_pool", "attrs": {"pooltype": "SUM"},
                                      "inputs": {"X": [seq(lod_a)]}}, pool),
        (f"sequence_concat 2 of {rows}", {"type": "sequence_concat",
                                          "inputs": {"X": [seq(lod_a), seq(lod_b)]}}, concat),
        (f"sequence_slice {rows}", {"type": "sequence_slice",
                                    "inputs": {"X": [seq(lod_a)],
                                               "Offset": [given(start, seqs, 1)],
                                               "Length": [given(take, seqs, 1)]}}, slice_),
        (f"sequence_unpad {seqs}x{pad}x{width}", {"type": "sequence_unpad",
                                                  "inputs": {"X": [f32(seqs, pad, width)],
                                                             "Length": [given(la, seqs)]}},
         unpad),
    ]


def rnn_cases(torch, rand):
    """One-layer LSTM and GRU of a text classifier (T 50, batch 32, 128 -> 256): the forward op
    against torch.nn.LSTM / GRU, and the gradient op against torch.autograd.grad over the input,
    the initial states and the four weights of a graph built once."""
    steps, batch, inp, hid = 50, 32, 128, 256
    out = []
    for mode, gates in (("LSTM", 4), ("GRU", 3)):
        states = 2 if mode == "LSTM" else 1
        attrs = {"mode": mode, "input_size": inp, "hidden_size": hid}
        weights = [f32(gates * hid, inp), f32(gates * hid, hid), f32(gates * hid),
                   f32(gates * hid)]
        fwd_inputs = {"Input": [f32(steps, batch, inp)],
                      "PreState": [f32(1, batch, hid)] * states, "WeightList": weights}
        grad_inputs = dict(fwd_inputs)
        grad_inputs.update({"Out": [f32(steps, batch, hid)],
                            "Reserve": [f32(steps, batch, hid * (gates + 3), low=0.0)],
                            "Out@GRAD": [f32(steps, batch, hid)],
                            "State@GRAD": [f32(1, batch, hid)] * states})

        def layer(d, mode=mode):
            cls = torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU
            net = cls(inp, hid).to(d)
            x = rand(d, steps, batch, inp)
            h = tuple(rand(d, 1, batch, hid) for _ in range(2 if mode == "LSTM" else 1))
            return net, x, h if mode == "LSTM" else h[0]

        def forward(d):
            net, x, h = layer(d)
            return lambda: net(x, h)

        def backward(d):
            net, x, h = layer(d)
            leaves = [x.requires_grad_()] + [t.requires_grad_() for t in
                                              (h if isinstance(h, tuple) else (h,))]
            leaves += list(net.parameters())
            with torch.enable_grad():
                y, _ = net(x, h)
            gy = torch.rand_like(y)

            def run():
                with torch.enable_grad():
                    torch.autograd.grad(y, leaves, gy, retain_graph=True)
            return run

        label = f"{mode} T{steps} B{batch} {inp}->{hid}"
        out.append((f"rnn {label}", {"type": "rnn", "attrs": attrs, "inputs": fwd_inputs,
                                     "outputs": {"State": states}}, forward))
        out.append((f"rnn_grad {label}",
                    {"type": "rnn_grad", "attrs": attrs, "inputs": grad_inputs,
                     "outputs": {"Input@GRAD": 1, "PreState@GRAD": states,
                                 "WeightList@GRAD": 4}}, backward))
    return out


def fleet_time(exe, spec, device, threads, iters, warmup):
    r = subprocess.run([exe, "--device", device, "--threads", str(threads), "--iters",
                        str(iters), "--warmup", str(warmup), json.dumps(spec)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    return json.loads(r.stdout.strip().splitlines()[-1])["median_us"], None


def torch_time(torch, fn, device, iters, warmup):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    with torch.no_grad():
        for i in range(warmup + iters):
            t0 = time.perf_counter()
            fn()
            sync()
            t1 = time.perf_counter()
            if i >= warmup:
                times.append((t1 - t0) * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()

    exe = os.path.join(os.path.abspath(args.build), "bin", "fleet_op_bench")
    if not os.path.exists(exe):
        sys.exit(f"ops.py: {exe} is missing; build the target fleet_op_bench first")
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        sys.exit("ops.py: PyTorch is not installed (scripts/install-bench-deps.sh)")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("ops.py: this PyTorch has no CUDA device", file=sys.stderr)
        sys.exit(2)
    if args.device == "cuda":
        # Fleet's CUDA kernels do float32 in float32 (no TF32), so the peer does too.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    selected = [c for c in cases(torch, F)
                if not args.only or any(s in c[0] for s in args.only.split(","))]
    where = (torch.cuda.get_device_name(0) if args.device == "cuda"
             else f"CPU, {args.threads} thread(s)")
    print(f"{where}; torch {torch.__version__}; {args.runs} alternating runs of "
          f"{args.iters} calls after {args.warmup} warm-up; median us per call")
    print(f"{'case':40} {'fleet us':>10} {'torch us':>10} {'torch/fleet':>12}")
    for name, spec, build in selected:
        fn = build(args.device)
        fleet_runs, torch_runs, why = [], [], None
        for _ in range(args.runs):
            t, why = fleet_time(exe, spec, args.device, args.threads, args.iters, args.warmup)
            if t is None:
                break
            fleet_runs.append(t)
            torch_runs.append(torch_time(torch, fn, args.device, args.iters, args.warmup))
        if not fleet_runs:
            print(f"{name:40} {'no kernel':>10}   ({why})")
            continue
        f, t = statistics.median(fleet_runs), statistics.median(torch_runs)
        print(f"{name:40} {f:10.1f} {t:10.1f} {t / f:12.2f}")


if __name__ == "__main__":
    main()
