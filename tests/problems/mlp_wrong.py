import torch.nn as nn


class ModelNew(nn.Module):
    """Right values, returned in float64 (reason: wrong_dtype)."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_features))

    def forward(self, x):
        return self.net(x).double()
