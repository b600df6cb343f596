"""The peer for bench/train_zoo.py: one PyTorch training run of a model of the zoo, or the
float32 GEMM rate the comparison is measured against.

The networks are those of examples/bert/bert.fleet, examples/gpt/gpt.fleet and
examples/resnet/resnet.fleet, layer by layer, with the initialisers those programs name and,
where they name none, the ones Fleet's frontend gives by default (docs/program.md, after
Paddle): fc weights Xavier-uniform, biases zero, conv filters Normal(0, sqrt(2 / fan_in)),
batch-norm and layer-norm scale one and shift zero, embeddings Xavier-uniform. Where the
program gives an initializer:

  bert    TruncatedNormal(std=0.1) on every embedding and fc weight: Paddle and Fleet redraw
          samples outside two standard deviations, which is torch's trunc_normal_ with
          a = -0.2, b = 0.2 (its bounds are absolute, not in standard deviations)
  gpt     Normal(std=0.02) on every fc weight and both embeddings

Optimizers as the programs give them: Adam(lr=3e-3) for bert and gpt (Paddle's Adam puts
epsilon where torch's does once both are written out: lr * sqrt(1 - b2^t) / (1 - b1^t) *
m / (sqrt(v) + eps * sqrt(1 - b2^t))), Momentum(lr=0.05, momentum=0.9, L2Decay(1e-4)) for
resnet, which is torch's SGD with momentum and weight_decay (the decay added to every
gradient before the velocity, the first velocity the gradient itself). Paddle's batch-norm
momentum 0.9 weighs the old running statistic: torch's momentum 0.1. The metrics the
programs compute beside the loss (the accuracies) are computed here too, without gradients.

Data: the .npy files of the example's make_data.py in --data, one per data var of the program
(bert: src_ids, sent_ids, input_mask, label; gpt: tokens; resnet: image, label), read in order,
batch i being samples [i * batch, (i + 1) * batch) of the files, wrapping around. Prints one
JSON line: the steady-state samples/s of the --steps steps after --warmup, and the loss of every
step from the first.

--gemm N instead prints the best float32 rate of an N x N x N torch.matmul on --threads
threads, in GFLOP/s.

With --device cuda the model is built on the CPU as above (the same seed, so the same initial
weights) and then moved to the GPU, the whole data set is copied there once before any step (a
batch is a slice of it), TF32 is off as it is in Fleet's CUDA kernels, and the timed region is
bracketed by torch.cuda.synchronize() so that it measures finished work, not queued launches;
the losses stay on the GPU until the clock has stopped, so that reading them does not wait on
every step. --gemm N times the matmul on the GPU the same way. --threads is still required and
still sets torch's CPU threads, which do not matter there.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_timing import timed_steps


def linear(n_in, n_out, init):
    lin = torch.nn.Linear(n_in, n_out)
    init(lin.weight)
    torch.nn.init.zeros_(lin.bias)
    return lin


# ---------------------------------------------------------------------------------------------
# bert.fleet: post-norm Transformer encoder, [CLS] -> tanh pooler -> classifier.

class BertLayer(torch.nn.Module):
    def __init__(self, hidden, heads, ffn, init):
        super().__init__()
        self.heads, self.d_key = heads, hidden // heads
        self.query = linear(hidden, hidden, init)
        self.key = linear(hidden, hidden, init)
        self.value = linear(hidden, hidden, init)
        self.output = linear(hidden, hidden, init)
        self.post_att = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_0 = linear(hidden, ffn, init)
        self.ffn_1 = linear(ffn, hidden, init)
        self.post_ffn = torch.nn.LayerNorm(hidden, eps=1e-12)

    def split(self, t):
        b, s, _ = t.shape
        return t.reshape(b, s, self.heads, self.d_key).transpose(1, 2)

    def forward(self, x, attn_bias):
        b, s, h = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        product = torch.matmul(q, k.transpose(-1, -2)) * self.d_key ** -0.5
        weights = torch.softmax(product + attn_bias, dim=-1)
        ctx = torch.matmul(weights, v).transpose(1, 2).reshape(b, s, h)
        x = self.post_att(x + self.output(ctx))
        return self.post_ffn(x + self.ffn_1(F.gelu(self.ffn_0(x))))


class Bert(torch.nn.Module):
    def __init__(self, vocab=100, seq_len=16, types=2, hidden=32, layers=2, heads=4,
                 labels=4, init_range=0.1):
        super().__init__()

        def init(w):
            torch.nn.init.trunc_normal_(w, 0.0, init_range, -2 * init_range, 2 * init_range)

        self.heads = heads
        self.word = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Embedding(seq_len, hidden)
        self.sent = torch.nn.Embedding(types, hidden)
        for emb in (self.word, self.pos, self.sent):
            init(emb.weight)
        self.pre_encoder = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.layers = torch.nn.ModuleList(
            BertLayer(hidden, heads, 4 * hidden, init) for _ in range(layers))
        self.pooler = linear(hidden, hidden, init)
        self.cls = linear(hidden, labels, init)
        self.register_buffer("pos_ids", torch.arange(seq_len), persistent=False)

    def forward(self, src_ids, sent_ids, input_mask):
        h = self.word(src_ids) + self.pos(self.pos_ids) + self.sent(sent_ids)
        h = self.pre_encoder(h)
        # 0 between two real tokens, -10000 where either is padding; one copy per head.
        mask = torch.matmul(input_mask, input_mask.transpose(1, 2))
        bias = torch.stack([(mask - 1.0) * 10000.0] * self.heads, dim=1)
        for layer in self.layers:
            h = layer(h, bias)
        return self.cls(torch.tanh(self.pooler(h[:, 0])))


# ---------------------------------------------------------------------------------------------
# gpt.fleet: pre-norm causal Transformer, output projection tied to the token embedding.

class GptBlock(torch.nn.Module):
    def __init__(self, hidden, heads, ffn, init):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln_1 = torch.nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = linear(hidden, 3 * hidden, init)
        self.attn_proj = linear(hidden, hidden, init)
        self.ln_2 = torch.nn.LayerNorm(hidden, eps=1e-5)
        self.fc = linear(hidden, ffn, init)
        self.mlp_proj = linear(ffn, hidden, init)

    def split(self, t):
        b, s, _ = t.shape
        return t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, attn_bias):
        b, s, h = x.shape
        q, k, v = (self.split(t) for t in self.qkv(self.ln_1(x)).chunk(3, dim=-1))
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.head_dim ** -0.5
        probs = torch.softmax(scores + attn_bias, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        x = x + self.attn_proj(out)
        return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, vocab=64, seq_len=16, hidden=32, layers=2, heads=4, init_range=0.02):
        super().__init__()

        def init(w):
            torch.nn.init.normal_(w, 0.0, init_range)

        self.tok = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Embedding(seq_len, hidden)
        init(self.tok.weight)
        init(self.pos.weight)
        self.blocks = torch.nn.ModuleList(
            GptBlock(hidden, heads, 4 * hidden, init) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(hidden, eps=1e-5)
        causal = torch.tril(torch.ones(seq_len, seq_len))
        self.register_buffer("attn_bias", (1.0 - causal) * -1e4, persistent=False)
        self.register_buffer("pos_ids", torch.arange(seq_len), persistent=False)

    def forward(self, input_ids):
        h = self.tok(input_ids) + self.pos(self.pos_ids)
        for block in self.blocks:
            h = block(h, self.attn_bias)
        return torch.matmul(self.ln_f(h), self.tok.weight.t())


# ---------------------------------------------------------------------------------------------
# resnet.fleet: CIFAR-style ResNet-18 at an eighth of the width.

class ConvBn(torch.nn.Module):
    def __init__(self, c_in, c_out, k, stride=1, act=False):
        super().__init__()
        self.conv = torch.nn.Conv2d(c_in, c_out, k, stride=stride, padding=(k - 1) // 2,
                                    bias=False)
        torch.nn.init.normal_(self.conv.weight, 0.0, math.sqrt(2.0 / (k * k * c_in)))
        self.bn = torch.nn.BatchNorm2d(c_out, eps=1e-5, momentum=0.1)
        self.act = act

    def forward(self, x):
        y = self.bn(self.conv(x))
        return torch.relu(y) if self.act else y


class BasicBlock(torch.nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.branch2a = ConvBn(c_in, c_out, 3, stride, act=True)
        self.branch2b = ConvBn(c_out, c_out, 3, 1)
        self.branch1 = ConvBn(c_in, c_out, 1, stride) if c_in != c_out or stride != 1 else None

    def forward(self, x):
        short = self.branch1(x) if self.branch1 is not None else x
        return torch.relu(short + self.branch2b(self.branch2a(x)))


class ResNet18(torch.nn.Module):
    def __init__(self, channels=3, classes=10, widths=(8, 16, 32, 64), depth=(2, 2, 2, 2)):
        super().__init__()
        self.conv1 = ConvBn(channels, widths[0], 3, 1, act=True)
        blocks, c_in = [], widths[0]
        for stage, (width, n) in enumerate(zip(widths, depth)):
            for i in range(n):
                blocks.append(BasicBlock(c_in, width, 2 if i == 0 and stage != 0 else 1))
                c_in = width
        self.blocks = torch.nn.Sequential(*blocks)
        self.fc = linear(c_in, classes, torch.nn.init.xavier_uniform_)

    def forward(self, image):
        h = self.blocks(self.conv1(image))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


# ---------------------------------------------------------------------------------------------

def load(data_dir, names):
    out = []
    for name in names:
        path = os.path.join(data_dir, name + ".npy")
        if not os.path.exists(path):
            raise SystemExit(f"torch_zoo.py: {path} is missing (the example's make_data.py "
                             "writes one .npy per data var)")
        out.append(torch.from_numpy(np.load(path)))
    return out


def accuracy(scores, label):
    return (scores.argmax(dim=1) == label).float().mean()


def setup(model_name, data_dir, device):
    """The model, its optimizer, the data tensors and a function (tensors of one batch) -> loss,
    all on device. The model is initialised on the CPU and then moved, so that its initial
    weights are those of a CPU run with the same seed; it is moved before the optimizer is made,
    whose state then lives beside the parameters."""
    if model_name == "bert":
        model = Bert().to(device)
        data = load(data_dir, ["src_ids", "sent_ids", "input_mask", "label"])
        data[3] = data[3].reshape(-1)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8)

        def loss_fn(src_ids, sent_ids, input_mask, label):
            logits = model(src_ids, sent_ids, input_mask)
            loss = F.cross_entropy(logits, label)
            with torch.no_grad():
                accuracy(torch.softmax(logits, dim=1), label)
            return loss
    elif model_name == "gpt":
        model = Gpt().to(device)
        data = load(data_dir, ["tokens"])
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8)

        def loss_fn(tokens):
            logits = model(tokens[:, :-1])
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   tokens[:, 1:].reshape(-1))
    elif model_name == "resnet":
        data = load(data_dir, ["image", "label"])
        data[1] = data[1].reshape(-1)
        model = ResNet18(channels=data[0].shape[1]).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

        def loss_fn(image, label):
            logits = model(image)
            loss = F.cross_entropy(logits, label)
            with torch.no_grad():
                accuracy(logits, label)
            return loss
    else:
        raise SystemExit(f"torch_zoo.py: unknown model {model_name!r}")
    # The whole data set (50 MB at most, resnet's images) goes to the device once, here, out of
    # the timed steps; the int64 ids and labels go with it, so that the embeddings and the loss
    # index tensors on the device they index.
    return model, opt, [t.to(device) for t in data], loss_fn


def gemm_rate(n, device, reps=5, rounds=7):
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    cuda = device == "cuda"
    if cuda:
        # A GPU matmul returns once it is queued: wait for each round's to finish, and run more
        # of them per round, a 4096 one taking a few milliseconds.
        reps *= 4
    torch.matmul(a, b)  # the first call loads the kernels (and on a GPU creates cuBLAS's handle)
    best = 0.0
    for _ in range(rounds):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b)
        if cuda:
            torch.cuda.synchronize()
        best = max(best, 2.0 * n ** 3 * reps / (time.perf_counter() - start))
    return best / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["bert", "gpt", "resnet"])
    p.add_argument("--data", help="directory of the example's .npy files")
    p.add_argument("--batch", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--gemm", type=int, default=0, metavar="N",
                   help="print the float32 GEMM rate of N x N matrices instead of training")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            raise SystemExit(f"torch_zoo.py: --device cuda: torch {torch.__version__} (CUDA "
                             f"{torch.version.cuda}) sees no usable GPU")
        # Fleet's CUDA plugin computes float32 products and convolutions in float32, not TF32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if a.gemm:
        print(json.dumps({"gflops": gemm_rate(a.gemm, a.device)}))
        return
    if not (a.model and a.data and a.batch and a.steps):
        p.error("--model, --data, --batch and --steps are required for a training run")

    torch.manual_seed(1)
    model, opt, data, loss_fn = setup(a.model, a.data, a.device)
    model.train()
    batches = data[0].shape[0] // a.batch
    if batches < 1:
        raise SystemExit(f"torch_zoo.py: {data[0].shape[0]} samples, fewer than a batch")
    losses = []

    def step(i):
        b = i % batches
        loss = loss_fn(*(t[b * a.batch:(b + 1) * a.batch] for t in data))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # Kept as a tensor: float() here would make a GPU run wait for every step to finish.
        losses.append(loss.detach())

    elapsed, _ = timed_steps(step, a.warmup, a.steps, cuda)
    losses = torch.stack(losses).cpu().tolist()
    print(json.dumps({"samples_per_sec": a.steps * a.batch / elapsed, "losses": losses}))


if __name__ == "__main__":
    main()
