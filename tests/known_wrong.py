"""Known-wrong candidates for check.py, one per way a kernel can go wrong.

Each keeps reference.Model's constructor signature and creates its weight first,
with the same RNG call, so under the same seed it holds the reference's weight:
whatever differs in the output comes from its forward alone.
"""

import torch
import torch.nn as nn


class _Base(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def gemm_half(self, x):
        # The reference's GEMM and divide, bit for bit.
        return torch.matmul(x, self.weight.T) / 2


class ReorderedSum(_Base):
    """Right GEMM, fp32 tail summed in another order (groups of 4, then the groups)."""

    def forward(self, x):
        y = self.gemm_half(x)
        b = y.shape[0]
        return y.view(b, -1, 4).sum(2).sum(1, keepdim=True) * self.scaling_factor


class Fp64Sum(_Base):
    """Right GEMM, tail accumulated in fp64 then rounded to fp32: more accurate, other bits."""

    def forward(self, x):
        y = self.gemm_half(x)
        return (y.double().sum(1, keepdim=True) * self.scaling_factor).to(y.dtype)


class ColumnSum(_Base):
    """The algebraic rewrite x @ W.sum(0) * s/2: far cheaper, rounds very differently."""

    def forward(self, x):
        return (x @ self.weight.sum(0)).unsqueeze(1) * (self.scaling_factor / 2)


class Zeros(_Base):
    def forward(self, x):
        return torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)


class WrongShape(_Base):
    """Forgets keepdim... and worse: returns two columns."""

    def forward(self, x):
        s = torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor
        return torch.cat([s, s], dim=1)


class NoKeepdim(_Base):
    def forward(self, x):
        return torch.sum(self.gemm_half(x), dim=1) * self.scaling_factor


class LastRowZero(_Base):
    """A grid that misses the last row (an off-by-one in the launch bounds)."""

    def forward(self, x):
        out = torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor
        out[-1] = 0
        return out


class LastRowGarbage(_Base):
    """The last row left as whatever the output buffer held."""

    def forward(self, x):
        out = torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor
        out[-1] = 123456.0
        return out


class OneNaN(_Base):
    def forward(self, x):
        out = torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor
        out[out.shape[0] // 2] = float("nan")
        return out


class MutatesInput(_Base):
    """Right answer, but uses x as scratch afterwards (x.add_ really changes it)."""

    def forward(self, x):
        out = torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor
        x.add_(1)
        return out


class CachesOutput(_Base):
    """Computes once and returns that result for every later input."""

    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__(input_size, hidden_size, scaling_factor)
        self._cached = None

    def forward(self, x):
        if self._cached is None:
            self._cached = torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor
        return self._cached


class RaisesInForward(_Base):
    def forward(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


class WrongDtype(_Base):
    def forward(self, x):
        return (torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor).double()


class ReturnsTuple(_Base):
    def forward(self, x):
        return (torch.sum(self.gemm_half(x), dim=1, keepdim=True) * self.scaling_factor,)


class BadConstructor(nn.Module):
    """Takes the wrong constructor arguments."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))

    def forward(self, x):
        return x
