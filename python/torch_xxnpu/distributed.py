"""xxccl: the torch.distributed backend for xxnpu tensors.

Importing torch_xxnpu registers it, so ``init_process_group()`` on a machine whose
accelerator is xxnpu, ``init_process_group("xxccl")`` and
``init_process_group("cpu:gloo,xxnpu:xxccl")`` all work, under ``torchrun`` or with any
store. Collectives run as communication kernels ("xxccl:all_reduce", ...) on a dedicated
per-group stream, with NCCL's semantics (see docs/distributed.md).

The bytes travel through a Gloo process group created here on the same store (under its
own prefix), which the native backend drives from the communication stream; when all
ranks share this host, all_reduce, reduce-scatters, broadcast, all-gathers and the ranks'
agreement checks go through shared memory instead. ``XXCCL_TRANSPORT=gloo`` keeps everything on Gloo (default: ``auto``).
"""
import os
from datetime import timedelta

import torch

BACKEND_NAME = "xxccl"


def _create_backend(dist_backend_opts, backend_options=None):
    """The creator torch.distributed calls (extended API) for each new xxccl group."""
    import torch.distributed as dist
    from torch_xxnpu import _C

    _C._xxccl_init()
    timeout = dist_backend_opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    rank, size = dist_backend_opts.group_rank, dist_backend_opts.group_size
    shared_memory = _shared_memory_requested()
    # Gloo gets its own key space in the group's store; its timeout bounds every
    # collective, so a dead or absent peer fails the others instead of hanging them.
    host_store = dist.PrefixStore("xxccl_host/", dist_backend_opts.store)
    host = dist.ProcessGroupGloo(host_store, rank, size, timeout)
    return _C._ProcessGroupXXCCL(dist_backend_opts.store, rank, size, host, timeout,
                                 shared_memory=shared_memory)


def _shared_memory_requested():
    transport = os.environ.get("XXCCL_TRANSPORT", "auto").strip().lower() or "auto"
    if transport not in ("auto", "gloo"):
        raise ValueError(f"XXCCL_TRANSPORT={transport!r}: expected 'auto' (shared memory between ranks on one "
                         "host, Gloo otherwise) or 'gloo'")
    return transport == "auto"


def _register():
    """Registers "xxccl" for the xxnpu device (idempotent; no-op without distributed)."""
    if not torch.distributed.is_available():
        return
    import torch.distributed as dist

    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    # devices=["xxnpu"] also makes xxccl Backend.default_device_backend_map's entry for xxnpu.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["xxnpu"])
    _default_cpu_backend_too(dist)


def _default_cpu_backend_too(dist):
    """``init_process_group()`` with no backend named gives a group with only the detected
    accelerator's backend (torch's BackendConfig for "undefined"). For cuda that backend
    (nccl) is also the group's default; for xxnpu torch falls back to a default of gloo that
    was never created, so DDP fails ("Could not find backend type 1 ... gloo") and CPU
    tensors have no backend at all. Adding the CPU's default backend (gloo) to such a group
    gives what ``"cpu:gloo,xxnpu:xxccl"`` gives. torch has no hook for this, hence the wrap;
    it changes nothing for groups that name a backend or whose accelerator is not xxnpu."""
    config = dist.distributed_c10d.BackendConfig
    if getattr(config.__init__, "_xxnpu_wrapped", False):
        return
    original = config.__init__

    def __init__(self, backend):
        original(self, backend)
        if (str(backend) == dist.Backend.UNDEFINED
                and self.device_backend_map.get("xxnpu") == BACKEND_NAME
                and "cpu" not in self.device_backend_map):
            self.device_backend_map["cpu"] = dist.Backend(dist.Backend.default_device_backend_map["cpu"])

    __init__._xxnpu_wrapped = True
    config.__init__ = __init__


__all__ = ["BACKEND_NAME"]
