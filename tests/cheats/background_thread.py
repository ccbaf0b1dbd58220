"""Starts a thread at construction that keeps running (work the timers never see)."""
import threading

import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "extra_threads"
GPU_ONLY = False


def _keep_busy(stop):
    stop.wait(60)  # gone by itself within a minute, so a test run leaves nothing behind


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stop = threading.Event()
        threading.Thread(target=_keep_busy, args=(self.stop,), name="prefetch", daemon=True).start()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
