"""Training throughput of the model zoo (examples/bert, examples/gpt, examples/resnet) in
fleet-host against the same networks in PyTorch on the CPU (or, with --device cuda, on one GPU),
with the FLOP rate each reaches.

For each model and thread count the two are run alternately, `--runs` times each:
  - on the same data: each example's make_data.py is run once into a temporary directory and
    both sides read those .npy files, batch after batch in file order;
  - with the same network and initialisation scheme (bench/torch_zoo.py holds the PyTorch
    twins, layer by layer, with the initialisers the programs name and Fleet's defaults where
    they name none), the same optimizer, and the batch size and seed of the example's
    fleet.toml. Fleet runs the example's .fleet program unchanged under a fleet.toml written
    here ([data] source = "npy" on those files, log_every = 1, a metrics file);
  - on the same number of threads: Fleet's train.threads, torch.set_num_threads. With more than
    one thread torch is run twice, its own pool with a serial BLAS and a serial torch with a
    threaded BLAS, and the better is kept (on two cores the two pools fight each other), as
    bench/train_throughput.py does.
Samples/s are steady-state: Fleet's from its metrics file, between the step that ends the
warm-up and the last step; torch's from the timed loop after the same warm-up. The table gives
the medians and the ratio fleet/torch.

The FLOP rate counts the forward matmuls and convolutions of each network analytically
(2 * M * N * K each; element-wise work, norms, softmax and the optimizer are left out), takes a
training step as 3 x the forward, and divides by the median step time. The peak it is compared
with is measured here: the best rate of a float32 N x N x N torch.matmul (N = --gemm, 1024) on
one thread, on the same BLAS as the peers; "% of peak" divides by threads x that figure.

The losses of the first run of each model are printed too (the first step's, the last step's,
and the mean of the last ten), so that one sees that both sides do the same training; a note
follows when their falls differ by much, which would mean the twins are not the same.

  /usr/bin/python3 bench/train_zoo.py [--fleet-host build/bin/fleet-host] [--runs 5]
      [--threads 1] [--models bert,gpt,resnet] [--steps N] [--warmup N] [--gemm 1024]

One thread by default, as the examples' fleet.toml files set: --threads 1,2 adds the two-thread
runs, which take a little longer than the one-thread ones on two idle cores (torch runs twice
at each) but many times longer on loaded ones
(Fleet's team of threads waits for each other's time slices there: 50x slower steps were seen
with other jobs on the machine), so only ask for them on a quiet machine.

--steps / --warmup replace every model's own counts (bert 100 / 20, gpt 120 / 20, resnet 20 /
5, sized so that the default run takes a few minutes on two cores). As for
bench/train_throughput.py, PyTorch must have a real BLAS: Debian's OpenBLAS
(scripts/install-bench-deps.sh), with OPENBLAS_CORETYPE set to this CPU's kernel type
(SkylakeX, the default here, for AVX-512 machines), or torch runs on the reference BLAS and the
comparison means nothing.

GPU mode, `--device cuda`: the same models, data and settings on one GPU. Fleet runs with
[device] backend = "cuda" in the fleet.toml written here, bench/torch_zoo.py with --device cuda:
model and whole data set on the GPU, TF32 off as in Fleet's CUDA kernels, timed region between
torch.cuda.synchronize() calls. Fleet copies each batch from host memory and reads every step's
loss back (it checks each one), the peer slices its batches on the GPU and reads its losses
after the clock stops, which favours torch slightly. Threads do not matter there, so one setting
is run (the table's column says gpu) and --threads is ignored. The steps default to more than on
the CPU (bert 300 / 30, gpt 300 / 30, resnet 100 / 20), a step taking milliseconds there. The
peak is an N x N x N float32 torch.matmul on the GPU, TF32 off, with N = --gemm, 4096 by
default (a 1024 one is too small to fill a GPU), and "% of peak" divides by that one figure. The
GPU's name and the torch and CUDA versions head the report. It needs a PyTorch built with CUDA
(Debian's python3-torch is CPU-only: run this script with the python of a CUDA build, which
then also runs the peers and make_data.py) and a fleet-host built with the cuda plugin
(FLEET_WITH_CUDA); when either cannot reach a GPU the script says which and exits with 2, as
bench/train_throughput.py does.

  python bench/train_zoo.py --device cuda [--runs 5] [--models bert,gpt,resnet] [--gemm 4096]
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib

from train_throughput import cuda_preflight  # the same GPU checks and report line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")


# Forward FLOPs of one sample: the matmuls and convolutions, 2 * M * N * K each.

def transformer_layer_flops(seq, hidden, ffn, qkv_out):
    # qkv_out: the widths the input is projected to before attention (3 * hidden in all).
    proj = 2 * seq * hidden * qkv_out + 2 * seq * hidden * hidden  # q, k, v and the output
    attn = 2 * (2 * seq * seq * hidden)  # q k^T and weights v, summed over the heads
    mlp = 2 * (2 * seq * hidden * ffn)
    return proj + attn + mlp


def bert_flops(seq=16, hidden=32, layers=2, labels=4):
    mask = 2 * seq * seq * 1  # input_mask x input_mask^T
    enc = layers * transformer_layer_flops(seq, hidden, 4 * hidden, 3 * hidden)
    head = 2 * hidden * hidden + 2 * hidden * labels  # pooler, classifier
    return mask + enc + head


def gpt_flops(seq=16, hidden=32, layers=2, vocab=64):
    enc = layers * transformer_layer_flops(seq, hidden, 4 * hidden, 3 * hidden)
    return enc + 2 * seq * hidden * vocab  # the tied output projection


def resnet_flops(size=32, channels=3, classes=10, widths=(8, 16, 32, 64), depth=(2, 2, 2, 2)):
    def conv(hw, c_in, c_out, k):  # hw: the output's side
        return 2 * hw * hw * c_out * c_in * k * k

    total, hw, c_in = conv(size, channels, widths[0], 3), size, widths[0]
    for stage, (width, blocks) in enumerate(zip(widths, depth)):
        for i in range(blocks):
            stride = 2 if i == 0 and stage != 0 else 1
            hw //= stride
            total += conv(hw, c_in, width, 3) + conv(hw, width, width, 3)
            if c_in != width or stride != 1:
                total += conv(hw, c_in, width, 1)  # the projection shortcut
            c_in = width
    return total + 2 * c_in * classes


# name: example directory and program, data vars (one .npy each, as make_data.py writes them),
# the digest of the program's code lines the twin was written for, the description, forward
# FLOPs per sample, and the default timed and warm-up steps on the CPU and (gpu_) on a GPU.
MODELS = {
    "bert": dict(program="bert/bert.fleet",
                 feeds=["src_ids", "sent_ids", "input_mask", "label"],
                 digest="99c17178a1b20f3b",
                 desc="BERT 2x32 seq 16, Adam", flops=bert_flops(), steps=100, warmup=20,
                 gpu_steps=300, gpu_warmup=30),
    "gpt": dict(program="gpt/gpt.fleet", feeds=["tokens"], digest="2e3f137faa03f98e",
                desc="GPT 2x32 seq 16, Adam", flops=gpt_flops(), steps=120, warmup=20,
                gpu_steps=300, gpu_warmup=30),
    "resnet": dict(program="resnet/resnet.fleet", feeds=["image", "label"],
                   digest="7a25f7705f568fbe",
                   desc="ResNet-18/8 32x32, Momentum", flops=resnet_flops(), steps=20,
                   warmup=5, gpu_steps=100, gpu_warmup=20),
}
# The keys of an example's fleet.toml this script sets itself or takes over (batch_size, seed,
# fetch); any other is reported as not carried over.
HANDLED = {"train": {"steps", "batch_size", "seed", "log_every", "threads", "metrics_file",
                     "fetch"},
           "data": {"source", "files"}}


def program_digest(path):
    with open(path) as f:
        code = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    return hashlib.sha256("\n".join(code).encode()).hexdigest()[:16]


def example_settings(name, spec):
    """batch_size, seed and fetch of the example's fleet.toml (Fleet's defaults without one)."""
    path = os.path.join(EXAMPLES, os.path.dirname(spec["program"]), "fleet.toml")
    train = {}
    if os.path.exists(path):
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
        train = cfg.get("train", {})
        for section, values in cfg.items():
            keys = values.keys() if isinstance(values, dict) else [None]
            extra = sorted(k for k in keys if k not in HANDLED.get(section, set()))
            if extra:
                print(f"note: {name}: {os.path.relpath(path, ROOT)} sets {section}."
                      f"{', '.join(str(k) for k in extra)}, not carried over here",
                      file=sys.stderr)
    else:
        print(f"note: {name}: no {os.path.relpath(path, ROOT)}; Fleet's default batch 64",
              file=sys.stderr)
    return train.get("batch_size", 64), train.get("seed", 1), train.get("fetch", [])


def make_data(name, spec, work):
    script = os.path.join(EXAMPLES, os.path.dirname(spec["program"]), "make_data.py")
    out = os.path.join(work, name + "_data")
    # The python that runs the peers, which has NumPy (on a GPU machine that is the CUDA build's,
    # and its /usr/bin/python3 may have none).
    subprocess.run([sys.executable, script, out], check=True, stdout=subprocess.DEVNULL)
    files = [(var, os.path.join(out, var + ".npy")) for var in spec["feeds"]]
    missing = [p for _, p in files if not os.path.exists(p)]
    if missing:
        sys.exit(f"{os.path.relpath(script, ROOT)} did not write {', '.join(missing)}")
    return out, files


def fleet_config(steps, batch, seed, fetch, threads, metrics, files, device):
    feeds = "".join(f'{var} = "{path}"\n' for var, path in files)
    backend = '\n[device]\nbackend = "cuda"\n' if device == "cuda" else ""
    return f"""[train]
