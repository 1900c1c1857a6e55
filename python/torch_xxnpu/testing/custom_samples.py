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


# The LLM ops (ops/llm_*_ops.cc; shapes as docs/llm-ops.md gives them). Generic (4, 8)
# samples do not fit their shape rules, so without these opcheck and the fuzzer would
# only see the ops reject their arguments.

def _rope_cache(max_pos, rot_dim, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv
    return torch.cat([ang.cos(), ang.sin()], -1).to(dtype)


@register_samples("xxnpu::rms_norm", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _rms_norm(dtype, requires_grad):
    for shape in [(4, 16), (2, 3, 40), (1, 130), (0, 8), (5,)]:
        yield SampleInput(_t(shape, dtype, requires_grad), args=(_t(shape[-1:], dtype, requires_grad), 1e-6))
    yield SampleInput(_t((6, 24), dtype, requires_grad, noncontiguous=True), args=(_t((24,), dtype, requires_grad), 1e-5))


@register_samples("xxnpu::fused_add_rms_norm", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _fused_add_rms_norm(dtype, requires_grad):
    for shape in [(4, 16), (2, 3, 40), (1, 8), (0, 8)]:
        yield SampleInput(_t(shape, dtype, False), args=(_t(shape, dtype, False), _t(shape[-1:], dtype, False), 1e-6))


@register_samples("xxnpu::silu_and_mul", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _silu_and_mul(dtype, requires_grad):
    for shape in [(3, 16), (2, 5, 22), (1, 2), (0, 8)]:
        yield SampleInput(_t(shape, dtype, requires_grad))
    yield SampleInput(_t((4, 12), dtype, requires_grad, noncontiguous=True))


def _rotary_samples(dtype):
    g = torch.Generator().manual_seed(4)
    D = 8
    cache = _rope_cache(16, D, torch.float32)
    for is_neox in (True, False):
        pos = torch.randint(0, 16, (5,), generator=g)
        yield SampleInput(pos, args=(_t((5, 4 * D), dtype, False), _t((5, 2 * D), dtype, False), D, cache, is_neox))
    pos = torch.randint(0, 16, (2, 3), generator=g).int()
    yield SampleInput(pos, args=(_t((2, 3, 2 * D), dtype, False), _t((2, 3, D), dtype, False), D, cache, True))
    # Partial rotary: the cache covers 4 of the 8 dims.
    yield SampleInput(torch.tensor([0, 3, 7]), args=(_t((3, 2, D), dtype, False), _t((3, 1, D), dtype, False), D,
                                                      _rope_cache(16, 4, dtype), False))


@register_samples("xxnpu::rotary_embedding", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _rotary_embedding(dtype, requires_grad):
    yield from _rotary_samples(dtype)


@register_samples("xxnpu::rotary_embedding_", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _rotary_embedding_(dtype, requires_grad):
    yield from _rotary_samples(dtype)


@register_samples("xxnpu::reshape_and_cache", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _reshape_and_cache(dtype, requires_grad):
    NB, BS, KVH, D = 6, 4, 2, 8
    for slots in ([5, 0, 23, -1, 9], [1], []):
        T = len(slots)
        yield SampleInput(_t((T, KVH, D), dtype, False),
                          args=(_t((T, KVH, D), dtype, False), torch.zeros(NB, BS, KVH, D, dtype=dtype),
                                torch.zeros(NB, BS, KVH, D, dtype=dtype), torch.tensor(slots, dtype=torch.int64)))


@register_samples("xxnpu::paged_attention", dtypes=(torch.float32, torch.float16, torch.bfloat16))
def _paged_attention(dtype, requires_grad):
    g = torch.Generator().manual_seed(7)
    BS, D = 4, 8
    for H, KVH, lens in [(4, 2, [5, 1, 12, 0]), (2, 2, [3]), (6, 1, [8, 2])]:
        S = len(lens)
        max_blocks = max((n + BS - 1) // BS for n in lens) + 1
        NB = S * max_blocks + 2
        tables = torch.randperm(NB, generator=g)[: S * max_blocks].reshape(S, max_blocks).int()
        yield SampleInput(_t((S, H, D), dtype, False),
                          args=(_t((NB, BS, KVH, D), dtype, False), _t((NB, BS, KVH, D), dtype, False), tables,
                                torch.tensor(lens, dtype=torch.int32), D ** -0.5))
