import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cross-entropy of logits against int64 class targets (KernelBench level 1 problem 95's
    inputs, at small sizes). The targets arrive cast to the precision, as KernelBench casts
    every input tensor, so the forward takes them back to int64: without that, the reference
    itself cannot run under KernelBench's protocol."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.cross_entropy(predictions, targets.long())


batch_size = 64
num_classes = 10


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
