"""PyTorch twin of examples/ctr_dnn/ctr_dnn.fleet, the peer of bench/ctr_dnn.py.

The same network on the same MultiSlot files: one shared table [vocab, 10] looked up by all 26
id slots through nn.EmbeddingBag(mode="sum") over offsets (the sum of each slot's ids, what
sequence_pool(SUM) gives; an empty slot gives zeros), concatenated with the 13 dense features,
three fc-400 relu layers, a 2-way softmax with cross-entropy, Adam (lr 0.001), dense gradients as
in Fleet's run; with --sparse, the table's gradients are sparse and torch.optim.SparseAdam (lazy
Adam) updates it (bench/ctr_sparse.py). Batches are cut in file order and turned into tensors
before the timed region. With --world N, N processes train as one data-parallel job
(DistributedDataParallel over Gloo on this machine, each reading every N-th file and --batch
lines per step), the peer of bench/ctr_sparse.py --collective; a sparse table's gradients are
then exchanged by Gloo's sparse all-reduce.
Prints one JSON line: {"samples_per_sec": ..., "final_loss": ...} (every process's samples).
"""
import argparse
import glob
import json
import os
import socket
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SLOTS = 26


def read_multislot(files):
    dense, ids, labels = [], [], []
    for path in files:
        with open(path) as f:
            for line in f:
                tok = line.split()
                at = 0
                n = int(tok[at]); at += 1
                dense.append([float(v) for v in tok[at:at + n]]); at += n
                row = []
                for _ in range(SLOTS):
                    n = int(tok[at]); at += 1
                    row.append([int(v) for v in tok[at:at + n]]); at += n
                ids.append(row)
                at += 1  # the label's count (1)
                labels.append(int(tok[at]))
    return np.array(dense, np.float32), ids, np.array(labels, np.int64)


def batches(dense, ids, labels, batch):
    out = []
    for start in range(0, len(labels) - batch + 1, batch):
        flat, offsets = [], []
        # Bag b * 26 + s is sample b's slot s, so the output reshapes to [batch, 26 * 10] in the
        # order concat([e1 .. e26]) gives.
        for b in range(start, start + batch):
            for s in range(SLOTS):
                offsets.append(len(flat))
                flat.extend(ids[b][s])
        out.append((torch.from_numpy(dense[start:start + batch]),
                    torch.tensor(flat, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64),
                    torch.from_numpy(labels[start:start + batch])))
    return out


class CtrDnn(nn.Module):
    def __init__(self, vocab, dim=10, sparse=False):
        super().__init__()
        self.table = nn.EmbeddingBag(vocab, dim, mode="sum", sparse=sparse)
        nn.init.xavier_uniform_(self.table.weight)
        self.mlp = nn.Sequential(nn.Linear(SLOTS * dim + 13, 400), nn.ReLU(), nn.Linear(400, 400),
                                 nn.ReLU(), nn.Linear(400, 400), nn.ReLU(), nn.Linear(400, 2))

    def forward(self, dense, flat, offsets):
        e = self.table(flat, offsets).reshape(dense.shape[0], -1)
        return self.mlp(torch.cat([e, dense], dim=1))


def train(rank, a, port, queue):
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    files = sorted(glob.glob(a.data + "/part-*.txt"))[rank::a.world]
    dense, ids, labels = read_multislot(files)
    data = batches(dense, ids, labels, a.batch)
    model = CtrDnn(a.vocab, sparse=a.sparse)
    table = model.table
    if a.world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=a.world)
        model = DistributedDataParallel(model)
    if a.sparse:
        dense_params = [p for p in model.parameters() if p is not table.weight]
        opts = [torch.optim.SparseAdam([table.weight], lr=0.001),
                torch.optim.Adam(dense_params, lr=0.001)]
    else:
        opts = [torch.optim.Adam(model.parameters(), lr=0.001)]
    loss_fn = nn.CrossEntropyLoss()
    start = None
    loss = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start = time.perf_counter()
        d, flat, offsets, y = data[step % len(data)]
        for opt in opts:
            opt.zero_grad()
        loss = loss_fn(model(d, flat, offsets), y)
        loss.backward()
        for opt in opts:
            opt.step()
    elapsed = time.perf_counter() - start
    if rank == 0:
        queue.put({"samples_per_sec": a.world * a.steps * a.batch / elapsed,
                   "final_loss": loss.item()})
    if a.world > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="directory of part-*.txt files")
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--world", type=int, default=1, help="data-parallel processes")
    a = ap.parse_args()
    if a.world == 1:
        queue = mp.SimpleQueue()
        train(0, a, 0, queue)
        print(json.dumps(queue.get()))
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(train, args=(a, port, queue), nprocs=a.world, join=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
