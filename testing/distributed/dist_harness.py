"""Runs a function on N local ranks (spawned processes, FileStore rendezvous) with a hard
deadline, and collects what each rank returned or raised. Shared by the xxccl tests."""
import multiprocessing
import os
import queue as queue_lib
import tempfile
import time
import traceback
from datetime import timedelta

# Each rank is its own process with its own simulated device; keep them light on a small
# machine (the device's compute threads are per process).
CHILD_ENV = {
    "XXNPU_COMPUTE_THREADS": "1",
    "GLOO_SOCKET_IFNAME": "lo",
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
}


def _child(rank, world, store_path, module, fn_name, backend, timeout_s, init, env, extra, results):
    os.environ.update(CHILD_ENV)
    os.environ.update(env)
    status, payload = "ok", None
    try:
        import importlib
        import warnings

        warnings.filterwarnings("ignore")
        import torch
        import torch.distributed as dist

        import torch_xxnpu  # noqa: F401

        torch.xxnpu.set_device(0)
        if init:
            store = dist.FileStore(store_path, world)
            dist.init_process_group(
                backend, store=store, rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s)
            )
        fn = getattr(importlib.import_module(module), fn_name)
        payload = fn(rank, world, **extra)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        status, payload = "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    results.put((rank, status, payload))
    results.close()
    results.join_thread()  # flushed before os._exit below
    try:
        import torch.distributed as dist

        if dist.is_initialized() and status == "ok":
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001
        pass
    # Skip interpreter teardown: a failed group may leave transport threads blocked.
    os._exit(0)


def run_ranks(fn, world, backend="xxccl", timeout_s=60.0, deadline_s=180.0, ranks=None, init=True, env=None,
              **extra):
    """Runs `fn(rank, world, **extra)` on ranks 0..world-1 (or only `ranks`) after
    init_process_group(backend), with `env` added to each rank's environment. Returns
    {rank: ("ok", value) | ("error", message)}; a rank that neither returns nor raises
    before `deadline_s` is ("hang", None)."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    ranks = list(range(world)) if ranks is None else ranks
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        procs = {
            r: ctx.Process(
                target=_child,
                args=(r, world, store_path, fn.__module__, fn.__name__, backend, timeout_s, init, env or {}, extra,
                      results),
                daemon=True,
            )
            for r in ranks
        }
        for p in procs.values():
            p.start()
        out = {}
        end = time.monotonic() + deadline_s
        while len(out) < len(ranks) and time.monotonic() < end:
            try:
                rank, status, payload = results.get(timeout=0.5)
                out[rank] = (status, payload)
            except queue_lib.Empty:
                if all(not p.is_alive() for p in procs.values()) and results.empty():
                    break
        for r, p in procs.items():
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
            out.setdefault(r, ("hang", None) if time.monotonic() >= end else ("died", p.exitcode))
    return out


def transport():
    """The xxccl transport of the default group: "shm+gloo" or "gloo"."""
    import torch
    import torch.distributed as dist

    return dist.group.WORLD._get_backend(torch.device("xxnpu"))._transport


def check_all_ok(results):
    bad = {r: v for r, v in results.items() if v[0] != "ok"}
    assert not bad, "\n".join(f"rank {r}: {s}: {p}" for r, (s, p) in sorted(bad.items()))
    return {r: v[1] for r, v in results.items()}
