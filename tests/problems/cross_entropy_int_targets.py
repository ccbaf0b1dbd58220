import torch.nn as nn


class ModelNew(nn.Module):
    """Right for int64 targets, but uses them as indices as they come: under KernelBench's cast
    they arrive as floats and gather refuses them (reason: forward_error)."""

    def forward(self, predictions, targets):
        log_p = predictions.log_softmax(dim=-1)
        return -log_p.gather(1, targets.unsqueeze(1)).mean()
