"""CTR-DNN with a large table, dense against sparse gradients, fleet-host against PyTorch.

examples/ctr_dnn/ctr_dnn.fleet with its shared table grown to [--vocab, 10] (default 1e6 rows,
of which a batch touches a few hundred), run in one fleet-host process twice: as written but with
is_sparse=False (every step makes and applies a dense [vocab, 10] gradient), and with
is_sparse=True and Adam's lazy_mode (the gradient holds one entry per id; only touched rows and
their moments move). The peer is bench/torch_ctr_dnn.py on the same files: nn.EmbeddingBag with
dense gradients and Adam, and with sparse=True, torch.optim.SparseAdam for the table and Adam for
the rest (SparseAdam is lazy Adam). Runs alternate, `--runs` times each; the table gives median
samples/s over the timed steps, the peak resident memory of the process and the ratios.

  /usr/bin/python3 bench/ctr_sparse.py [--fleet-host build/bin/fleet-host] [--vocab 1000000]

With --pserver the same two programs run as a parameter-server job instead, `fleet-host launch
--servers 2 --workers 2` on this machine (sync, plain Adam on the servers, lazy for the sparse
run, --batch per worker; the sparse one also with async servers, sends in the step, through
Fleet 2.x's a_sync communicator, one and eight gradients per send, and GEO-SGD exchanging every
10 steps; and a growable table, size [-1, 10], sync, whose servers report the rows they made and
the memory they hold), and no PyTorch peer: the
table gives the job's samples/s (both
workers' samples) and the bytes that crossed the loopback interface per step (from
/proc/net/dev, startup included). Of those, the dense layers' share (each worker sends their
gradients and receives them back, computed from the program) is set apart; the rest, the
table's traffic, is compared with what the touched rows must move: per worker, each distinct
id of its batch fetched (an int64 out, 10 floats back) and one gradient entry per id sent (10
floats and an int64 row). The sparse run keeps the table on the servers (the trainers fetch
its rows, Paddle's remote prefetch); the dense one receives the whole table every step.

With --collective the job is `fleet-host launch --nproc 2` instead (grad_allreduce, --batch per
trainer), for the table at --vocab rows and at --small-vocab rows (data with ids below that):
dense gradients (all-reduced)
and the sparse gradient exchanged each way `[strategy] sparse_exchange` knows (gathered rows and
slices, Paddle's way; the rows gathered and a table-sized sum all-reduced; "auto", which takes
whichever its estimate says moves fewer bytes); the peer is bench/torch_ctr_dnn.py --world 2,
PyTorch's DistributedDataParallel over Gloo with a dense table and Adam, and with a sparse one
and SparseAdam. The table gives samples/s, loopback bytes per step and the trainers' own
estimate of what each way moves per rank, from their log line.

It needs Debian's python3-torch and OpenBLAS (scripts/install-bench-deps.sh).
"""
import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import ctr_dnn  # bench/ctr_dnn.py: the example's config for a timed run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "examples", "ctr_dnn")

# Runs a command and prints its peak resident set size (KiB) as the last line.
PEAK = ("import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)\n"
        "sys.stdout.write(r.stdout)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(r.returncode)\n")


def median_of(results, key, i):
    """The median of field i over the runs results[key] holds."""
    return statistics.median(r[i] for r in results[key])


def with_peak(cmd, env):
    out = subprocess.run([sys.executable, "-c", PEAK] + cmd, check=True, capture_output=True,
                         text=True, env=env)
    lines = out.stdout.strip().splitlines()
    return lines[:-1], int(lines[-1]) / 1024.0


def program(work, vocab, sparse):
    """sparse: False, True, or "growable" (a table of size [-1, 10] on the servers)."""
    with open(os.path.join(EXAMPLE, "ctr_dnn.fleet")) as f:
        text = f.read()
    if sparse == "growable":
        text = text.replace("size=[10000, 10], is_sparse=True", "size=[-1, 10], is_distributed=True")
    text = text.replace("size=[10000, 10]", f"size=[{vocab}, 10]")
    text = text.replace("is_sparse=True", f"is_sparse={bool(sparse)}")
    if sparse:
        text = text.replace("adam(learning_rate=0.001)",
                            "adam(learning_rate=0.001, lazy_mode=True)")
    kind = "growable" if sparse == "growable" else "sparse" if sparse else "dense"
    path = os.path.join(work, f"ctr_{kind}.fleet")
    with open(path, "w") as f:
        f.write(text)
    return path


