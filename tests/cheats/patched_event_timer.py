"""Replaces CUDA events' elapsed_time when its module is imported: every timed call 1 us."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "patched_timer"
GPU_ONLY = False

torch.cuda.Event.elapsed_time = lambda self, end: 0.001


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
