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


# ---- LLM ops (schemas and kernels in ops/llm_ops.cc). The backward formulas are plain
# ATen ops, so they run on whatever device the tensors are on. The in-place ops
# (fused_add_rms_norm, rotary_embedding_, reshape_and_cache) and paged_attention are
# inference ops without autograd.


def _rms_norm_setup_context(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_norm_backward(ctx, grad):
    # y = x * r * w with r = rsqrt(mean(x^2) + eps):
    # dx = r * (g*w - x * r^2 * mean(g*w*x)),  dw = sum over rows of g * x * r.
    x, weight = ctx.saved_tensors
    xf, gf, wf = x.float(), grad.float(), weight.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
    gw = gf * wf
    grad_x = grad_w = None
    if ctx.needs_input_grad[0]:
        grad_x = (r * (gw - xf * (r * r) * (gw * xf).mean(-1, keepdim=True))).to(x.dtype)
    if ctx.needs_input_grad[1]:
        grad_w = (gf * xf * r).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
    return grad_x, grad_w, None


def _silu_and_mul_setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _silu_and_mul_backward(ctx, grad):
    # out = silu(a) * b:  da = g * b * s * (1 + a * (1 - s)) with s = sigmoid(a);  db = g * silu(a).
    (x,) = ctx.saved_tensors
    a, b = x.float().chunk(2, dim=-1)
    g = grad.float()
    s = torch.sigmoid(a)
    grad_a = g * b * s * (1 + a * (1 - s))
    grad_b = g * a * s
    return torch.cat([grad_a, grad_b], dim=-1).to(x.dtype)


def _rotary_embedding_setup_context(ctx, inputs, output):
    positions, _query, _key, head_size, cos_sin_cache, is_neox = inputs
    ctx.save_for_backward(positions, cos_sin_cache)
    ctx.head_size = head_size
    ctx.is_neox = is_neox


def _rotary_embedding_backward(ctx, grad_query, grad_key):
    # The rotation is orthogonal: its transpose is the rotation by -theta, i.e. the same op
    # with the sin half of the cache negated. Dims past rot_dim pass through (identity).
    positions, cache = ctx.saved_tensors
    half = cache.shape[-1] // 2
    inverse = torch.cat([cache[:, :half], -cache[:, half:]], dim=-1)
    gq, gk = torch.ops.xxnpu.rotary_embedding(positions, grad_query, grad_key, ctx.head_size, inverse, ctx.is_neox)
    return None, gq, gk, None, None, None


torch.library.register_autograd("xxnpu::rms_norm", _rms_norm_backward, setup_context=_rms_norm_setup_context)
torch.library.register_autograd("xxnpu::silu_and_mul", _silu_and_mul_backward,
                                setup_context=_silu_and_mul_setup_context)
torch.library.register_autograd("xxnpu::rotary_embedding", _rotary_embedding_backward,
                                setup_context=_rotary_embedding_setup_context)


def fallback_counts() -> Dict[str, int]:
    """Op name (e.g. ``"aten::abs"``) -> CPU-fallback uses since the last reset."""
    return dict(_C._fallback_counts())


def reset_fallback_counts() -> None:
    _C._reset_fallback_counts()


def native_ops() -> List[str]:
    """Names of the ops with an xxnpu kernel (sorted)."""
    return list(_C._native_ops())


__all__ = ["fallback_counts", "reset_fallback_counts", "native_ops"]
