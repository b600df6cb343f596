"""The timed loop the PyTorch peers share (torch_mlp.py, torch_cnn.py, torch_zoo.py)."""
import time

import torch


def timed_steps(step, warmup, steps, cuda):
    """Runs step(0) .. step(warmup - 1) untimed, then step(warmup) .. step(warmup + steps - 1)
    timed; returns (seconds, the last step's result). On a GPU the clock is read between
    synchronisations, so that it measures finished work rather than queued launches."""
    for i in range(warmup):
        step(i)
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    last = None
    for i in range(steps):
        last = step(warmup + i)
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start, last
