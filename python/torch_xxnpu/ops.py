"""What runs natively on xxnpu, and what fell back to the CPU.

Every op without an xxnpu kernel still runs, on the CPU (inputs copied off the device and
results copied back), warning once per op. ``XXNPU_STRICT_FALLBACK=1`` makes such a
fallback an error instead.
"""
from typing import Dict, List

import torch

from torch_xxnpu import _C


def _sum_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Reduces a broadcast gradient back to an input's shape."""
    return grad if grad.shape == shape else grad.sum_to_size(shape)


def _add_setup_context(ctx, inputs, output):
    a, b = inputs
    ctx.shapes = (a.shape, b.shape)


def _add_backward(ctx, grad):
    a_shape, b_shape = ctx.shapes
    return _sum_to(grad, a_shape), _sum_to(grad, b_shape)


# torch.ops.xxnpu.add's schema and kernels are registered in C++ (ops/custom_ops.cc).
torch.library.register_autograd("xxnpu::add", _add_backward, setup_context=_add_setup_context)


def fallback_counts() -> Dict[str, int]:
    """Op name (e.g. ``"aten::abs"``) -> CPU-fallback uses since the last reset."""
    return dict(_C._fallback_counts())


def reset_fallback_counts() -> None:
    _C._reset_fallback_counts()


def native_ops() -> List[str]:
    """Names of the ops with an xxnpu kernel (sorted)."""
    return list(_C._native_ops())


__all__ = ["fallback_counts", "reset_fallback_counts", "native_ops"]
