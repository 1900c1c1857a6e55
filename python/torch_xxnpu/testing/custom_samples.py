"""Sample inputs for the ``torch.ops.xxnpu.*`` custom ops in the opcheck sweep.

An OpInfo carries its own sample inputs; a custom op does not, and its schema does not
say which shapes fit together (a weight must match the last dimension of ``x``, a cache
must match the head size...). Register a generator here when you add a custom op::

    @register_samples("xxnpu::rms_norm", dtypes=FLOATS)
    def _rms_norm(dtype, requires_grad):
        x = make_tensor((4, 16), dtype=dtype, device="cpu", requires_grad=requires_grad)
        w = make_tensor((16,), dtype=dtype, device="cpu", requires_grad=requires_grad)
        yield SampleInput(x, args=(w, 1e-6))

Generators make CPU tensors; the sweep copies each sample to xxnpu (strides and all)
and runs the op's xxnpu kernel and its CPU kernel on the two copies. An op without a
generator gets one generic sample (every Tensor argument a (4, 8) tensor, numbers from
their defaults); if its CPU kernel rejects that, the op is reported as skipped with the
reason, which is your cue to register one.
"""
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

import torch
from torch.testing import make_tensor
from torch.testing._internal.opinfo.core import SampleInput

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

SampleFn = Callable[[torch.dtype, bool], Iterable[SampleInput]]

# "ns::name" or "ns::name.overload" -> (generator, dtypes)
_REGISTRY: Dict[str, Tuple[SampleFn, Tuple[torch.dtype, ...]]] = {}


def register_samples(qualname: str, dtypes: Sequence[torch.dtype] = FLOATS):
    """Decorator: ``fn(dtype, requires_grad)`` yields SampleInputs (CPU tensors) for the op."""

    def wrap(fn: SampleFn) -> SampleFn:
        _REGISTRY[qualname] = (fn, tuple(dtypes))
        return fn

    return wrap


def lookup(qualname: str) -> Optional[Tuple[SampleFn, Tuple[torch.dtype, ...]]]:
    """The generator for "ns::name.overload", else the one for "ns::name"."""
    if qualname in _REGISTRY:
        return _REGISTRY[qualname]
    return _REGISTRY.get(qualname.split(".")[0])


def _t(shape, dtype, requires_grad, noncontiguous=False):
    return make_tensor(shape, dtype=dtype, device="cpu", requires_grad=requires_grad,
                       noncontiguous=noncontiguous, low=-4, high=4)


@register_samples("xxnpu::add", dtypes=FLOATS + (torch.int32, torch.int64))
def _add(dtype, requires_grad):
    rg = requires_grad and (dtype.is_floating_point or dtype.is_complex)
    for a, b in [((5,), (5,)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (7,)), ((0, 3), (3,))]:
        yield SampleInput(_t(a, dtype, rg), args=(_t(b, dtype, rg),))
    yield SampleInput(_t((6, 8), dtype, rg, noncontiguous=True), args=(_t((6, 8), dtype, rg, noncontiguous=True),))
    big = _t((40, 100), dtype, rg)
    yield SampleInput(big.t(), args=(_t((100, 1), dtype, rg),))
