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


def _device_of(device: Union[int, str, torch.device]) -> torch.device:
    """An xxnpu torch.device, its index checked when given (None: the current device)."""
    if isinstance(device, str):
        device = torch.device(device)
    elif isinstance(device, int):
        device = torch.device("xxnpu", device)
    if not isinstance(device, torch.device) or device.type != "xxnpu":
        raise ValueError(f"Expected an xxnpu device, but got: {device}")
    if device.index is not None and not 0 <= device.index < _xxnpu.device_count():
        # The class the C++ side (and torch.cuda's "invalid device ordinal") raises.
        raise torch.AcceleratorError(
            f"Invalid xxnpu device index {device.index}: expected 0 <= index < {_xxnpu.device_count()}"
        )
    return device


def _index(device: Union[int, str, torch.device]) -> int:
    idx = _device_of(device).index
    return _xxnpu.current_device() if idx is None else idx


def get_rng_state(device: Union[int, str, torch.device] = "xxnpu") -> Tensor:
    """The device's generator state as a CPU uint8 tensor (seed and Philox offset)."""
    _xxnpu._lazy_init()
    return _generators()[_index(device)].get_state()


def get_rng_state_all() -> List[Tensor]:
    return [get_rng_state(i) for i in range(_xxnpu.device_count())]


def set_rng_state(new_state: Tensor, device: Union[int, str, torch.device] = "xxnpu") -> None:
    """Sets the device's generator state (applied at initialisation if the device is not yet in use)."""
    with torch._C._DisableFuncTorch():
        new_state_copy = new_state.clone(memory_format=torch.contiguous_format)
    dev = _device_of(device)

    def cb():
        idx = _xxnpu.current_device() if dev.index is None else dev.index
        _generators()[idx].set_state(new_state_copy)

    _xxnpu._lazy_call(cb)


def set_rng_state_all(new_states: Iterable[Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator.

    As torch.cuda.manual_seed: before the device is in use, the seed is kept and applied
    at initialisation (torch.manual_seed() calls manual_seed_all without starting xxnpu).
    """
    seed = int(seed)

    def cb():
        _generators()[_xxnpu.current_device()].manual_seed(seed)

    _xxnpu._lazy_call(cb, seed=True)


def manual_seed_all(seed: int) -> None:
    """Seeds every device's generator."""
    seed = int(seed)

    def cb():
        for g in _generators():
            g.manual_seed(seed)

    _xxnpu._lazy_call(cb, seed_all=True)


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""

    def cb():
        _generators()[_xxnpu.current_device()].seed()

    _xxnpu._lazy_call(cb)


def seed_all() -> None:
    """Seeds every device's generator with one non-deterministic number."""

    def cb():
        gens = _generators()
        s = gens[0].seed()
        for g in gens[1:]:
            g.manual_seed(s)

    _xxnpu._lazy_call(cb)


def initial_seed() -> int:
    """The current device's seed (initialises the device)."""
    _xxnpu._lazy_init()
    return _generators()[_xxnpu.current_device()].initial_seed()
