#!/usr/bin/env python3
"""Start-up time of fleet-host: `plugins` (loads every plugin found) and `check` (loads the
selected ones and asks the device), next to `--version` (process start, no plugin) and /bin/true
(bare exec) in the same run. Commands alternate so machine noise hits all alike; the report gives
medians and the 90th percentile in milliseconds.

usage: bench/startup.py [BUILD_DIR] [--runs N]
"""
import argparse
import os
import statistics
import subprocess
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir", nargs="?", default="build")
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()
    host = os.path.join(args.build_dir, "bin", "fleet-host")
    cases = {
        "/bin/true": ["/bin/true"],
        "fleet-host --version": [host, "--version"],
        "fleet-host plugins": [host, "plugins"],
        "fleet-host check": [host, "check"],
    }
    times = {name: [] for name in cases}
    env = dict(os.environ)
    env.pop("FLEET_PLUGIN_PATH", None)
    for _ in range(3):  # warm the page cache
        for cmd in cases.values():
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(args.runs):
        for name, cmd in cases.items():
            t0 = time.perf_counter()
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            dt = (time.perf_counter() - t0) * 1000
            if r.returncode != 0:
                raise SystemExit(f"{name} failed with exit code {r.returncode}")
            times[name].append(dt)
    base = statistics.median(times["/bin/true"])
    print(f"{'command':<24} {'median ms':>10} {'p90 ms':>8} {'vs /bin/true':>13}")
    for name, ts in times.items():
        ts.sort()
        med = statistics.median(ts)
        p90 = ts[int(0.9 * (len(ts) - 1))]
        print(f"{name:<24} {med:>10.2f} {p90:>8.2f} {med / base:>12.1f}x")
    print(f"({args.runs} runs each, alternating)")


if __name__ == "__main__":
    main()
