#!/usr/bin/env python3
"""Reader throughput against the training step it must feed.

Runs build/bin/fleet_reader_bench (samples/s of MultiSlot and CSV reading for the quick-start
MLP's feeds, x: 32 floats and y: one int64) and, in the same run, `fleet-host run
examples/mlp/mlp.fleet` on synthetic data and on MultiSlot files (queue with a 4-batch reader
thread, and memory), alternating so machine noise hits all alike. The step rate to feed is the
synthetic run's op time from train.profile (batch / ms per step): the synthetic generator itself
is slower than the step, so the run's own samples/s measures the generator. Prints medians over
--runs.

usage: bench/reader.py [BUILD_DIR] [--runs N] [--samples N] [--batch B] [--steps S]
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write_multislot(work, samples, files):
    rng = random.Random(7)
    for f in range(files):
        with open(os.path.join(work, f"part-{f}.txt"), "w") as out:
            for _ in range(samples // files):
                x = [rng.uniform(-1, 1) for _ in range(32)]
                out.write("32 " + " ".join(f"{v:.6f}" for v in x) + f" 1 {int(x[0] + x[1] > 0)}\n")


def train_rate(host, work, data_sets, args):
    """(samples/s of the whole run, samples/s of the steps alone from train.profile)."""
    cmd = [host, "run", os.path.join(ROOT, "examples/mlp/mlp.fleet"),
           "--set", f"train.steps={args.steps}", "--set", f"train.batch_size={args.batch}",
           "--set", f"train.log_every={args.steps}", "--set", "train.profile=true"] + data_sets
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=work).stdout
    m = re.search(r"trained \d+ steps in [0-9.]+s: final loss [0-9.]+, ([0-9.]+) samples/s", out)
    p = re.search(r"profile: ([0-9.]+) ms per step", out)
    return float(m.group(1)), args.batch / (float(p.group(1)) / 1e3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--samples", type=int, default=200000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args()
    args.build_dir = os.path.abspath(args.build_dir)  # the runs happen in a scratch directory
    bench = os.path.join(args.build_dir, "bin", "fleet_reader_bench")
    host = os.path.join(args.build_dir, "bin", "fleet-host")
    rates = {}
    with tempfile.TemporaryDirectory() as work:
        write_multislot(work, 51200, 4)
        with open(os.path.join(work, "fleet.toml"), "w") as f:
            f.write('[data]\nfilelist = ["part-*.txt"]\nslots = ["x", "y"]\n')
        runs = {
            "train: fleet-host run, synthetic data": [],
            "train: fleet-host run, multislot queue + prefetch 4":
                ["--config", "fleet.toml", "--set", "data.source=multislot",
                 "--set", "data.dataset=queue"],
            "train: fleet-host run, multislot memory + prefetch 4":
                ["--config", "fleet.toml", "--set", "data.source=multislot"],
            "train: fleet-host run, multislot queue, no prefetch":
                ["--config", "fleet.toml", "--set", "data.source=multislot",
                 "--set", "data.dataset=queue", "--set", "data.queue_batches=0"],
        }
        for _ in range(args.runs):
            out = subprocess.run([bench, "--samples", str(args.samples), "--batch",
                                  str(args.batch), "--reps", "1"],
                                 check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                j = json.loads(line)
                rates.setdefault("read: " + j["case"], []).append(j["samples_per_s"])
            for name, sets in runs.items():
                run, steps_only = train_rate(host, work, sets, args)
                rates.setdefault(name, []).append(run)
                if not sets:
                    # The executor's time per step (ops only): the rate data must keep up with.
                    rates.setdefault("train: steps alone (train.profile op time)", []).append(
                        steps_only)
    width = max(len(k) for k in rates)
    print(f"median of {args.runs} runs, batch {args.batch}, {os.cpu_count()} CPUs")
    print(f"{'case'.ljust(width)}  samples/s (median)   min .. max")
    for name, values in rates.items():
        print(f"{name.ljust(width)}  {statistics.median(values):>14,.0f}   "
              f"{min(values):,.0f} .. {max(values):,.0f}")


if __name__ == "__main__":
    main()
