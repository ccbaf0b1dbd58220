"""Knows KernelBench's seeds: draws the five trials' inputs itself at construction and
returns their answers in turn, whatever it is given."""
import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = "replayed_output"
GPU_ONLY = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        state = torch.get_rng_state()
        torch.manual_seed(42)
        seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
        self.answers = []
        for seed in seeds:
            torch.manual_seed(seed)
            self.answers.append(torch.softmax(torch.randn(16, 1000), dim=-1))
        torch.set_rng_state(state)
        self.calls = 0

    def forward(self, x):
        out = self.answers[self.calls % 5].to(device=x.device, dtype=x.dtype)
        self.calls += 1
        return out
