"""Data-parallel scaling of fleet-host training: two ranks (fleet-host launch --nproc 2, the
gradients all-reduced through the gloo communicator every step) against one rank.

  /usr/bin/python3 bench/train_scaling.py [--build-dir build] [--runs 5] [--steps 1000]

Per case (network, per-rank batch B) the setups run alternately, `--runs` times each, on
synthetic data:
  1x1  1 rank x 1 thread    batch B
  2x1  2 ranks x 1 thread   batch B each, so 2B samples per step (the job total is reported)
  1x2  1 rank x 2 threads   batch B (only with --setups 1x1,1x2,2x1: the same two cores used by
                            one process; OpenMP's spinning makes it slow on a loaded machine)
The table gives the median samples/s of each (from the "trained N steps in Ts: ... X samples/s"
line, whole run, so include start-up work; steps are chosen to make that small) and the ratios
against one rank with one thread.

What the numbers mean on a small machine: two ranks need two cores for their compute plus
Gloo's network threads, and this bench and its ranks share them with whatever else runs; with
only two cores the ideal is 2.0x, and any other load on the machine shows up as a loss of scaling
that a machine with spare cores would not have. The tiny quick-start MLP is bound by per-step
overhead and the all-reduce latency; the wide one by compute and the all-reduce bandwidth
(its 1.8 M parameters are 7 MB of gradients per step).
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

from train_throughput import program_text  # the same networks as the throughput bench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASES = [
    # name, layer sizes, activation, per-rank batch, steps scale
    ("quick-start MLP 32-128-128-2 tanh", [32, 128, 128, 2], "tanh", 128, 2.0),
    ("wide MLP 784-1024-1024-10 relu", [784, 1024, 1024, 10], "relu", 64, 0.25),
]

SUMMARY = re.compile(r"trained (\d+) steps in ([0-9.]+)s: .*?([0-9.]+) samples/s")


def write_config(work, batch, steps, threads):
    cfg = os.path.join(work, f"fleet_{threads}.toml")
    with open(cfg, "w") as f:
        f.write(f"""[train]
steps = {steps}
batch_size = {batch}
threads = {threads}
seed = 1
log_every = {steps}

[data]
source = "synthetic"
""")
    return cfg


def run(args, work, prog, batch, steps, ranks, threads):
    cfg = write_config(work, batch, steps, threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if ranks == 1:
        cmd = [args.fleet_host, "--config", cfg, "run", prog]
    else:
        cmd = [args.fleet_host, "--config", cfg, "launch", "--nproc", str(ranks),
               "--log-dir", os.path.join(work, "log"), "--", "run", prog]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=work)
    for line in reversed(out.stdout.splitlines() + out.stderr.splitlines()):
        m = SUMMARY.search(line)
        if m:
            return float(m.group(3))
    raise RuntimeError(f"no 'trained N steps' line in the output of {' '.join(cmd)}:\n"
                       f"{out.stdout}\n{out.stderr}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000,
                   help="training steps per run, scaled per case")
    p.add_argument("--setups", default="1x1,2x1",
                   help="RANKSxTHREADS setups to compare, the first is the baseline")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 run, few steps")
    args = p.parse_args()
    if args.quick:
        args.runs, args.steps = 1, 100
    args.fleet_host = os.path.abspath(os.path.join(args.build_dir, "bin", "fleet-host"))
    if not os.path.exists(args.fleet_host):
        raise SystemExit(f"train_scaling.py: {args.fleet_host} is missing (pass --build-dir)")

    setups = []
    for label in args.setups.split(","):
        ranks, _, threads = label.partition("x")
        if not (ranks.isdigit() and threads.isdigit() and int(ranks) > 0 and int(threads) > 0):
            raise SystemExit(f"train_scaling.py: --setups: '{label}' is not RANKSxTHREADS")
        setups.append((label, int(ranks), int(threads)))
    base = setups[0][0]
    print(f"{args.runs} alternating runs; median samples/s of the job (RANKSxTHREADS), and the "
          f"ratio to {base}")
    print(f"{'case':36} {'B':>4} " + " ".join(f"{s[0]:>9}" for s in setups) + " " +
          " ".join(f"{s[0] + '/' + base:>9}" for s in setups[1:]))
    with tempfile.TemporaryDirectory() as work:
        for name, sizes, act, batch, scale in CASES:
            prog = os.path.join(work, "net.fleet")
            with open(prog, "w") as f:
                f.write(program_text(sizes, act))
            steps = max(10, int(args.steps * scale))
            got = {s[0]: [] for s in setups}
            for i in range(args.runs):
                k = i % len(setups)
                order = setups[k:] + setups[:k]
                for label, ranks, threads in order:
                    got[label].append(run(args, work, prog, batch, steps, ranks, threads))
            m = {k: statistics.median(v) for k, v in got.items()}
            print(f"{name:36} {batch:>4} " + " ".join(f"{m[s[0]]:9.0f}" for s in setups) + " " +
                  " ".join(f"{m[s[0]] / m[base]:9.2f}" for s in setups[1:]), flush=True)


if __name__ == "__main__":
    main()
