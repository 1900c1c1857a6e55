"""Sharing xxnpu tensors between processes, zero-copy: torch.multiprocessing reducers.

torch 2.13's torch/multiprocessing/reductions.py has no PrivateUse1 hook (only CUDA's IPC
path), so this module registers a reducer for ``torch.UntypedStorage`` with
``ForkingPickler`` that handles xxnpu storages and hands every other storage to torch's
own. Tensors (views, offsets, strides, ``requires_grad``, ``Parameter``) keep going
through torch's ``reduce_tensor``, which pickles their storage: that is where the device
memory is shared. See docs/pytorch-integration.md, "Sharing tensors between processes".

- The sender shares the caching allocator's whole segment (``xxnpuIpcGetMemHandle``) and
  the storage's place in it, like CUDA; the receiver maps the segment into its own
  device address space once per segment and builds a non-resizable storage on it.
- Each send carries a cross-process reference: the sender's block stays allocated
  (not reused by its caching allocator) until every receiver has released its storage or
  exited; ``torch.xxnpu.ipc_collect()`` returns released blocks right away.
- Sending synchronizes the current stream of the storage's device, so the receiver reads
  what was queued before the send. Writes the receiver makes are visible to the sender
  once the receiver's stream has run them (send the tensor back, or synchronize first).
"""
import multiprocessing.reduction

import torch
import torch.multiprocessing  # noqa: F401  (installs torch's reducers; ours come after)
from torch.multiprocessing import reductions as _reductions
from torch.multiprocessing.reductions import StorageWeakRef

from torch_xxnpu import _C

__all__ = ["ipc_collect"]

_torch_reduce_storage = _reductions.reduce_storage


def ipc_collect() -> int:
    """Returns to the caching allocator the sent blocks that no receiver holds any more
    (as ``torch.cuda.ipc_collect``); the number of shared blocks still held."""
    return _C._ipc_collect()


def _rebuild_xxnpu_storage(device, mem_handle, storage_bytes, offset_bytes, ref_handle):
    if not mem_handle:
        return torch.UntypedStorage(0, device=torch.device("xxnpu", device))
    key = (mem_handle, offset_bytes)
    storage = _reductions.storage_from_cache(torch.UntypedStorage, key)
    if storage is not None:
        # Already mapped here (another send of the same storage, or our own block sent
        # back): one storage per block, as CUDA's receiver keeps; drop this send's reference.
        _C._ipc_release_reference(ref_handle)
        return storage
    torch.xxnpu._lazy_init()
    storage = _C._ipc_open_storage(device, mem_handle, storage_bytes, offset_bytes, ref_handle)
    _reductions.shared_cache[key] = StorageWeakRef(storage)
    return storage


def _reduce_storage(storage):
    if storage.device.type != "xxnpu":
        return _torch_reduce_storage(storage)
    device, mem_handle, storage_bytes, offset_bytes, ref_handle = _C._ipc_share_storage(storage)
    if mem_handle:
        # A storage coming back to this process resolves to this very storage.
        _reductions.shared_cache[(mem_handle, offset_bytes)] = StorageWeakRef(storage)
    return (_rebuild_xxnpu_storage, (device, mem_handle, storage_bytes, offset_bytes, ref_handle))


def _install() -> None:
    multiprocessing.reduction.ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
