"""Training throughput of fleet-host against PyTorch, side by side.

For each case (network, batch, thread count) the two are run alternately, `--runs` times each,
on the same data (.npy files written once), with the same network, initialisation scheme and
optimizer; the table gives the median samples/s of each and the ratio fleet/torch.

  /usr/bin/python3 bench/train_throughput.py [--fleet-host build/bin/fleet-host] [--runs 5]

PyTorch must have a real BLAS: install Debian's OpenBLAS (scripts/install-bench-deps.sh) and
set OPENBLAS_CORETYPE to this CPU's kernel type (SkylakeX for AVX-512 machines, the default
here), or torch falls back to the reference BLAS and the comparison means nothing.

GPU mode, `--device cuda`: the cases are the wide MLP and the CNN of examples/cnn/cnn.fleet
(conv2d -> pool2d -> batch_norm -> fc on 8x8 single-channel images, batch 64 as in its
fleet.toml), fed from .npy files like the MLPs. Fleet runs with [device] backend = "cuda" in
the generated fleet.toml, the peers (bench/torch_mlp.py, bench/torch_cnn.py) with --device cuda:
model and whole data set on the GPU, TF32 off as in Fleet's CUDA kernels, timed region between
torch.cuda.synchronize() calls. Fleet copies each batch from host memory, the peers slice it on
the GPU, which favours torch slightly. Threads do not matter there, so one setting is run and
--threads is ignored; the GPU's name heads the table. It needs a PyTorch built with CUDA
(Debian's python3-torch is CPU-only: run this script with the python of a CUDA build, e.g. a
venv with the wheel from download.pytorch.org) and a fleet-host built with the cuda plugin
(FLEET_WITH_CUDA); when either cannot reach a GPU the script says which and exits with 2.

  python bench/train_throughput.py --device cuda [--runs 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASES = [
    # name, layer sizes, activation, batch
    ("quick-start MLP 32-128-128-2 tanh", [32, 128, 128, 2], "tanh", 128),
    ("wide MLP 784-1024-1024-10 relu", [784, 1024, 1024, 10], "relu", 256),
]

# The CNN of examples/cnn/cnn.fleet, written out here as the MLPs' programs are (and checked
# against that file, so a change there is noticed); bench/torch_cnn.py is its PyTorch twin.
CNN_EXAMPLE = os.path.join(ROOT, "examples", "cnn", "cnn.fleet")
CNN_IMAGE = [1, 8, 8]  # C, H, W of the data var "img" (shape=[-1, 1, 8, 8])
CNN_CLASSES = 4
CNN_BATCH = 64  # batch_size of examples/cnn/fleet.toml
CNN_NAME = "CNN conv8-pool-bn-fc4 8x8"


def program_text(sizes, act):
    lines = [f'x = data("x", shape=[-1, {sizes[0]}], dtype="float32")',
             'y = data("y", shape=[-1, 1], dtype="int64")', "h = x"]
    for width in sizes[1:-1]:
        lines.append(f'h = fc(h, size={width}, act="{act}")')
    lines += [f'prediction = fc(h, size={sizes[-1]}, act="softmax")',
              "cost = cross_entropy(prediction, y)",
              "avg_cost = mean(cost)",
              "minimize(avg_cost, optimizer=sgd(learning_rate=0.01))"]
    return "\n".join(lines) + "\n"


def cnn_program_text():
    c, h, w = CNN_IMAGE
    lines = [f'img = data("img", shape=[-1, {c}, {h}, {w}], dtype="float32")',
             'label = data("label", shape=[-1, 1], dtype="int64")',
             'conv = conv2d(img, num_filters=8, filter_size=3, padding=1, act="relu")',
             'pool = pool2d(conv, pool_size=2, pool_type="max", pool_stride=2)',
             'bn = batch_norm(pool, act="relu")',
             f'prediction = fc(bn, size={CNN_CLASSES}, act="softmax")',
             "cost = cross_entropy(prediction, label)",
             "avg_cost = mean(cost)",
             "minimize(avg_cost, optimizer=sgd(learning_rate=0.05))"]
    return "\n".join(lines) + "\n"


def check_cnn_example():
    try:
        with open(CNN_EXAMPLE) as f:
            code = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        return
    if code != cnn_program_text().splitlines():
        print(f"note: {os.path.relpath(CNN_EXAMPLE, ROOT)} is no longer the CNN this benchmark "
              "and bench/torch_cnn.py run; update both to compare the new one", file=sys.stderr)


def make_data(work, sizes, batch, batches, shape=None):
    # sizes: the MLP's layer sizes (input width first, classes last); shape: the per-sample
    # shape of the input when it is not [sizes[0]] (the CNN's [C, H, W]).
    shape = list(shape or [sizes[0]])
    features = int(np.prod(shape))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((batch * batches, *shape), dtype=np.float32)
    teacher = rng.standard_normal((features, sizes[-1])).astype(np.float32)
    y = np.argmax(x.reshape(len(x), features) @ teacher, axis=1).astype(np.int64).reshape(-1, 1)
    xp, yp = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xp, x)
    np.save(yp, y)
    return xp, yp


def fleet_config(args, metrics, batch, threads, files):
    device = '\n[device]\nbackend = "cuda"\n' if args.device == "cuda" else ""
    feeds = "".join(f'{name} = "{path}"\n' for name, path in files)
    return f"""[train]
