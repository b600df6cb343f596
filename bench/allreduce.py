"""All-reduce bus bandwidth and latency: Fleet's gloo communicator through the plugin ABI, the
same Gloo calls made directly, and torch.distributed's Gloo backend, side by side.

  /usr/bin/python3 bench/allreduce.py [--build-dir build] [--worlds 2,4] [--rounds 3] [--quick]

Contenders (float32, SUM, in place, ranks on 127.0.0.1):
  fleet  fleet_comm_bench --impl abi   the plugin loaded and called as fleet-host does
  gloo   fleet_comm_bench --impl gloo  the plugin's Gloo call without the plugin
  torch  bench/torch_allreduce.py      dist.all_reduce on backend "gloo"
Each job starts all ranks of one contender; rank 0 serves the rendezvous store and prints its
port, then one JSON line per size (median over `reps` timed blocks). The contenders alternate
within each round, in a rotated order, and the table gives per size the median over rounds:
latency (us per call), busbw = algbw * 2(n-1)/n in GB/s (1e9 bytes), fleet/torch busbw, and the
ABI's overhead = (t_fleet - t_gloo) / t_gloo.

The latter difference is at the mercy of the machine's noise, so a world of one rank (where
Gloo's all-reduce does no communication) measures the ABI's own cost per call, in ns, which
gives its share of each size's time without the noise ("abi share"). On a loaded machine with
few cores a rank's wake-up can wait for a scheduler tick (4 ms at 250 Hz), which makes the
latency of a block bimodal; a second table therefore gives the best block of each job (median
over rounds), the figure least disturbed by other load.
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

CONTENDERS = ["fleet", "gloo", "torch"]


def size_name(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def command(args, contender, rank, world, port):
    common = ["--rank", str(rank), "--world", str(world), "--sizes", args.sizes,
              "--reps", str(args.reps), "--block-bytes", str(args.block_bytes),
              "--max-iters", str(args.max_iters or max(10, 400 // world ** 2))]
    if port:
        common += ["--store-port", str(port)]
    if contender == "torch":
        return [args.python, os.path.join(HERE, "torch_allreduce.py")] + common
    return [args.comm_bench, "--impl", "abi" if contender == "fleet" else "gloo",
            "--plugin-dir", args.plugin_dir] + common


def run_job(args, contender, world):
    """Runs every rank of one contender; returns {bytes: record} from rank 0's JSON lines."""
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = []
    try:
        rank0 = subprocess.Popen(command(args, contender, 0, world, 0), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
        procs.append(rank0)
        first = rank0.stdout.readline()
        if not first:
            raise RuntimeError(f"{contender} rank 0 of {world} exited before serving its store: "
                               f"{rank0.stderr.read().strip()}")
        port = json.loads(first)["store_port"]
        for r in range(1, world):
            procs.append(subprocess.Popen(command(args, contender, r, world, port),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True, env=env))
        out, _ = rank0.communicate(timeout=args.job_timeout)
        deadline = time.monotonic() + 30
        for p in procs[1:]:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        failed = [(r, p) for r, p in enumerate(procs) if p.returncode != 0]
        if failed:
            r, p = failed[0]
            raise RuntimeError(f"{contender} rank {r} of {world} exited with {p.returncode}: "
                               f"{p.stderr.read().strip()}")
        records = [json.loads(line) for line in out.splitlines() if line.strip()]
        return {rec["bytes"]: rec for rec in records}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def abi_cost_ns(args):
    """The ABI's own cost per all-reduce: fleet minus gloo in a world of one rank (Gloo does no
    I/O there), on a 4 KiB buffer, median over alternating runs, in ns per call."""
    diffs = []
    saved = (args.sizes, args.block_bytes, args.max_iters)
    args.sizes, args.block_bytes, args.max_iters = "4096", 4096 * 20000, 20000
    try:
        for _ in range(max(3, args.rounds)):
            t = {c: run_job(args, c, 1)[4096]["time_us"] for c in ("fleet", "gloo")}
            diffs.append((t["fleet"] - t["gloo"]) * 1e3)
    finally:
        args.sizes, args.block_bytes, args.max_iters = saved
    return statistics.median(diffs), diffs


def table(world, results, sizes, cost_ns, key):
    med = {c: {s: statistics.median(r[s][key] for r in results[c]) for s in sizes}
           for c in CONTENDERS}
    bus = 2.0 * (world - 1) / world
    what = "median block" if key == "time_us" else "best block"
    lines = [f"world {world}: {what} of each job, median over {len(results['torch'])} rounds",
             f"{'size':>8} | {'fleet us':>9} {'gloo us':>9} {'torch us':>9} | "
             f"{'fleet GB/s':>10} {'gloo GB/s':>9} {'torch GB/s':>10} | {'fleet/torch':>11} | "
             f"{'abi ovh':>8} {'abi share':>9}"]
    rows = []
    for s in sizes:
        t = {c: med[c][s] for c in CONTENDERS}
        bw = {c: s / (t[c] * 1e-6) / 1e9 * bus for c in CONTENDERS}
        ovh = (t["fleet"] - t["gloo"]) / t["gloo"] * 100
        share = cost_ns / (t["gloo"] * 1e3) * 100 if cost_ns is not None else float("nan")
        rows.append({"world": world, "bytes": s, "time_us": t, "busbw_gbps": bw,
                     "fleet_over_torch": bw["fleet"] / bw["torch"], "abi_overhead_pct": ovh,
                     "abi_share_pct": share})
        lines.append(f"{size_name(s):>8} | {t['fleet']:9.1f} {t['gloo']:9.1f} {t['torch']:9.1f} | "
                     f"{bw['fleet']:10.3f} {bw['gloo']:9.3f} {bw['torch']:10.3f} | "
                     f"{bw['fleet'] / bw['torch']:11.2f} | {ovh:+7.1f}% {share:8.3f}%")
    return "\n".join(lines), rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--reps", type=int, default=3, help="timed blocks per size in each job")
    p.add_argument("--sizes", default=",".join(str(4096 * 4 ** i) for i in range(8)))
    p.add_argument("--block-bytes", type=int, default=32 << 20,
                   help="data per timed block: iterations = this / size, within [2, max-iters]")
    p.add_argument("--max-iters", type=int, default=0,
                   help="cap on iterations per block (default 400 / world^2: on two cores the "
                        "small-message latency of 4 ranks is scheduling-bound and slow)")
    p.add_argument("--job-timeout", type=float, default=300)
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 ranks, 3 sizes, 1 round")
    args = p.parse_args()
    if args.quick:
        args.worlds, args.rounds, args.reps = "2", 1, 2
        args.sizes, args.block_bytes, args.max_iters = "4096,1048576,16777216", 16 << 20, 50
    args.comm_bench = os.path.join(args.build_dir, "bin", "fleet_comm_bench")
    args.plugin_dir = os.path.join(args.build_dir, "lib", "fleet", "plugins")
    for path in (args.comm_bench, os.path.join(args.plugin_dir, "libfleet_comm_gloo.so")):
        if not os.path.exists(path):
            sys.exit(f"allreduce.py: {path} is missing; build the targets fleet_comm_bench and "
                     f"fleet_comm_gloo in {args.build_dir} (or pass --build-dir)")
    sizes = [int(s) for s in args.sizes.split(",")]

    began = time.monotonic()
    cost_ns, cost_runs = abi_cost_ns(args)
    print(f"ABI cost per all-reduce call (world 1, fleet - gloo, median of "
          f"{len(cost_runs)}): {cost_ns:.0f} ns  (runs: "
          f"{', '.join(f'{d:.0f}' for d in cost_runs)})", flush=True)
    all_rows, raw = [], {}
    for world in [int(w) for w in args.worlds.split(",")]:
        results = {c: [] for c in CONTENDERS}
        for rnd in range(args.rounds):
            # Rotate the order so that no contender always runs first (or after the same one).
            order = CONTENDERS[rnd % 3:] + CONTENDERS[:rnd % 3]
            for c in order:
                results[c].append(run_job(args, c, world))
        raw[world] = results
        text, rows = table(world, results, sizes, cost_ns, "time_us")
        print(text, flush=True)
        all_rows += rows
        if not args.quick:
            print(table(world, results, sizes, cost_ns, "best_us")[0], flush=True)
        mib = [r for r in rows if r["bytes"] >= 1 << 20]
        if mib:
            worst = min(mib, key=lambda r: r["fleet_over_torch"])
            print(f"  from 1 MiB up: fleet/torch busbw >= {worst['fleet_over_torch']:.2f} "
                  f"(at {size_name(worst['bytes'])}); abi overhead median "
                  f"{statistics.median(r['abi_overhead_pct'] for r in rows):+.1f}%", flush=True)
    print(f"total {time.monotonic() - began:.0f} s; load average now "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"abi_cost_ns": cost_ns, "rows": all_rows, "jobs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
