"""ModelNew: a drop-in replacement for reference.Model (KernelBench level 2, problem 14).

The GEMM stays `torch.matmul(x, self.weight.T)`, exactly as in the reference; the
divide, the row sum and the scale run as one fused kernel, `kernels.div_sum_scale`,
which reproduces PyTorch's summation order and so returns the reference's bits.

`ModelNewColsum` is the other trade-off: the algebraic rewrite
`scale / 2 * (x @ W.sum(0))`, with the column sum cached and every sum in fp64. It
skips the GEMM (two orders of magnitude faster) and is far closer to the exact
answer than the reference, but it does not reproduce the reference's fp32 rounding:
it fails KernelBench's fp32 check at 1e-4 and passes at 1e-2.
"""

import weakref

import torch
import torch.nn as nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.optim.optimizer import register_optimizer_step_post_hook

import kernels

DIVISOR = 2

# Fused optimizers (`fused=True`) update parameters in place without bumping their
# version counters: every optimizer step, anywhere, counts as a change of the weight
# for ModelNewColsum's cache (cheap: it is recomputed on the next forward only).
_optimizer_steps = 0


def _count_optimizer_step(optimizer, args, kwargs) -> None:
    global _optimizer_steps
    _optimizer_steps += 1


register_optimizer_step_post_hook(_count_optimizer_step)


def _check_input(model: nn.Module, w: torch.Tensor, x) -> None:
    """x must be (batch, input_size) with the weight w's dtype and device: say which is off."""
    name = type(model).__name__
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != w.shape[1]:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: x must be a 2-D tensor (batch, {w.shape[1]}), got {shape}")
    if x.device != w.device or x.dtype != w.dtype:
        raise ValueError(
            f"{name}: x is {x.dtype} on {x.device} but the weight is {w.dtype} on {w.device}; "
            "move one of them (model.to(...))"
        )


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        # Same RNG call, same order, same name as the reference: a seed gives the same weight.
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        w = self.weight  # a Parameter lookup costs a Module.__getattr__: once per call
        _check_input(self, w, x)
        y = torch.matmul(x, w.T)
        return kernels.div_sum_scale(y, DIVISOR, self.scaling_factor)


class ModelNewColsum(nn.Module):
    """Drop-in for reference.Model computing `scale / 2 * (x @ colsum(W))`.

    NOT bit-exact with the reference, by design: the reference rounds a 1024 x 8192
    fp32 GEMM and then sums it in fp32 (rms error ~6e-3 against the exact answer at
    KernelBench sizes); this model sums W's columns and the dot products in fp64 and
    rounds once (error about that of rounding the exact answer to fp32). It fails
    KernelBench's fp32 allclose at 1e-4 (a few outputs per trial sit near zero, where
    the reference's own error exceeds the tolerance) and passes at 1e-2.

    The column sum (fp64, one value per input feature) is cached and recomputed
    only when the weight changes. The cache key is the weight Parameter itself (a
    replaced `weight` misses), its version counter (every in-place update:
    `load_state_dict`, `weight.add_()`, most optimizers), a count of optimizer steps
    (fused optimizers do not bump version counters), its storage (held by a weak
    reference, so `weight.data = t` misses even if `t` reuses the old address), data
    pointer, device, dtype, shape and strides; `.to()`, `.cuda()`, `.half()` and
    every other `Module._apply` also drop the cache. One change it cannot see: an
    in-place write through `weight.data` (`weight.data.copy_(t)`: `.data` has a
    version counter of its own); call `invalidate_colsum()` after such a write.
    When the weight requires grad and grad mode is on, the column sum is recomputed
    through the autograd-registered op so that gradients reach the weight; under
    `torch.no_grad()` (KernelBench's protocol) the cache serves every call after
    the first.
    """

    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        # Same RNG call, same order, same name as the reference: a seed gives the same weight.
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor
        self.invalidate_colsum()

    def invalidate_colsum(self) -> None:
        """Forget the cached column sum: the next forward recomputes it."""
        self._colsum_key = None
        self._colsum_value = None
        self.colsum_refreshes = getattr(self, "colsum_refreshes", 0)  # how many times it was computed

    def _key(self, w: torch.Tensor):
        try:
            version = w._version
            storage = StorageWeakRef(w.untyped_storage())
        except (RuntimeError, NotImplementedError):  # inference or storage-less tensors: never cache
            return None
        # The weak references pin identity: while they live, no new Parameter or
        # storage can reuse the old ones' addresses and pass for them.
        return (weakref.ref(w), storage, version, _optimizer_steps, w.data_ptr(), w.dtype, w.shape, w.stride())

    def _key_matches(self, w: torch.Tensor) -> bool:
        # Compared field by field, cheapest first, without building a new key: this
        # runs on every forward. The key's weak references keep the old Parameter's and
        # storage's addresses from being reused, so equal addresses mean the same
        # objects (and the same storage means the same device).
        old = self._colsum_key
        if old is None:
            return False
        w_ref, storage, version, steps, ptr, dtype, shape, stride = old
        try:
            return (
                w_ref() is w
                and w._version == version
                and steps == _optimizer_steps
                and w.untyped_storage()._cdata == storage.cdata
                and w.data_ptr() == ptr
                and w.dtype == dtype
                and w.shape == shape
                and w.stride() == stride
            )
        except (RuntimeError, NotImplementedError):
            return False

    def _apply(self, fn, *args, **kwargs):
        # .to() / .cuda() / .half() / ...: the weight's data is replaced; start over.
        self.invalidate_colsum()
        return super()._apply(fn, *args, **kwargs)

    def __getstate__(self):
        # Weak references do not pickle (torch.save(model)); the cache is rebuilt on use.
        state = dict(self.__dict__)
        state["_colsum_key"] = state["_colsum_value"] = None
        return state

    def colsum(self) -> torch.Tensor:
        """W.sum(0) in fp64, from the cache when the weight has not changed (no autograd)."""
        return self._colsum(differentiable=False)

    def _colsum(self, differentiable: bool, w: torch.Tensor | None = None) -> torch.Tensor:
        # A differentiable column sum is always recomputed through the op (autograd
        # registered), so that gradients reach the weight; its value refreshes the cache.
        if w is None:
            w = self.weight
        if torch.compiler.is_compiling():
            return kernels.colsum(w if differentiable else w.detach())
        stale = not self._key_matches(w)
        if not (stale or differentiable):
            return self._colsum_value
        with torch.set_grad_enabled(differentiable):
            value = kernels.colsum(w)
        if stale:
            self.colsum_refreshes += 1
        self._colsum_value, self._colsum_key = value.detach(), self._key(w)
        return value

    def forward(self, x):
        w = self.weight  # a Parameter lookup costs a Module.__getattr__: once per call
        _check_input(self, w, x)
        differentiable = torch.is_grad_enabled() and w.requires_grad
        return kernels.colsum_matvec(x, self._colsum(differentiable, w), self.scaling_factor / DIVISOR)
