"""Training throughput of fleet-host against PyTorch, side by side.

For each case (network, batch, thread count) the two are run alternately, `--runs` times each,
on the same data (.npy files written once), with the same network, initialisation scheme and
optimizer; the table gives the median samples/s of each and the ratio fleet/torch.

  /usr/bin/python3 bench/train_throughput.py [--fleet-host build/bin/fleet-host] [--runs 5]

PyTorch must have a real BLAS: install Debian's OpenBLAS (scripts/install-bench-deps.sh) and
set OPENBLAS_CORETYPE to this CPU's kernel type (SkylakeX for AVX-512 machines, the default
here), or torch falls back to the reference BLAS and the comparison means nothing.
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


def make_data(work, sizes, batch, batches):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((batch * batches, sizes[0]), dtype=np.float32)
    teacher = rng.standard_normal((sizes[0], sizes[-1])).astype(np.float32)
    y = np.argmax(x @ teacher, axis=1).astype(np.int64).reshape(-1, 1)
    xp, yp = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xp, x)
    np.save(yp, y)
    return xp, yp


def run_fleet(args, work, sizes, act, batch, threads, xp, yp):
    prog = os.path.join(work, "net.fleet")
    with open(prog, "w") as f:
        f.write(program_text(sizes, act))
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cfg = os.path.join(work, "fleet.toml")
    with open(cfg, "w") as f:
        f.write(f"""[train]
steps = {args.warmup + args.steps}
batch_size = {batch}
threads = {threads}
log_every = {args.warmup}
metrics_file = "{metrics}"

[data]
source = "npy"

[data.files]
x = "{xp}"
y = "{yp}"
""")
    subprocess.run([args.fleet_host, "--config", cfg, "run", prog], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    with open(metrics) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    first = next(r for r in recs if r["step"] >= args.warmup)
    last = recs[-1]
    return (last["step"] - first["step"]) * batch / (last["elapsed_s"] - first["elapsed_s"])


def run_torch_once(args, sizes, act, batch, torch_threads, blas_threads, xp, yp):
    env = dict(os.environ, OMP_NUM_THREADS=str(torch_threads),
               OPENBLAS_NUM_THREADS=str(blas_threads))
    env.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "torch_mlp.py"), "--x", xp, "--y", yp,
         "--sizes", ",".join(map(str, sizes)), "--act", act, "--batch", str(batch),
         "--steps", str(args.steps), "--warmup", str(args.warmup),
         "--threads", str(torch_threads)],
        check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_sec"]


def run_torch(args, sizes, act, batch, threads, xp, yp):
    # torch's own OpenMP pool and OpenBLAS's pthreads spin against each other when both get
    # several threads (on two cores that halves torch's speed), so with more than one thread
    # torch is measured both ways — its pool with a serial BLAS, and a serial torch with a
    # threaded BLAS — and keeps the better.
    if threads == 1:
        return run_torch_once(args, sizes, act, batch, 1, 1, xp, yp)
    return max(run_torch_once(args, sizes, act, batch, threads, 1, xp, yp),
               run_torch_once(args, sizes, act, batch, 1, threads, xp, yp))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fleet-host", default=os.path.join(ROOT, "build", "bin", "fleet-host"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--threads", default="1,2")
    args = p.parse_args()

    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'SkylakeX')}, "
          f"{args.runs} alternating runs, {args.steps} timed steps after {args.warmup} warm-up")
    print(f"{'case':40} {'thr':>3} {'fleet samples/s':>16} {'torch samples/s':>16} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as work:
        for name, sizes, act, batch in CASES:
            xp, yp = make_data(work, sizes, batch, 16)
            for threads in [int(t) for t in args.threads.split(",")]:
                fleet, torch = [], []
                for _ in range(args.runs):
                    fleet.append(run_fleet(args, work, sizes, act, batch, threads, xp, yp))
                    torch.append(run_torch(args, sizes, act, batch, threads, xp, yp))
                f, t = statistics.median(fleet), statistics.median(torch)
                print(f"{name:40} {threads:>3} {f:16.0f} {t:16.0f} {f / t:6.2f}", flush=True)


if __name__ == "__main__":
    main()