def job_config(args, work, data_dir):
    """Writes the timed run's fleet.toml; returns it, the metrics file and the environment."""
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cfg = os.path.join(work, "fleet.toml")
    with open(cfg, "w") as f:
        f.write(ctr_dnn.fleet_config(args, data_dir, metrics))
    return cfg, metrics, dict(os.environ, OMP_NUM_THREADS=str(args.threads))


def timed_rate(args, metrics, trainers=1):
    """Samples/s of every trainer together over the steps after the warm-up, and the last loss."""
    with open(metrics) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    first = next(r for r in recs if r["step"] >= args.warmup)
    last = recs[-1]
    samples = trainers * (last["step"] - first["step"]) * args.batch
    return samples / (last["elapsed_s"] - first["elapsed_s"]), last.get("loss")


def run_fleet(args, work, data_dir, sparse):
    cfg, metrics, env = job_config(args, work, data_dir)
    _, peak = with_peak([args.fleet_host, "--config", cfg, "run",
                         program(work, args.vocab, sparse)], env)
    rate, loss = timed_rate(args, metrics)
    return rate, peak, loss


def loopback_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])  # received: each byte crosses once
    raise RuntimeError("/proc/net/dev has no loopback interface")


def run_pserver(args, work, data_dir, sparse, sets):
    cfg, metrics, env = job_config(args, work, data_dir)
    before = loopback_bytes()
    options = [a for s in sets for a in ("--set", s)]
    subprocess.run([args.fleet_host, "--config", cfg] + options + ["launch",
                    "--servers", "2", "--workers", "2", "--log-dir", os.path.join(work, "logs"),
                    "--", "run", program(work, args.vocab, sparse)],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    wire = (loopback_bytes() - before) / (args.warmup + args.steps)
    rate, _ = timed_rate(args, metrics, trainers=2)
    return rate, wire, table_rows(os.path.join(work, "logs"))


def table_rows(logs):
    """A growable table's rows and bytes (rows and index) on both servers, from their exit line."""
    rows = held = 0
    for i in (0, 1):
        path = os.path.join(logs, "fleet", f"serverlog.{i}")
        with open(path, errors="replace") as f:
            text = f.read()
        m = re.search(r"growable table '\S+': (\d+) rows .*?, (\d+) bytes \([^)]*\) in rows and "
                      r"(\d+) bytes", text)
        if m:
            rows += int(m.group(1))
            held += int(m.group(2)) + int(m.group(3))
    return rows, held


def batches_of_ids(args, data_dir):
    """The ids of each batch a worker reads (26 slots; --batch lines of one file in order)."""
    batches = []
    for name in sorted(os.listdir(data_dir)):
        if not name.startswith("part-"):
            continue
        with open(os.path.join(data_dir, name)) as f:
            lines = f.read().splitlines()
        for start in range(0, len(lines) - args.batch + 1, args.batch):
            ids = []
            for line in lines[start:start + args.batch]:
                fields = line.split()
                at, slot = 0, 0
                while at < len(fields) and slot < 28:
                    n = int(fields[at])
                    if 1 <= slot <= 26:
                        ids.extend(fields[at + 1:at + 1 + n])
                    at += n + 1
                    slot += 1
            batches.append(ids)
    return batches


def touched_bytes(args, data_dir):
    """Bytes per step that the table's touched rows must move for both workers: each worker
    fetches every distinct row its batch looks up (an int64 id out, 10 floats back) and sends
    one gradient entry per id (10 floats and an int64 row)."""
    batches = batches_of_ids(args, data_dir)
    fetched = statistics.mean(len(set(b)) for b in batches) * (8 + 10 * 4)
    sent = statistics.mean(len(b) for b in batches) * (10 * 4 + 8)
    return 2 * (fetched + sent)


def dense_layer_bytes(args, work):
    """Bytes per step of the parameters other than the table, both workers: each sends its
    gradient and receives the parameter."""
    out = subprocess.run([args.fleet_host, "show", program(work, args.vocab, True), "--stage",
                          "optimized", "--program", "main"],
                         check=True, capture_output=True, text=True).stdout
    total = 0
    for name, dims in re.findall(r"^\s*param (\S+) : float32\[([0-9, ]+)\]", out, re.M):
        if name == "SparseFeatFactors":
            continue
        n = 4
        for d in dims.split(","):
            n *= int(d)
        total += n
    return 2 * 2 * total


# (name, sparse gradients, --set options) of each parameter-server run.
SYNC, ASYNC = ["strategy.sync_mode=true"], ["strategy.sync_mode=false"]
A_SYNC = ["strategy.a_sync=true"]
A_SYNC_MERGE8 = A_SYNC + ["strategy.a_sync_configs.max_merge_var_num=8",
                          "strategy.a_sync_configs.send_queue_size=8"]
GEO10 = A_SYNC + ["strategy.a_sync_configs.k_steps=10"]
PSERVER_CASES = (("dense (Adam), sync", False, SYNC), ("sparse (lazy Adam), sync", True, SYNC),
                 ("sparse (lazy Adam), async", True, ASYNC),
                 ("sparse (lazy Adam), a_sync communicator", True, A_SYNC),
                 ("sparse (lazy Adam), a_sync, 8 merged per send", True, A_SYNC_MERGE8),
                 ("sparse (lazy Adam), GEO-SGD every 10 steps", True, GEO10),
                 ("growable table (lazy Adam), sync", "growable", SYNC))
# Cases whose dense layers cross less often than once a step: the bytes are not split.
NOT_PER_STEP = (A_SYNC_MERGE8, GEO10)


def main_pserver(args, data_dir, work):
    results = {}
    for _ in range(args.runs):
        for name, sparse, sets in PSERVER_CASES:
            results.setdefault(name, []).append(run_pserver(args, work, data_dir, sparse, sets))

    med = functools.partial(median_of, results)

    payload = touched_bytes(args, data_dir)
    layers = dense_layer_bytes(args, work)
    print(f"CTR-DNN on 2 servers and 2 workers, table [{args.vocab}, 10], batch "
          f"{args.batch} per worker, {args.threads} thread(s), median of {args.runs} runs")
    print("| gradients, servers | samples/s | loopback MB per step | dense layers' MB | the rest "
          "(table) MB | touched rows' MB | rest / touched |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, _, sets in PSERVER_CASES:
        rest = med(name, 1) - layers
        if any(sets is c for c in NOT_PER_STEP):
            print(f"| {name} | {med(name, 0):,.0f} | {med(name, 1) / 1e6:,.2f} | - | - | "
                  f"{payload / 1e6:,.3f} | - |")
            continue
        print(f"| {name} | {med(name, 0):,.0f} | {med(name, 1) / 1e6:,.2f} | {layers / 1e6:,.2f} | "
              f"{rest / 1e6:,.3f} | {payload / 1e6:,.3f} | {rest / payload:,.2f} |")
    dense, sparse = PSERVER_CASES[0][0], PSERVER_CASES[1][0]
    print(f"sparse/dense (sync): {med(sparse, 0) / med(dense, 0):.2f}x the samples/s, "
          f"{med(sparse, 1) / med(dense, 1):.2f}x the bytes")
    plain, comm, merged, geo = (PSERVER_CASES[i][0] for i in (2, 3, 4, 5))
    print(f"against async servers with sends in the step: the a_sync communicator "
          f"{med(comm, 0) / med(plain, 0):.2f}x the samples/s, with 8 merged per send "
          f"{med(merged, 0) / med(plain, 0):.2f}x "
          f"({med(merged, 1) / med(plain, 1):.2f}x the bytes), "
          f"GEO-SGD every 10 steps {med(geo, 0) / med(plain, 0):.2f}x "
          f"({med(geo, 1) / med(plain, 1):.2f}x the bytes)")
    grown = PSERVER_CASES[6][0]
    rows, held = results[grown][-1][2]
    fixed = args.vocab * 10 * 4 * 3  # the table and lazy Adam's two moments, float32
    print(f"growable against the fixed [{args.vocab}, 10] table (sync): "
          f"{med(grown, 0) / med(sparse, 0):.2f}x the samples/s, "
          f"{med(grown, 1) / med(sparse, 1):.2f}x the bytes; the servers held {rows:,} rows in "
          f"{held / 1e6:,.1f} MB (rows, moments and index) against {fixed / 1e6:,.1f} MB")


# (name, sparse gradients, --set options) of each collective run.
COLLECTIVE_CASES = (("dense gradients (Adam)", False, []),
                    ("sparse, gathered", True, ["strategy.sparse_exchange=gather"]),
                    ("sparse, rows gathered + dense sum", True, ["strategy.sparse_exchange=dense"]),
                    ("sparse, auto", True, ["strategy.sparse_exchange=auto"]))


# (name, sparse table) of each PyTorch DistributedDataParallel run (the peer).
TORCH_DDP_CASES = (("torch DDP, dense gradients (Adam)", False),
                   ("torch DDP, sparse (SparseAdam), Gloo sparse all-reduce", True))


def exchange_choice(logs):
    """What the trainers' c_allgather chose, and their estimates per rank (MB), from the logs."""
    for root, _, files in os.walk(logs):
        for name in sorted(files):
            with open(os.path.join(root, name), errors="replace") as f:
                m = re.search(r"(gathered \(rows and slices\)|exchanged dense)[^\n]*?, ([0-9.]+) MB "
                              r"received per rank, where [a-z ]+ would take ([0-9.]+) MB", f.read())
            if m:
                way = "gather" if m.group(1).startswith("gathered") else "dense"
                chosen, other = float(m.group(2)), float(m.group(3))
                return way, (chosen, other) if way == "gather" else (other, chosen)
    return "-", (None, None)


def run_collective(args, work, data_dir, vocab, sparse, sets):
    cfg, metrics, env = job_config(args, work, data_dir)
    logs = os.path.join(work, "logs")
    subprocess.run(["rm", "-rf", logs], check=True)
    before = loopback_bytes()
    options = [a for s in sets for a in ("--set", s)]
    path = program(work, vocab, sparse)
    subprocess.run([args.fleet_host, "--config", cfg] + options + ["launch", "--nproc", "2",
                    "--log-dir", logs, "--", "run", path],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    wire = (loopback_bytes() - before) / (args.warmup + args.steps)
    rate, _ = timed_rate(args, metrics, trainers=2)
    return rate, wire, exchange_choice(logs)


def main_collective(args, data_dir, work):
    # The small table's data: ids below its rows.
    small = os.path.join(work, "data_small")
    subprocess.run([sys.executable, os.path.join(EXAMPLE, "make_data.py"), small, "--lines",
                    str(args.lines), "--vocab", str(args.small_vocab)], check=True,
                   stdout=subprocess.DEVNULL)
    results = {}
    for _ in range(args.runs):
        for vocab, data in ((args.vocab, data_dir), (args.small_vocab, small)):
            for name, sparse, sets in COLLECTIVE_CASES:
                results.setdefault((vocab, name), []).append(
                    run_collective(args, work, data, vocab, sparse, sets))
            for name, sparse in TORCH_DDP_CASES:
                results.setdefault((vocab, name), []).append(
                    run_torch_ddp(args, data, vocab, sparse))

    med = functools.partial(median_of, results)

    print(f"CTR-DNN on 2 collective trainers (launch --nproc 2), batch {args.batch} per trainer, "
          f"{args.threads} thread(s), median of {args.runs} runs")
    print("| table rows | gradients, exchange | samples/s | loopback MB per step | chosen | "
          "estimate per rank: gather MB | dense MB |")
    print("|---:|---|---:|---:|---|---:|---:|")
    names = [c[0] for c in COLLECTIVE_CASES] + [c[0] for c in TORCH_DDP_CASES]
    for vocab in (args.vocab, args.small_vocab):
        for name in names:
            way, (gather, dense) = results[(vocab, name)][-1][2]
            estimate = "- | -" if gather is None else f"{gather:.2f} | {dense:.2f}"
            print(f"| {vocab:,} | {name} | {med((vocab, name), 0):,.0f} | "
                  f"{med((vocab, name), 1) / 1e6:,.2f} | {way} | {estimate} |")
        g, d = (vocab, COLLECTIVE_CASES[1][0]), (vocab, COLLECTIVE_CASES[2][0])
        a = (vocab, COLLECTIVE_CASES[3][0])
        t = (vocab, TORCH_DDP_CASES[1][0])
        print(f"table of {vocab:,} rows: rows + dense sum against gathered "
              f"{med(d, 0) / med(g, 0):.2f}x the samples/s, {med(d, 1) / med(g, 1):.2f}x the "
              f"bytes; auto {med(a, 0) / max(med(g, 0), med(d, 0)):.2f}x the better of the two; "
              f"fleet auto against torch DDP sparse {med(a, 0) / med(t, 0):.2f}x the samples/s")


def run_torch(args, data_dir, sparse, vocab=None, world=1):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    env.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    cmd = [sys.executable, os.path.join(HERE, "torch_ctr_dnn.py"), "--data", data_dir,
           "--vocab", str(vocab or args.vocab), "--batch", str(args.batch), "--steps",
           str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
           "--world", str(world)]
    if sparse:
        cmd.append("--sparse")
    lines, peak = with_peak(cmd, env)
    return json.loads(lines[-1])["samples_per_sec"], peak


def run_torch_ddp(args, data_dir, vocab, sparse):
    """The peer of run_collective: two DistributedDataParallel processes over Gloo."""
    before = loopback_bytes()
    rate, _ = run_torch(args, data_dir, sparse, vocab, world=2)
    return rate, (loopback_bytes() - before) / (args.warmup + args.steps), ("-", (None, None))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet-host", default=os.path.join(ROOT, "build", "bin", "fleet-host"))
    ap.add_argument("--vocab", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lines", type=int, default=2000, help="lines per data file (4 files)")
    ap.add_argument("--pserver", action="store_true",
                    help="2 servers and 2 workers instead of one process; no PyTorch peer")
    ap.add_argument("--collective", action="store_true",
                    help="2 collective trainers, each sparse exchange; no PyTorch peer")
    ap.add_argument("--small-vocab", type=int, default=1000,
                    help="--collective: the second, small table's rows")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as work:
        data_dir = os.path.join(work, "data")
        subprocess.run([sys.executable, os.path.join(EXAMPLE, "make_data.py"), data_dir,
                        "--lines", str(args.lines)], check=True, stdout=subprocess.DEVNULL)
        if args.pserver:
            main_pserver(args, data_dir, work)
            return
        if args.collective:
            main_collective(args, data_dir, work)
            return
        for _ in range(args.runs):
            for sparse in (False, True):
                rate, peak, _ = run_fleet(args, work, data_dir, sparse)
                results.setdefault(("fleet", sparse), []).append((rate, peak))
                rate, peak = run_torch(args, data_dir, sparse)
                results.setdefault(("torch", sparse), []).append((rate, peak))

    med = functools.partial(median_of, results)

    print(f"CTR-DNN, one table [{args.vocab}, 10] shared by 26 slots, batch {args.batch}, "
          f"{args.threads} thread(s), median of {args.runs} runs")
    print("| gradients | fleet samples/s | torch samples/s | fleet/torch | fleet peak MiB | "
          "torch peak MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for sparse in (False, True):
        f, t = med(("fleet", sparse), 0), med(("torch", sparse), 0)
        fm, tm = med(("fleet", sparse), 1), med(("torch", sparse), 1)
        print(f"| {'sparse (lazy Adam)' if sparse else 'dense (Adam)'} | {f:,.0f} | {t:,.0f} | "
              f"{f / t:.2f} | {fm:,.0f} | {tm:,.0f} |")
    fs, fd = med(("fleet", True), 0), med(("fleet", False), 0)
    print(f"fleet sparse/dense: {fs / fd:.1f}x the samples/s")


if __name__ == "__main__":
    main()
