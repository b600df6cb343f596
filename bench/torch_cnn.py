"""The peer for bench/train_throughput.py: one PyTorch training run of the CNN of
examples/cnn/cnn.fleet.

The network is that program's, layer by layer:
  conv2d(num_filters=8, filter_size=3, padding=1, act="relu")  3x3 convolution with a bias
  pool2d(pool_size=2, pool_type="max", pool_stride=2)
  batch_norm(act="relu")            batch statistics in training, eps 1e-5, momentum 0.9
  fc(size=4, act="softmax")         over the flattened C*H*W features (NCHW order)
  cross_entropy -> mean, sgd(learning_rate=0.05)
with the initialisers Fleet's frontend gives those layers by default (host/frontend/layers.cc,
after Paddle): the filter from Normal(0, sqrt(2 / (filter_h * filter_w * in_channels))), the
fc weight Xavier-uniform, every bias zero, the batch-norm scale one and shift zero (running
mean zero, running variance one). Paddle's momentum 0.9 weighs the old running statistic,
which is PyTorch's momentum 0.1. The data is the .npy files the driver wrote: images of shape
[N, C, H, W] and int64 labels [N, 1]. Prints one JSON line with the steady-state samples/s and
the last loss.

With --device cuda the model and the whole data set live on the GPU (one batch is a slice of
it), TF32 is off as it is in Fleet's CUDA kernels, and the timed region is bracketed by
torch.cuda.synchronize() so that it measures finished work, not queued launches.
"""
import argparse
import json
import math

import numpy as np
import torch

from torch_timing import timed_steps


class Cnn(torch.nn.Module):
    def __init__(self, channels, height, width, filters, classes):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, filters, kernel_size=3, padding=1, bias=True)
        self.pool = torch.nn.MaxPool2d(kernel_size=2, stride=2)
        self.bn = torch.nn.BatchNorm2d(filters, eps=1e-5, momentum=0.1)
        self.fc = torch.nn.Linear(filters * (height // 2) * (width // 2), classes)
        torch.nn.init.normal_(self.conv.weight, 0.0, math.sqrt(2.0 / (3 * 3 * channels)))
        torch.nn.init.zeros_(self.conv.bias)
        torch.nn.init.ones_(self.bn.weight)
        torch.nn.init.zeros_(self.bn.bias)
        torch.nn.init.xavier_uniform_(self.fc.weight)
        torch.nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        h = self.pool(h)
        h = torch.relu(self.bn(h))
        return torch.softmax(self.fc(torch.flatten(h, 1)), dim=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--x", required=True, help=".npy of float32 images [N, C, H, W]")
    p.add_argument("--y", required=True, help=".npy of int64 labels [N, 1]")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--filters", type=int, default=8)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    if cuda:
        # Fleet's CUDA plugin computes float32 convolutions and products without TF32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)

    x_all = torch.from_numpy(np.load(a.x))
    y_all = torch.from_numpy(np.load(a.y)).reshape(-1)
    if x_all.dim() != 4:
        raise SystemExit(f"torch_cnn.py: --x must hold [N, C, H, W] images, got shape "
                         f"{list(x_all.shape)}")
    _, channels, height, width = x_all.shape
    x_all, y_all = x_all.to(a.device), y_all.to(a.device)
    model = Cnn(channels, height, width, a.filters, a.classes).to(a.device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    n = x_all.shape[0]
    batches = n // a.batch

    def step(i):
        b = i % batches
        x = x_all[b * a.batch:(b + 1) * a.batch]
        y = y_all[b * a.batch:(b + 1) * a.batch]
        prob = model(x)
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