steps = {steps}
batch_size = {batch}
seed = {seed}
threads = {threads}
log_every = 1
metrics_file = "{metrics}"
fetch = {json.dumps(fetch)}
{backend}
[data]
source = "npy"

[data.files]
{feeds}"""


def run_fleet(args, work, case, threads):
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cfg = os.path.join(work, "fleet.toml")
    with open(cfg, "w") as f:
        f.write(fleet_config(case["warmup"] + case["steps"], case["batch"], case["seed"],
                             case["fetch"], threads, metrics, case["files"], args.device))
    subprocess.run([args.fleet_host, "--config", cfg, "run", case["program"]], check=True,
                   stdout=subprocess.DEVNULL, cwd=work,
                   env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    with open(metrics) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    first = next(r for r in recs if r["step"] >= case["warmup"])
    last = recs[-1]
    rate = (last["step"] - first["step"]) * case["batch"] / (last["elapsed_s"] - first["elapsed_s"])
    return rate, [r["loss"] for r in recs]


def torch_env(torch_threads, blas_threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(torch_threads),
               OPENBLAS_NUM_THREADS=str(blas_threads))
    env.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    return env


def run_peer(argv, env):
    try:
        out = subprocess.run([sys.executable, os.path.join(HERE, "torch_zoo.py"), *argv],
                             check=True, capture_output=True, text=True, env=env)
    except subprocess.CalledProcessError as e:
        sys.stderr.write(e.stderr)  # the peer's traceback, which capture_output would hide
        raise
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_torch_once(args, case, torch_threads, blas_threads):
    res = run_peer(["--model", case["name"], "--data", case["data"], "--batch",
                    str(case["batch"]), "--steps", str(case["steps"]), "--warmup",
                    str(case["warmup"]), "--threads", str(torch_threads), "--device",
                    args.device],
                   torch_env(torch_threads, blas_threads))
    return res["samples_per_sec"], res["losses"]


def run_torch(args, case, threads):
    if threads == 1:
        return run_torch_once(args, case, 1, 1)
    return max(run_torch_once(args, case, threads, 1), run_torch_once(args, case, 1, threads),
               key=lambda r: r[0])


def gemm_peak(args):
    return run_peer(["--gemm", str(args.gemm), "--threads", "1", "--device", args.device],
                    torch_env(1, 1))["gflops"]


def loss_summary(losses):
    tail = losses[-10:]
    return losses[0], losses[-1], sum(tail) / len(tail)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fleet-host", default=os.path.join(ROOT, "build", "bin", "fleet-host"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", default="1",
                   help="comma list of thread counts (ignored with cuda)")
    p.add_argument("--models", default="bert,gpt,resnet", help="comma list, run in this order")
    p.add_argument("--steps", type=int, default=0, help="timed steps (0: each model's own)")
    p.add_argument("--warmup", type=int, default=0, help="warm-up steps (0: each model's own)")
    p.add_argument("--gemm", type=int, default=0,
                   help="side of the peak GEMM (0: 1024 on the CPU, 4096 on a GPU)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cpu: each model at each thread count; cuda: each model on the GPU")
    args = p.parse_args()
    cuda = args.device == "cuda"
    args.gemm = args.gemm or (4096 if cuda else 1024)
    if not os.access(args.fleet_host, os.X_OK):
        sys.exit(f"{args.fleet_host} is not an executable; build fleet-host first")
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    # On a GPU one setting: Fleet's train.threads = 1 and torch on one thread, as on the CPU.
    thread_counts = [1] if cuda else [int(t) for t in args.threads.split(",")]
    step_key = "gpu_" if cuda else ""

    rows, loss_lines, notes = [], [], []
    with tempfile.TemporaryDirectory() as work:
        if cuda:
            cuda_preflight(args, work)  # the GPU line of the report, or exit 2 saying why not
        peak_before = gemm_peak(args)
        if cuda:
            print(f"{args.runs} alternating runs; steady-state samples/s (medians)", flush=True)
        else:
            print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'SkylakeX')}, "
                  f"{args.runs} alternating runs; steady-state samples/s (medians)", flush=True)
        for name in names:
            spec = MODELS[name]
            program = os.path.join(EXAMPLES, spec["program"])
            digest = program_digest(program)
            if digest != spec["digest"]:
                notes.append(f"{os.path.relpath(program, ROOT)} is no longer the program "
                             "bench/torch_zoo.py was written for; check its twin")
            batch, seed, fetch = example_settings(name, spec)
            data, files = make_data(name, spec, work)
            case = dict(name=name, program=program, data=data, files=files, batch=batch,
                        seed=seed, fetch=fetch, steps=args.steps or spec[step_key + "steps"],
                        warmup=args.warmup or spec[step_key + "warmup"])
            step_flops = 3 * spec["flops"] * batch
            for threads in thread_counts:
                fleet, torch = [], []
                for run in range(args.runs):
                    rate, f_losses = run_fleet(args, work, case, threads)
                    fleet.append(rate)
                    rate, t_losses = run_torch(args, case, threads)
                    torch.append(rate)
                    if run == 0 and threads == thread_counts[0]:
                        loss_lines.append((name, case, f_losses, t_losses))
                f, t = statistics.median(fleet), statistics.median(torch)
                rows.append((f"{name}: {spec['desc']}, batch {batch}", threads, f, t,
                             f * step_flops / batch / 1e9, t * step_flops / batch / 1e9))
                where = "gpu" if cuda else f"threads={threads}"
                print(f"  {name} {where}: fleet {f:.0f}, torch {t:.0f} samples/s "
                      f"(fleet {', '.join(f'{x:.0f}' for x in fleet)}; "
                      f"torch {', '.join(f'{x:.0f}' for x in torch)})", file=sys.stderr,
                      flush=True)
            if program_digest(program) != digest:
                notes.append(f"{os.path.relpath(program, ROOT)} changed while it was measured")
    peak_after = gemm_peak(args)
    peak = max(peak_before, peak_after)

    print()
    print(f"| case | {'device' if cuda else 'threads'} | fleet samples/s | torch samples/s "
          "| fleet/torch | fleet GFLOP/s | torch GFLOP/s | % of peak (fleet / torch) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case, threads, f, t, f_gf, t_gf in rows:
        top = peak if cuda else threads * peak  # a GPU's peak is the one figure
        print(f"| {case} | {'gpu' if cuda else threads} | {f:.0f} | {t:.0f} | {f / t:.2f} | "
              f"{f_gf:.1f} | {t_gf:.1f} | {100 * f_gf / top:.0f} / {100 * t_gf / top:.0f} |")
    print()
    side = args.gemm
    print(f"peak: float32 torch.matmul {side}x{side}x{side}, "
          + ("on the GPU, TF32 off, " if cuda else "1 thread, ")
          + f"{peak:.1f} GFLOP/s (best of two measurements: {peak_before:.1f} before, "
          f"{peak_after:.1f} after the runs); % of peak is of "
          + (f"{peak:.1f}" if cuda else f"threads x {peak:.1f}") + "; "
          "GFLOP/s = 3 x forward matmul/conv FLOPs "
          + ", ".join(f"({n}: {MODELS[n]['flops'] / 1e6:.2f} MFLOP/sample)" for n in names))
    print()
    print("losses of the first run "
          + ("on the GPU" if cuda else f"at {thread_counts[0]} thread(s)")
          + ": step 1 -> last step (mean of the last 10 steps)")
    for name, case, f_losses, t_losses in loss_lines:
        f0, f1, ft = loss_summary(f_losses)
        t0, t1, tt = loss_summary(t_losses)
        print(f"  {name} ({len(f_losses)} steps): fleet {f0:.3f} -> {f1:.3f} ({ft:.3f}), "
              f"torch {t0:.3f} -> {t1:.3f} ({tt:.3f})")
        # The two start from different draws of the same initialisers, so their curves differ
        # a little; a gap in the tails that is large next to the fall itself is not that.
        fall = max(f0 - ft, t0 - tt)
        if fall <= 0 or abs(ft - tt) > 0.25 * fall + 0.05:
            notes.append(f"{name}: the losses of the two sides do not fall alike (tails "
                         f"{ft:.3f} and {tt:.3f} after {f0:.3f} and {t0:.3f})")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
