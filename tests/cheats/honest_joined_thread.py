"""Control: computes in a worker thread that it joins before returning."""
import threading

import torch
import torch.nn as nn

PROBLEM = "softmax"
CAUGHT_AS = None
GPU_ONLY = False


class ModelNew(nn.Module):
    def forward(self, x):
        box = []
        worker = threading.Thread(target=lambda: box.append(torch.softmax(x, dim=-1)))
        worker.start()
        worker.join()
        return box[0]
