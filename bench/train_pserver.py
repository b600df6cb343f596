"""Parameter-server training speed: a sync job of 2 pservers and 2 trainers (fleet-host launch
--servers 2 --workers 2, every step's gradients sent to the servers, averaged, applied and the
parameters fetched back over the gRPC transport) against one process training on the same
global batch.

  /usr/bin/python3 bench/train_pserver.py [--build-dir build] [--runs 3] [--steps 300]

Per network the two setups run alternately, `--runs` times each, on synthetic data:
  1 process     batch B, all cores
  2x2 pserver   2 trainers on B/2 each (the same B samples per step) + 2 servers, the four
                processes sharing the cores (fleet-host launch divides them)
The table gives the median steps/s of each (from trainer 0's "trained N steps in Ts" line,
whole run, so start-up is included; steps are chosen to make it small) and their ratio.

What the numbers mean: each step of the pserver job is a round trip of every gradient and
parameter through the servers and two barriers, and on a machine with two cores the four
processes also take turns on them; the single process has none of that. The ratio is the
price of the protocol on one machine, not a scaling figure.
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
    # name, layer sizes, activation, global batch, steps scale
    ("quick-start MLP 32-128-128-2 tanh", [32, 128, 128, 2], "tanh", 128, 1.0),
    ("wide MLP 784-1024-1024-10 relu", [784, 1024, 1024, 10], "relu", 128, 0.2),
]

SUMMARY = re.compile(r"trained (\d+) steps in ([0-9.]+)s")


def write_config(work, batch, steps):
    cfg = os.path.join(work, f"fleet_{batch}.toml")
    with open(cfg, "w") as f:
        f.write(f"""[train]
steps = {steps}
batch_size = {batch}
seed = 1
log_every = {steps}

[data]
source = "synthetic"
""")
    return cfg


def steps_per_s(text, cmd):
    for line in reversed(text.splitlines()):
        m = SUMMARY.search(line)
        if m:
            return int(m.group(1)) / float(m.group(2))
    raise RuntimeError(f"no 'trained N steps' line in the output of {' '.join(cmd)}:\n{text}")


def run_one(args, work, prog, batch, steps):
    cfg = write_config(work, batch, steps)
    cmd = [args.fleet_host, "--config", cfg, "run", prog]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=work)
    return steps_per_s(out.stdout + out.stderr, cmd)


def run_pserver(args, work, prog, batch, steps):
    cfg = write_config(work, batch // 2, steps)
    cmd = [args.fleet_host, "--config", cfg, "launch", "--servers", "2", "--workers", "2",
           "--log-dir", os.path.join(work, "log"), "--", "run", prog]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=work)
    return steps_per_s(out.stdout + out.stderr, cmd)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--steps", type=int, default=300, help="steps per run, scaled per case")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 run, few steps")
    args = p.parse_args()
    if args.quick:
        args.runs, args.steps = 1, 50
    args.fleet_host = os.path.abspath(os.path.join(args.build_dir, "bin", "fleet-host"))
    if not os.path.exists(args.fleet_host):
        raise SystemExit(f"train_pserver.py: {args.fleet_host} is missing (pass --build-dir)")
    print(f"{args.runs} alternating runs; median steps/s on the same global batch B")
    print(f"{'case':36} {'B':>4} {'1 process':>10} {'2x2 sync':>10} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as work:
        for name, sizes, act, batch, scale in CASES:
            prog = os.path.join(work, "net.fleet")
            with open(prog, "w") as f:
                f.write(program_text(sizes, act))
            steps = max(10, int(args.steps * scale))
            one, ps = [], []
            for i in range(args.runs):
                order = [(one, run_one), (ps, run_pserver)]
                if i % 2:
                    order.reverse()
                for sink, fn in order:
                    sink.append(fn(args, work, prog, batch, steps))
            m1, m2 = statistics.median(one), statistics.median(ps)
            print(f"{name:36} {batch:>4} {m1:10.1f} {m2:10.1f} {m2 / m1:7.2f}", flush=True)


if __name__ == "__main__":
    main()
