"""torch.xxnpu random-number state: seeds and generator states per device (torch.cuda.random's twin).

Each device has a Philox (counter-based) default generator: a seeded run gives the same
numbers whatever the number of device threads.
"""
from typing import Iterable, List, Union

import torch
from torch import Tensor

import torch_xxnpu.xxnpu as _xxnpu
from torch_xxnpu import _C

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "default_generators",
]


class _DefaultGenerators(tuple):
    pass


def _generators():
    _xxnpu._lazy_init()
    return _C._default_generators()


class _LazyDefaultGenerators:
    """torch.xxnpu.default_generators: the per-device default torch.Generator objects."""

    def __getitem__(self, i):
        return _generators()[i]

    def __len__(self):
        return _xxnpu.device_count()

    def __iter__(self):
        return iter(_generators())


default_generators = _LazyDefaultGenerators()


def _index(device: Union[int, str, torch.device]) -> int:
    if isinstance(device, str):
        device = torch.device(device)
    elif isinstance(device, int):
        device = torch.device("xxnpu", device)
    idx = device.index
    if idx is None:
        idx = _xxnpu.current_device()
    if not 0 <= idx < _xxnpu.device_count():
        raise ValueError(f"Invalid xxnpu device index {idx}: expected 0 <= index < {_xxnpu.device_count()}")
    return idx


def get_rng_state(device: Union[int, str, torch.device] = "xxnpu") -> Tensor:
    """The device's generator state as a CPU uint8 tensor (seed and Philox offset)."""
    return _generators()[_index(device)].get_state()


def get_rng_state_all() -> List[Tensor]:
    return [get_rng_state(i) for i in range(_xxnpu.device_count())]


def set_rng_state(new_state: Tensor, device: Union[int, str, torch.device] = "xxnpu") -> None:
    with torch._C._DisableFuncTorch():
        new_state_copy = new_state.clone(memory_format=torch.contiguous_format)
    idx = _index(device)
    _generators()[idx].set_state(new_state_copy)


def set_rng_state_all(new_states: Iterable[Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    _generators()[_xxnpu.current_device()].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in _generators():
        g.manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    _generators()[_xxnpu.current_device()].seed()


def seed_all() -> None:
    gens = _generators()
    s = gens[0].seed()
    for g in gens[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    return _generators()[_xxnpu.current_device()].initial_seed()
