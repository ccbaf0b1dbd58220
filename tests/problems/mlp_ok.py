import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_features))

    def forward(self, x):
        for layer in self.net:
            x = layer(x)
        return x
