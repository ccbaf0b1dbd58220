import torch.nn as nn


class ModelNew(nn.Module):
    """The sum over the batch where the mean is wanted (reason: mismatch)."""

    def forward(self, predictions, targets):
        log_p = predictions.log_softmax(dim=-1)
        return -log_p.gather(1, targets.long().unsqueeze(1)).sum()
