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
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["xxnpu"])


__all__ = ["BACKEND_NAME"]
