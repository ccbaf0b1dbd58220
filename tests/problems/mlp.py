import torch
import torch.nn as nn


class Model(nn.Module):
    """A small multi-layer perceptron."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_features))

    def forward(self, x):
        return self.net(x)


batch_size = 16
in_features = 40
hidden = 64
out_features = 10


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
