#!/usr/bin/env python3
"""How long `fleet-host plugins` takes with every plugin on the search path.

The CUDA plugin opens cuBLAS/cuBLASLt on first use instead of linking them. The peer, in the
same run, is the same listing with those libraries mapped at start-up (LD_PRELOAD), which is
what linking them cost every listing. Runs alternate between the two; medians and their ratio
are printed, and each plugin's own load time (`plugins --json`, load_ms) is reported too.

    bench/plugins_listing.py [--host build/bin/fleet-host] [--runs 15]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import time


def cublas_libraries():
    for d in ("/usr/local/cuda/lib", "/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"):
        blas = sorted(glob.glob(os.path.join(d, "libcublas.so.*[0-9]")))
        lt = sorted(glob.glob(os.path.join(d, "libcublasLt.so.*[0-9]")))
        if blas and lt:
            return [lt[0], blas[0]]
    return []


def timed(cmd, env):
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="build/bin/fleet-host")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("FLEET_PLUGIN_PATH", None)
    preload = cublas_libraries()
    eager_env = dict(env, LD_PRELOAD=":".join(preload)) if preload else None

    cmd = [args.host, "plugins"]
    timed(cmd, env)  # warm the page cache for both
    if eager_env:
        timed(cmd, eager_env)
    lazy, eager = [], []
    for _ in range(args.runs):
        lazy.append(timed(cmd, env))
        if eager_env:
            eager.append(timed(cmd, eager_env))

    loads = {}
    for _ in range(5):
        doc = json.loads(subprocess.run([args.host, "plugins", "--json"], env=env,
                                        capture_output=True, text=True, check=True).stdout)
        for p in doc["plugins"]:
            loads.setdefault(p["name"], []).append(p["load_ms"])

    print("fleet-host plugins, %d runs each, median wall time:" % args.runs)
    print("  cuBLAS opened on first use (as shipped): %7.1f ms" % statistics.median(lazy))
    if eager:
        print("  cuBLAS mapped at start-up (the peer):    %7.1f ms" % statistics.median(eager))
        print("  ratio peer / shipped:                    %7.2f" %
              (statistics.median(eager) / statistics.median(lazy)))
    else:
        print("  (no cuBLAS found: the peer was not run)")
    print("per plugin, median load_ms (dlopen + entry) over 5 listings:")
    for name in sorted(loads):
        print("  %-14s %6.1f ms" % (name, statistics.median(loads[name])))


if __name__ == "__main__":
    main()