steps = {args.warmup + args.steps}
batch_size = {batch}
threads = {threads}
log_every = {args.warmup}
metrics_file = "{metrics}"
{device}
[data]
source = "npy"

[data.files]
{feeds}"""


def run_fleet(args, work, text, batch, threads, files):
    prog = os.path.join(work, "net.fleet")
    with open(prog, "w") as f:
        f.write(text)
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cfg = os.path.join(work, "fleet.toml")
    with open(cfg, "w") as f:
        f.write(fleet_config(args, metrics, batch, threads, files))
    subprocess.run([args.fleet_host, "--config", cfg, "run", prog], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    with open(metrics) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    first = next(r for r in recs if r["step"] >= args.warmup)
    last = recs[-1]
    return (last["step"] - first["step"]) * batch / (last["elapsed_s"] - first["elapsed_s"])


def run_torch_once(args, peer, batch, torch_threads, blas_threads, xp, yp):
    # peer: the script and its network arguments, e.g. ["torch_mlp.py", "--sizes", ...].
    env = dict(os.environ, OMP_NUM_THREADS=str(torch_threads),
               OPENBLAS_NUM_THREADS=str(blas_threads))
    env.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    try:
        out = subprocess.run(
            [sys.executable, os.path.join(HERE, peer[0]), "--x", xp, "--y", yp, *peer[1:],
             "--batch", str(batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
             "--threads", str(torch_threads), "--device", args.device],
            check=True, capture_output=True, text=True, env=env)
    except subprocess.CalledProcessError as e:
        sys.stderr.write(e.stderr)  # the peer's traceback, which capture_output would hide
        raise
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_sec"]


def run_torch(args, peer, batch, threads, xp, yp):
    # torch's own OpenMP pool and OpenBLAS's pthreads spin against each other when both get
    # several threads (on two cores that halves torch's speed), so with more than one thread
    # torch is measured both ways — its pool with a serial BLAS, and a serial torch with a
    # threaded BLAS — and keeps the better.
    if threads == 1:
        return run_torch_once(args, peer, batch, 1, 1, xp, yp)
    return max(run_torch_once(args, peer, batch, threads, 1, xp, yp),
               run_torch_once(args, peer, batch, 1, threads, xp, yp))


def mlp_case(name, sizes, act, batch):
    peer = ["torch_mlp.py", "--sizes", ",".join(map(str, sizes)), "--act", act]
    return name, program_text(sizes, act), sizes, None, batch, peer, ("x", "y")


def cnn_case():
    peer = ["torch_cnn.py", "--classes", str(CNN_CLASSES)]
    return (CNN_NAME, cnn_program_text(), [*CNN_IMAGE, CNN_CLASSES], CNN_IMAGE, CNN_BATCH, peer,
            ("img", "label"))


def cuda_preflight(args, work):
    """Prints the GPU line of the report, or says why there is no GPU run and exits with 2."""
    try:
        import torch
    except ImportError as e:
        print(f"--device cuda: {sys.executable} cannot import torch ({e}); run this script "
              "with the python of a CUDA build of PyTorch", file=sys.stderr)
        sys.exit(2)
    if torch.version.cuda is None:
        print(f"--device cuda: the PyTorch of {sys.executable} (torch {torch.__version__}) is "
              "built without CUDA (Debian's python3-torch is CPU-only); run this script with "
              "the python of a CUDA build, e.g. a venv with the wheel from "
              "download.pytorch.org", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print(f"--device cuda: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no "
              "usable GPU on this machine (no device, or no/too old a driver)", file=sys.stderr)
        sys.exit(2)
    gpu = torch.cuda.get_device_name(0)

    # fleet-host's `check` loads the device plugin the config selects and asks it for devices.
    cfg = os.path.join(work, "check.toml")
    with open(cfg, "w") as f:
        f.write('[device]\nbackend = "cuda"\n')
    try:
        res = subprocess.run([args.fleet_host, "--config", cfg, "check"],
                             capture_output=True, text=True)
    except OSError as e:
        print(f"--device cuda: cannot run {args.fleet_host}: {e}", file=sys.stderr)
        sys.exit(2)
    if res.returncode != 0:
        why = (res.stderr.strip() or res.stdout.strip() or f"exit status {res.returncode}")
        hint = ("fleet-host has no cuda plugin: build it with FLEET_WITH_CUDA=ON (needs the CUDA "
                "toolkit and cuDNN)" if "not found" in why else
                "fleet-host's cuda plugin sees no usable GPU (no device, or no/too old a driver)")
        print(f"--device cuda: {args.fleet_host} cannot train on a CUDA device here:\n  "
              + why.replace("\n", "\n  ") + f"\n{hint}", file=sys.stderr)
        sys.exit(2)
    fleet_device = next((line.split(":", 1)[1].strip() for line in res.stdout.splitlines()
                         if line.startswith("device:")), "cuda")
    print(f"GPU: {gpu} (torch {torch.__version__}, CUDA {torch.version.cuda}; "
          f"fleet-host: {fleet_device})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fleet-host", default=os.path.join(ROOT, "build", "bin", "fleet-host"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--threads", default="1,2", help="CPU thread counts (ignored with cuda)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cpu: the MLPs at each thread count; cuda: the wide MLP and the CNN "
                        "on the GPU")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as work:
        if args.device == "cuda":
            cuda_preflight(args, work)
            check_cnn_example()
            cases = [mlp_case(*CASES[1]), cnn_case()]
            thread_counts = [1]
            print(f"{args.runs} alternating runs, {args.steps} timed steps after {args.warmup} "
                  "warm-up")
        else:
            cases = [mlp_case(*c) for c in CASES]
            thread_counts = [int(t) for t in args.threads.split(",")]
            print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'SkylakeX')}, "
                  f"{args.runs} alternating runs, {args.steps} timed steps after {args.warmup} "
                  "warm-up")
        print(f"{'case':40} {'thr':>3} {'fleet samples/s':>16} {'torch samples/s':>16} "
              f"{'ratio':>6}")
        for name, text, sizes, shape, batch, peer, feeds in cases:
            xp, yp = make_data(work, sizes, batch, 16, shape)
            files = list(zip(feeds, (xp, yp)))
            for threads in thread_counts:
                fleet, torch = [], []
                for _ in range(args.runs):
                    fleet.append(run_fleet(args, work, text, batch, threads, files))
                    torch.append(run_torch(args, peer, batch, threads, xp, yp))
                f, t = statistics.median(fleet), statistics.median(torch)
                print(f"{name:40} {threads:>3} {f:16.0f} {t:16.0f} {f / t:6.2f}", flush=True)


if __name__ == "__main__":
    main()
