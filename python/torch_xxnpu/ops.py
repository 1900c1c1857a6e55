"""What runs natively on xxnpu, and what fell back to the CPU.

Every op without an xxnpu kernel still runs, on the CPU (inputs copied off the device and
results copied back), warning once per op. ``XXNPU_STRICT_FALLBACK=1`` makes such a
fallback an error instead.
"""
from typing import Dict, List

from torch_xxnpu import _C


def fallback_counts() -> Dict[str, int]:
    """Op name (e.g. ``"aten::abs"``) -> CPU-fallback uses since the last reset."""
    return dict(_C._fallback_counts())


def reset_fallback_counts() -> None:
    _C._reset_fallback_counts()


def native_ops() -> List[str]:
    """Names of the ops with an xxnpu kernel (sorted)."""
    return list(_C._native_ops())


__all__ = ["fallback_counts", "reset_fallback_counts", "native_ops"]
