"""The torch.distributed peer of fleet_comm_bench: the same all-reduce measurement on torch's
Gloo backend, one process per rank, with the same sizes, iteration rule and JSON lines.

  /usr/bin/python3 bench/torch_allreduce.py --rank R --world N [--store-port P] [options]

Rank 0 serves a TCPStore on 127.0.0.1 at a port the kernel picks and prints {"store_port": P}
first; the other ranks are started with that port. Gloo is pinned to the loopback interface
(GLOO_SOCKET_IFNAME=lo, set here when unset). Per size: one checked all-reduce (rank r gives
r + 1; every element must come back as N(N+1)/2), warm-up calls, then `reps` timed blocks of
`iters` in-place dist.all_reduce calls on a float32 tensor, each block after a barrier. Rank 0
prints the median and best time per call, algbw and busbw = algbw * 2(N-1)/N.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time


def default_sizes():
    return [4096 * 4 ** i for i in range(8)]  # 4 KiB .. 64 MiB


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--store-port", type=int, default=0)
    p.add_argument("--sizes", default=",".join(map(str, default_sizes())))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--block-bytes", type=int, default=64 << 20)
    p.add_argument("--min-iters", type=int, default=2)
    p.add_argument("--max-iters", type=int, default=200)
    p.add_argument("--timeout-ms", type=int, default=120000)
    a = p.parse_args()
    if not 0 <= a.rank < a.world:
        p.error(f"--rank {a.rank} is outside --world {a.world}")
    if a.rank != 0 and a.store_port == 0:
        p.error(f"rank {a.rank} needs --store-port (the port rank 0 printed)")
    a.sizes = [int(s) for s in a.sizes.split(",")]
    if any(s < 4 or s % 4 for s in a.sizes):
        p.error("--sizes must be positive multiples of 4 bytes (float32)")
    return a


def main():
    a = parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    # One thread: the contenders in C++ reduce on the calling thread too, and on two cores an
    # intra-op pool would only compete with the other ranks.
    torch.set_num_threads(1)
    timeout = datetime.timedelta(milliseconds=a.timeout_ms)
    # The server must not wait for the others here: they learn its port from the line below.
    store = dist.TCPStore("127.0.0.1", a.store_port, a.world, a.rank == 0, timeout,
                          wait_for_workers=False)
    if a.rank == 0:
        print(json.dumps({"store_port": store.port}), flush=True)
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.world,
                            timeout=timeout)

    buf = torch.zeros(max(a.sizes) // 4, dtype=torch.float32)
    bus_factor = 2.0 * (a.world - 1) / a.world
    expected = a.world * (a.world + 1) / 2
    for nbytes in a.sizes:
        t = buf[: nbytes // 4]
        t.fill_(a.rank + 1)
        dist.all_reduce(t)
        if not bool((t == expected).all()):
            bad = int((t != expected).nonzero()[0])
            sys.exit(f"torch_allreduce: all-reduce of {t.numel()} floats is wrong on rank "
                     f"{a.rank}: element {bad} is {float(t[bad])}, expected {expected}")
        t.zero_()
        iters = min(max(a.block_bytes // nbytes, a.min_iters), a.max_iters)
        for _ in range(max(2, iters // 4)):
            dist.all_reduce(t)
        per_call = []
        for _ in range(a.reps):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            per_call.append((time.perf_counter() - start) / iters)
        if a.rank == 0:
            med = statistics.median(per_call)
            algbw = nbytes / med / 1e9
            print(json.dumps({"impl": "torch", "world": a.world, "bytes": nbytes, "iters": iters,
                              "reps": a.reps, "time_us": round(med * 1e6, 3),
                              "best_us": round(min(per_call) * 1e6, 3),
                              "algbw_gbps": round(algbw, 4),
                              "busbw_gbps": round(algbw * bus_factor, 4)}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
