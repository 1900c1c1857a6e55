"""Sharing xxnpu tensors between processes (torch.multiprocessing, spawn): zero-copy both
ways, views, several receivers, the sender's block held until receivers release it, a
consumer that dies, fork after initialisation. Every wait has a timeout."""
import gc
import multiprocessing
import os
import pickle

import pytest
import torch
import torch.multiprocessing as mp
from multiprocessing.reduction import ForkingPickler

from testlib import no_fallback

import torch_xxnpu  # noqa: F401

TIMEOUT = 90
ctx = mp.get_context("spawn")


@pytest.fixture(autouse=True)
def _no_fallback():
    torch.empty(1, device="xxnpu")
    with no_fallback():
        yield


def _start(name, *args):
    p = ctx.Process(target=_guarded, args=(name,) + args, daemon=True)
    p.start()
    return p


def _join(p):
    p.join(TIMEOUT)
    if p.is_alive():
        p.kill()
        p.join(10)
        pytest.fail(f"process {p.pid} did not finish within {TIMEOUT}s")
    return p.exitcode


def _get(q):
    item = q.get(timeout=TIMEOUT)
    if isinstance(item, tuple) and item and item[0] == "error":
        pytest.fail(f"child failed: {item[1]}")
    return item


def _guarded(name, inq, outq, *args):
    """Runs the child body `name`, reporting any exception to the parent instead of hanging it."""
    try:
        globals()[name](inq, outq, *args)
    except BaseException as e:  # noqa: BLE001
        import traceback

        outq.put(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


# ---------------------------------------------------------------- children (module level: spawn imports them)


def _echo_and_write(inq, outq):
    base, view = inq.get(timeout=TIMEOUT)
    assert base.device.type == "xxnpu" and view.device.type == "xxnpu"
    # views arrive as views of one storage, with their offset and strides
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert view.storage_offset() == 4 and view.stride() == (4, 2), (view.storage_offset(), view.stride())
    seen = (base.cpu().tolist(), view.cpu().tolist())
    base.add_(100)  # a kernel here, on the sender's pages
    mine = torch.full((5,), 3.0, device="xxnpu")
    outq.put((seen, view, mine))  # sending synchronizes: the add has landed
    assert inq.get(timeout=TIMEOUT) == "filled"
    outq.put(mine.cpu().tolist())  # the sender wrote into our block
    assert inq.get(timeout=TIMEOUT) == "bye"


def _add_one_at(inq, outq, index):
    t = inq.get(timeout=TIMEOUT)
    t[index] += index + 1
    torch.xxnpu.synchronize()
    outq.put(("done", index))
    assert inq.get(timeout=TIMEOUT) == "bye"


def _hold_then_release(inq, outq):
    t = inq.get(timeout=TIMEOUT)
    outq.put(("got", t.sum().item()))
    assert inq.get(timeout=TIMEOUT) == "check"
    outq.put(("still", t.sum().item()))  # the sender reallocated meanwhile: not over our data
    assert inq.get(timeout=TIMEOUT) == "release"
    del t
    gc.collect()
    outq.put(("released",))
    assert inq.get(timeout=TIMEOUT) == "bye"


def _receive_and_die(inq, outq):
    t = inq.get(timeout=TIMEOUT)
    outq.put(("got", t.sum().item()))
    outq.close()
    outq.join_thread()  # the message must leave before the abrupt exit
    os._exit(3)  # no release: the sender must notice the death


def _storage_receiver(inq, outq):
    s = inq.get(timeout=TIMEOUT)
    assert isinstance(s, torch.UntypedStorage) and s.device.type == "xxnpu"
    t = torch.empty(0, dtype=torch.float32, device="xxnpu").set_(s)
    outq.put(("storage", s.nbytes(), t.cpu().tolist()))
    t.mul_(2)
    torch.xxnpu.synchronize()
    outq.put(("doubled",))
    assert inq.get(timeout=TIMEOUT) == "bye"


def _fork_receiver(q, out):
    try:
        t = q.get(timeout=TIMEOUT)
        out.put(("ok", t.sum().item()))
    except BaseException as e:  # noqa: BLE001
        out.put((type(e).__name__, str(e)))


# ---------------------------------------------------------------- tests


def test_tensors_travel_both_ways_zero_copy_with_views():
    inq, outq = ctx.Queue(), ctx.Queue()
    p = _start("_echo_and_write", inq, outq)
    try:
        base = torch.arange(12.0, device="xxnpu").reshape(3, 4)
        view = base[1:, ::2]
        inq.put((base, view))
        seen, view_back, theirs = _get(outq)
        assert seen == (torch.arange(12.0).reshape(3, 4).tolist(), [[4.0, 6.0], [8.0, 10.0]])
        # their kernel wrote our memory: no copy anywhere
        assert torch.equal(base.cpu(), torch.arange(12.0).reshape(3, 4) + 100)
        # our own view came back as our own storage, same address
        assert view_back.data_ptr() == view.data_ptr()
        assert view_back.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        assert view_back.stride() == view.stride() and torch.equal(view_back.cpu(), view.cpu())
        # a block of theirs, written here, read there
        assert theirs.cpu().tolist() == [3.0] * 5
        theirs.fill_(7.0)
        torch.xxnpu.synchronize()
        inq.put("filled")
        assert _get(outq) == [7.0] * 5
        inq.put("bye")
        assert _join(p) == 0
    finally:
        if p.is_alive():
            p.kill()


def test_several_receivers_write_one_tensor():
    t = torch.zeros(3, device="xxnpu")
    procs, queues = [], []
    outq = ctx.Queue()
    for i in range(3):
        q = ctx.Queue()
        procs.append(_start("_add_one_at", q, outq, i))
        queues.append(q)
        q.put(t)
    done = sorted(_get(outq) for _ in range(3))
    assert done == [("done", 0), ("done", 1), ("done", 2)]
    assert t.cpu().tolist() == [1.0, 2.0, 3.0]
    for q in queues:
        q.put("bye")
    assert [_join(p) for p in procs] == [0, 0, 0]


def test_sent_block_is_held_until_the_receiver_releases_then_memory_returns_to_baseline():
    torch.xxnpu.ipc_collect()
    baseline = torch.xxnpu.memory_allocated()
    inq, outq = ctx.Queue(), ctx.Queue()
    p = _start("_hold_then_release", inq, outq)
    n = 64 * 1024
    t = torch.ones(n, device="xxnpu")
    old_ptr = t.data_ptr()
    inq.put(t)
    assert _get(outq) == ("got", float(n))
    del t
    gc.collect()
    assert torch.xxnpu.ipc_collect() == 1  # still held by the receiver
    assert torch.xxnpu.memory_allocated() == baseline + n * 4
    again = torch.full((n,), 5.0, device="xxnpu")  # would reuse the block if it were free
    assert again.data_ptr() != old_ptr
    inq.put("check")
    assert _get(outq) == ("still", float(n))
    del again
    inq.put("release")
    assert _get(outq) == ("released",)
    assert torch.xxnpu.ipc_collect() == 0
    assert torch.xxnpu.memory_allocated() == baseline
    inq.put("bye")
    assert _join(p) == 0


def test_a_consumer_that_dies_does_not_pin_the_senders_memory():
    torch.xxnpu.ipc_collect()
    baseline = torch.xxnpu.memory_allocated()
    inq, outq = ctx.Queue(), ctx.Queue()
    p = _start("_receive_and_die", inq, outq)
    t = torch.ones(1000, device="xxnpu")
    inq.put(t)
    assert _get(outq) == ("got", 1000.0)
    assert _join(p) == 3
    del t
    gc.collect()
    assert torch.xxnpu.ipc_collect() == 0
    assert torch.xxnpu.memory_allocated() == baseline


def test_storages_travel_too():
    inq, outq = ctx.Queue(), ctx.Queue()
    p = _start("_storage_receiver", inq, outq)
    t = torch.tensor([1.0, 2.0, 3.0], device="xxnpu")
    inq.put(t.untyped_storage())
    assert _get(outq) == ("storage", 12, [1.0, 2.0, 3.0])
    assert _get(outq) == ("doubled",)
    assert t.cpu().tolist() == [2.0, 4.0, 6.0]
    inq.put("bye")
    assert _join(p) == 0


def test_round_trip_in_one_process_is_the_same_storage():
    t = torch.arange(20.0, device="xxnpu").reshape(4, 5)[:, 1::2]
    back = ForkingPickler.loads(ForkingPickler.dumps(t))
    assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride() and back.shape == t.shape
    back.zero_()
    assert t.sum().item() == 0.0
    # share_memory_ is a no-op for device tensors, as for CUDA
    assert t.share_memory_() is t


def test_non_leaf_requiring_grad_is_refused_like_cuda():
    a = torch.ones(2, device="xxnpu", requires_grad=True)
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(a * 2)


def test_corrupt_handles_are_clear_errors():
    from torch_xxnpu import _C

    with pytest.raises(ValueError, match="memory handle of 3 bytes; expected 64"):
        _C._ipc_open_storage(0, b"abc", 4, 0, b"x" * 48)
    # Refused by the runtime: torch.AcceleratorError, as CUDA's cudaIpcOpenMemHandle error.
    with pytest.raises(torch.AcceleratorError, match="not an xxnpu IPC memory handle"):
        _C._ipc_open_storage(0, b"\0" * 64, 4, 0, b"\0" * 48)
    cpu = torch.ones(2).untyped_storage()
    with pytest.raises(RuntimeError, match="expected an xxnpu storage"):
        _C._ipc_share_storage(cpu)


def test_fork_after_init_receiver_gets_a_clear_error():
    fctx = multiprocessing.get_context("fork")
    q, out = fctx.Queue(), fctx.Queue()
    p = fctx.Process(target=_fork_receiver, args=(q, out), daemon=True)
    p.start()
    t = torch.ones(3, device="xxnpu")
    q.put(t)
    kind, msg = out.get(timeout=TIMEOUT)
    assert _join(p) == 0
    assert kind == "RuntimeError", (kind, msg)
    assert "Cannot re-initialize xxnpu in forked subprocess" in msg and "spawn" in msg
