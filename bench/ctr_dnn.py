"""CTR-DNN training throughput: fleet-host against PyTorch, side by side.

Writes a Criteo-shaped dataset once with examples/ctr_dnn/make_data.py, then runs, alternately
and `--runs` times each, examples/ctr_dnn/ctr_dnn.fleet in one fleet-host process (26
variable-length slots as sequence tensors through embedding + sequence_pool) and its PyTorch
twin bench/torch_ctr_dnn.py (nn.EmbeddingBag over offsets) on the same files, with the same
batch, thread count, network and optimizer. The table gives the median samples/s of each over
the timed steps (after `--warmup`) and the ratio fleet/torch. In the same runs
fleet_reader_bench --ctr parses the same files as the example's feeds (MultiSlot, 26
variable-length slots), so the table also says how far the reader outruns the step it feeds.

  /usr/bin/python3 bench/ctr_dnn.py [--fleet-host build/bin/fleet-host] [--runs 5]

It needs Debian's python3-torch and OpenBLAS (scripts/install-bench-deps.sh).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "examples", "ctr_dnn")


def fleet_config(args, data_dir, metrics):
    with open(os.path.join(EXAMPLE, "fleet.toml")) as f:
        example = f.read()
    slots = example[example.index("slots = ["):]
    slots = slots[:slots.index("]") + 1]
    return f"""[train]
steps = {args.warmup + args.steps}
batch_size = {args.batch}
threads = {args.threads}
log_every = {args.warmup}
metrics_file = "{metrics}"

[data]
source = "multislot"
filelist = ["{data_dir}/part-*.txt"]
{slots}
"""


def run_fleet(args, work, data_dir):
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cfg = os.path.join(work, "fleet.toml")
    with open(cfg, "w") as f:
        f.write(fleet_config(args, data_dir, metrics))
    subprocess.run([args.fleet_host, "--config", cfg, "run", os.path.join(EXAMPLE, "ctr_dnn.fleet")],
                   check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    with open(metrics) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    first = next(r for r in recs if r["step"] >= args.warmup)
    last = recs[-1]
    rate = (last["step"] - first["step"]) * args.batch / (last["elapsed_s"] - first["elapsed_s"])
    return rate, last.get("auc")


def run_torch(args, data_dir):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    env.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "torch_ctr_dnn.py"), "--data", data_dir,
         "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
         "--threads", str(args.threads)],
        check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_sec"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet-host", default=os.path.join(ROOT, "build", "bin", "fleet-host"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lines", type=int, default=4000, help="lines per data file (4 files)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        data_dir = os.path.join(work, "data")
        subprocess.run([sys.executable, os.path.join(EXAMPLE, "make_data.py"), data_dir,
                        "--lines", str(args.lines)], check=True, stdout=subprocess.DEVNULL)
        fleet, torch, aucs, reads = [], [], [], {}
        reader = os.path.join(os.path.dirname(args.fleet_host), "fleet_reader_bench")
        for _ in range(args.runs):
            rate, auc = run_fleet(args, work, data_dir)
            fleet.append(rate)
            aucs.append(auc)
            torch.append(run_torch(args, data_dir))
            out = subprocess.run([reader, "--ctr", data_dir, "--batch", str(args.batch),
                                  "--reps", "1"], check=True, capture_output=True, text=True)
            for line in out.stdout.splitlines():
                j = json.loads(line)
                reads.setdefault(j["case"], []).append(j["samples_per_s"])
    f, t = statistics.median(fleet), statistics.median(torch)
    print(f"CTR-DNN, batch {args.batch}, {args.threads} thread(s), median of {args.runs} runs")
    print("| case | fleet samples/s | torch samples/s | fleet/torch |")
    print("|---|---:|---:|---:|")
    print(f"| CTR-DNN 26 slots x [10000, 10], 3x fc-400 | {f:,.0f} | {t:,.0f} | {f / t:.2f} |")
    print(f"fleet's AUC at the last step of each run: {aucs}")
    print()
    print("| reading the same files (fleet_reader_bench --ctr) | samples/s | x the step |")
    print("|---|---:|---:|")
    for case, values in reads.items():
        r = statistics.median(values)
        print(f"| {case} | {r:,.0f} | {r / f:.1f} |")


if __name__ == "__main__":
    main()
