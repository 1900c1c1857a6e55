"""torch.xxnpu: the xxnpu device module, at parity with torch.cuda.

Installed as ``torch.xxnpu`` by ``import torch_xxnpu`` (or torch's backend autoload).
"""
import sys
import threading
import traceback
from typing import Any, List, Optional, Tuple, Union

import torch
from torch_xxnpu import _C

from torch_xxnpu.xxnpu._utils import _get_device_index

_initialized = False
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls: List[Tuple[Any, List[str]]] = []

_device_t = Union[torch.device, str, int, None]


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_available() -> bool:
    """True when at least one xxnpu device exists (the simulator always has some)."""
    return device_count() > 0


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


class _LazySeedTracker:
    """Keeps only the latest manual_seed / manual_seed_all made before initialisation (as
    torch.cuda does), so seeding repeatedly before first use does not grow a queue."""

    def __init__(self):
        self.manual_seed_all_cb = None
        self.manual_seed_cb = None
        self.call_order: List[Any] = []

    def queue_seed_all(self, cb, traceback):
        self.manual_seed_all_cb = (cb, traceback)
        self.call_order = [self.manual_seed_cb, self.manual_seed_all_cb]

    def queue_seed(self, cb, traceback):
        self.manual_seed_cb = (cb, traceback)
        self.call_order = [self.manual_seed_all_cb, self.manual_seed_cb]

    def get_calls(self) -> List[Any]:
        return self.call_order


_lazy_seed_tracker = _LazySeedTracker()


def _lazy_call(callable, **kwargs):
    """Runs ``callable`` now if the device is initialised, else at initialisation."""
    if is_initialized():
        callable()
    else:
        if kwargs.get("seed_all", False):
            _lazy_seed_tracker.queue_seed_all(callable, traceback.format_stack())
        elif kwargs.get("seed", False):
            _lazy_seed_tracker.queue_seed(callable, traceback.format_stack())
        else:
            _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init() -> None:
    """Starts the device runtime once per process; refuses in a child forked after that."""
    global _initialized
    if is_initialized() or hasattr(_tls, "is_initializing"):
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize xxnpu in forked subprocess. To use xxnpu with "
                "multiprocessing, you must use the 'spawn' start method"
            )
        _C._init()
        _tls.is_initializing = True
        _queued_calls.extend(calls for calls in _lazy_seed_tracker.get_calls() if calls)
        try:
            for queued_call, orig_traceback in _queued_calls:
                try:
                    queued_call()
                except Exception as e:
                    msg = f"xxnpu call failed lazily at initialization with error: {e}\n\nxxnpu call was originally invoked at:\n\n{''.join(orig_traceback)}"
                    raise RuntimeError(msg) from e
            _queued_calls.clear()
        finally:
            delattr(_tls, "is_initializing")
        _initialized = True


def init() -> None:
    _lazy_init()


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    _lazy_init()
    return _C._get_device()


def set_device(device: _device_t) -> None:
    device = _get_device_index(device, check=True)
    if device >= 0:
        _lazy_init()
        _C._set_device(device)


class device:
    """Context manager that changes the current xxnpu device (like torch.cuda.device)."""

    def __init__(self, device: Any):
        self.idx = _get_device_index(device, optional=True, check=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            _lazy_init()
            self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, type: Any, value: Any, traceback: Any):
        if self.prev_idx != -1 and self.prev_idx != self.idx:
            _C._exchange_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes a tensor's device current (no-op for CPU tensors)."""

    def __init__(self, obj):
        idx = obj.get_device() if obj.is_xxnpu else -1
        super().__init__(idx)


def synchronize(device: _device_t = None) -> None:
    """Waits for all work on every stream of the device; raises a kernel's failure."""
    if torch.compiler.is_compiling():
        # Under Dynamo, the form it traces (torch.cuda.synchronize's handler): a
        # synchronize_device node in the graph, not a graph break on the runtime call.
        return torch.accelerator.synchronize(*_compile_device_arg(device))
    _lazy_init()
    _C._synchronize(_get_device_index(device, optional=True, check=True) if device is not None else current_device())


def _compile_device_arg(device: _device_t) -> tuple:
    """torch.accelerator's device argument for Dynamo's stream/synchronize handlers (which
    take a constant device, never None)."""
    if device is None:
        return ()
    if isinstance(device, int):
        return (torch.device("xxnpu", device),)
    return (torch.device(device),)


def get_device_name(device: _device_t = None) -> str:
    return get_device_properties(device).name


def get_device_properties(device: _device_t = None):
    _lazy_init()
    # torch.cuda's AssertionError for any index outside 0..count-1 (checked on the full
    # Python int, so 256 is not narrowed to device 0 on the way).
    idx = _get_device_index(device, optional=True, check=False)
    if idx < 0 or idx >= device_count():
        raise AssertionError(f"Invalid device id {idx}: xxnpu has {device_count()} devices")
    return _C._get_device_properties(idx)


def get_device_capability(device: _device_t = None) -> Tuple[int, int]:
    """(major, minor) architecture version of the device, as torch.cuda's."""
    props = get_device_properties(device)
    return props.major, props.minor


def get_amp_supported_dtype() -> List[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


from torch_xxnpu.xxnpu.random import *  # noqa: F401,F403,E402
from torch_xxnpu.xxnpu.random import __all__ as _random_all  # noqa: E402
from torch_xxnpu.xxnpu.streams import *  # noqa: F401,F403,E402
from torch_xxnpu.xxnpu.streams import __all__ as _streams_all  # noqa: E402
from torch_xxnpu.xxnpu.memory import *  # noqa: F401,F403,E402
from torch_xxnpu.xxnpu.memory import __all__ as _memory_all  # noqa: E402
from torch_xxnpu.xxnpu.graphs import *  # noqa: F401,F403,E402
from torch_xxnpu.xxnpu.graphs import __all__ as _graphs_all  # noqa: E402
from torch_xxnpu.xxnpu.ipc import ipc_collect  # noqa: F401,E402
from torch_xxnpu.xxnpu import graphs, ipc, markers, memory, random, streams, _utils  # noqa: F401,E402

# torch.xxnpu.profiler: the markers' earlier name, kept for existing code as the same module object,
# importable under both package names (torch.xxnpu is this package; Python would load a second copy).
sys.modules["torch.xxnpu.markers"] = markers
profiler = sys.modules[f"{__name__}.profiler"] = sys.modules["torch.xxnpu.profiler"] = markers

ipc._install()

__all__ = [
    "is_available",
    "is_initialized",
    "init",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "device_of",
    "synchronize",
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "get_amp_supported_dtype",
    "is_bf16_supported",
    "ipc_collect",
] + _random_all + _streams_all + _memory_all + _graphs_all
