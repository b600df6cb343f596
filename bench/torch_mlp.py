"""The peer for bench/train_throughput.py: one PyTorch training run of an MLP.

Same network, initialisation scheme (Xavier-uniform weights, zero biases), loss
(softmax -> cross entropy, mean), optimizer (plain SGD) and data (the .npy files the driver
wrote) as the Fleet run it is compared with. Prints one JSON line with the steady-state
samples/s and the last loss.
"""
import argparse
import json
import time

import numpy as np
import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--sizes", required=True, help="comma list: in,hidden...,classes")
    p.add_argument("--act", required=True, choices=["tanh", "relu"])
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    sizes = [int(s) for s in a.sizes.split(",")]
    layers = []
    for i in range(len(sizes) - 1):
        lin = torch.nn.Linear(sizes[i], sizes[i + 1])
        torch.nn.init.xavier_uniform_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i + 2 < len(sizes):
            layers.append(torch.nn.Tanh() if a.act == "tanh" else torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)

    x_all = torch.from_numpy(np.load(a.x))
    y_all = torch.from_numpy(np.load(a.y)).reshape(-1)
    n = x_all.shape[0]
    batches = n // a.batch

    def step(i):
        b = i % batches
        x = x_all[b * a.batch:(b + 1) * a.batch]
        y = y_all[b * a.batch:(b + 1) * a.batch]
        prob = torch.softmax(model(x), dim=1)
        loss = -torch.log(prob.gather(1, y.unsqueeze(1))).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    start = time.perf_counter()
    for i in range(a.steps):
        loss = step(a.warmup + i)
    elapsed = time.perf_counter() - start
    print(json.dumps({"samples_per_sec": a.steps * a.batch / elapsed,
                      "loss": float(loss.detach())}))


if __name__ == "__main__":
    main()
