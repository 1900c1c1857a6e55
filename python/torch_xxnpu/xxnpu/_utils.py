"""Device-index parsing shared by torch.xxnpu (torch.serialization also calls it)."""
from typing import Any

import torch


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False, check: bool = False) -> int:
    """torch.device / "xxnpu:1" / 1 / None -> an xxnpu device index.

    None (or a device without an index) gives the current device when ``optional`` and
    is a ValueError otherwise, as in torch.cuda._utils._get_device_index. ``check=True``
    also checks the range (torch.AcceleratorError): torch.xxnpu's own functions pass it.
    The default is torch.cuda's contract, because torch itself calls this function
    (torch.serialization's _validate_device, `_get_device_index(device, True)`) and raises
    its own error for a bad index ("Attempting to deserialize object on XXNPU device 5 but
    torch.xxnpu.device_count() is 2").
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != "xxnpu":
            raise ValueError(f"Expected an xxnpu device, but got: {device}")
        device_idx = device.index
    elif isinstance(device, int):
        device_idx = device
    elif device is None:
        device_idx = None
    else:
        raise ValueError(f"Expected a torch.device, str, int or None for an xxnpu device, got {type(device).__name__}")
    if device_idx is None:
        if optional:
            import torch_xxnpu.xxnpu as xxnpu

            return xxnpu.current_device()
        raise ValueError(f"Expected an xxnpu device with a specified index or an integer, but got: {device}")
    # Checked here, before the index can become a torch.device or reach a c10::DeviceIndex
    # (8 bits: 256 would select device 0): -1 (current) or 0..count-1, else
    # torch.AcceleratorError, as torch.cuda raises for an invalid ordinal.
    if not check:
        return device_idx
    from torch_xxnpu import _C

    return _C._check_device_index(device_idx)
