"""The peer for bench/train_throughput.py: one PyTorch training run of an MLP.

Same network, initialisation scheme (Xavier-uniform weights, zero biases), loss
(softmax -> cross entropy, mean), optimizer (plain SGD) and data (the .npy files the driver
wrote) as the Fleet run it is compared with. Prints one JSON line with the steady-state
samples/s and the last loss.

With --device cuda the model and the whole data set live on the GPU (one batch is a slice of
it), TF32 is off as it is in Fleet's CUDA kernels, and the timed region is bracketed by
torch.cuda.synchronize() so that it measures finished work, not queued launches.
"""
import argparse
import json

import numpy as np
import torch

from torch_timing import timed_steps


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
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    if cuda:
        # Fleet's CUDA plugin computes float32 products in full float32 (no TF32).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
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
    model = torch.nn.Sequential(*layers).to(a.device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)

    x_all = torch.from_numpy(np.load(a.x)).to(a.device)
    y_all = torch.from_numpy(np.load(a.y)).reshape(-1).to(a.device)
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

    elapsed, loss = timed_steps(step, a.warmup, a.steps, cuda)
    print(json.dumps({"samples_per_sec": a.steps * a.batch / elapsed,
                      "loss": float(loss.detach())}))


if __name__ == "__main__":
    main()
