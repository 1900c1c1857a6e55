"""Dynamo's view of the xxnpu device (torch._dynamo.device_interface).

Dynamo and Inductor ask a ``DeviceInterface`` for the current device and stream, device
properties (also from compile workers, through ``Worker``), synchronisation, and which
classes are the device's Stream/Event (they must be ``torch.Stream``/``torch.Event``
subclasses for Dynamo to trace them: torch.xxnpu's are).
"""
import functools
from typing import Any

import torch

import torch_xxnpu.xxnpu as _xxnpu

# Properties recorded in the parent process, for compile workers that must not start the
# device runtime (as Dynamo's CUDA interface does with caching_worker_device_properties).
_worker_properties: dict = {}
_worker_device: dict = {}


def _exchange_device(device: int) -> int:
    if device < 0:
        return -1
    prev = _xxnpu.current_device()
    if prev != device:
        _xxnpu.set_device(device)
    return prev


def _raw_stream(device_idx: int) -> int:
    return _xxnpu.current_stream(device_idx).native_handle


def _make_interface(base):
    class XxnpuInterface(base):
        device = _xxnpu.device
        Event = _xxnpu.Event
        Stream = _xxnpu.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                _worker_device["xxnpu"] = device

            @staticmethod
            def current_device() -> int:
                if "xxnpu" in _worker_device:
                    return _worker_device["xxnpu"]
                return _xxnpu.current_device()

            @staticmethod
            def get_device_properties(device: Any = None) -> Any:
                if isinstance(device, str):
                    device = torch.device(device)
                if isinstance(device, torch.device):
                    if device.type != "xxnpu":
                        raise ValueError(f"expected an xxnpu device, got {device}")
                    device = device.index
                if device is None:
                    device = XxnpuInterface.Worker.current_device()
                if "xxnpu" not in _worker_properties:
                    _worker_properties["xxnpu"] = [
                        _xxnpu.get_device_properties(i) for i in range(_xxnpu.device_count())
                    ]
                return _worker_properties["xxnpu"][device]

        current_device = staticmethod(_xxnpu.current_device)
        set_device = staticmethod(_xxnpu.set_device)
        device_count = staticmethod(_xxnpu.device_count)
        is_available = staticmethod(_xxnpu.is_available)
        stream = staticmethod(_xxnpu.stream)
        current_stream = staticmethod(_xxnpu.current_stream)
        set_stream = staticmethod(_xxnpu.set_stream)
        synchronize = staticmethod(_xxnpu.synchronize)
        get_device_properties = staticmethod(_xxnpu.get_device_properties)
        get_raw_stream = staticmethod(_raw_stream)
        exchange_device = staticmethod(_exchange_device)
        maybe_exchange_device = staticmethod(_exchange_device)
        memory_allocated = staticmethod(_xxnpu.memory_allocated)
        is_bf16_supported = staticmethod(_xxnpu.is_bf16_supported)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            _xxnpu.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

        @staticmethod
        def get_compute_capability(device: Any = None) -> int:
            major, minor = _xxnpu.get_device_capability(device)
            return major * 10 + minor

        @staticmethod
        def is_triton_capable(device: Any = None) -> bool:
            return False  # Inductor's C++ codegen, not Triton (docs/compile.md)

    return XxnpuInterface


XxnpuInterface = None


def register(device_interface_module) -> None:
    """Registers the interface for "xxnpu" and each "xxnpu:N" (as Dynamo does for cuda)."""
    global XxnpuInterface
    if XxnpuInterface is None:
        XxnpuInterface = _make_interface(device_interface_module.DeviceInterface)
    device_interface_module.register_interface_for_device("xxnpu", XxnpuInterface)
    for i in range(_xxnpu.device_count()):
        device_interface_module.register_interface_for_device(f"xxnpu:{i}", XxnpuInterface)


def register_in_graph_classes(user_defined_module) -> None:
    """Lets Dynamo construct torch.xxnpu.Stream/Event inside a graph, as it does
    torch.cuda.Stream/Event: torch 2.13 lists the in-graph stream and event classes by name
    (UserDefinedClassVariable._in_graph_classes: torch, cuda, xpu, hpu), so the xxnpu
    classes are added to that list. Without it, ``torch.xxnpu.Event()`` in compiled code is a
    graph break ("function marked as skipped": the constructor starts the runtime)."""
    cls = user_defined_module.UserDefinedClassVariable
    original = cls._in_graph_classes
    if getattr(original, "_xxnpu", False):
        return

    @functools.cache
    def _in_graph_classes():
        return original() | {_xxnpu.Stream, _xxnpu.Event}

    _in_graph_classes._xxnpu = True
    cls._in_graph_classes = staticmethod(_in_graph_classes)
