"""Failure behaviour of xxccl: a dead or absent rank fails the others within the timeout
with a clear error; tensors that differ across ranks, or are on the wrong device, give
clear errors instead of hangs or garbage."""
import os
import sys
import time

# Bazel's runfiles make this directory a package; the harness is imported as a sibling.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest

from dist_harness import check_all_ok, run_ranks, transport

TIMEOUT_S = 10.0


def peer_dies(rank, world):
    import os

    import torch
    import torch.distributed as dist

    used = transport()
    x = torch.ones(1 << 16, device="xxnpu")
    dist.all_reduce(x)
    assert x.cpu()[0].item() == world  # everybody healthy so far
    if rank == 1:
        os._exit(3)  # dies without a word
    start = time.monotonic()
    try:
        dist.all_reduce(x)
        x.cpu()  # the collective's failure reaches the caller's stream
    except RuntimeError as e:
        first = str(e)
    else:
        raise AssertionError("all_reduce with a dead peer did not fail")
    elapsed = time.monotonic() - start
    # The group is poisoned: the next call fails at once, naming the first failure.
    try:
        dist.all_reduce(x)
    except RuntimeError as e:
        second = str(e)
    else:
        raise AssertionError("the group still accepted collectives after a failure")
    return first, second, elapsed, used


@pytest.mark.parametrize("transport_env", ["auto", "gloo"])
def test_dead_rank_fails_others_within_timeout(transport_env):
    start = time.monotonic()
    results = run_ranks(peer_dies, 2, timeout_s=TIMEOUT_S, deadline_s=120, env={"XXCCL_TRANSPORT": transport_env})
    assert results[0][0] == "ok", results[0]
    first, second, elapsed, used = results[0][1]
    assert "xxccl:all_reduce" in first and "failed" in first, first
    assert "unusable after an earlier failure" in second, second
    assert elapsed < TIMEOUT_S + 5, elapsed
    if transport_env == "auto":
        # Shared memory watches the peers' processes: the death is named, at once.
        assert used == "shm+gloo", used
        assert "rank 1 (pid" in first and "exited" in first, first
        assert elapsed < 3, elapsed
    else:
        assert used == "gloo", used
    assert time.monotonic() - start < 90


def lonely(rank, world):
    raise AssertionError("init_process_group returned without the other rank")


def test_rank_that_never_joins_fails_init_within_timeout():
    start = time.monotonic()
    results = run_ranks(lonely, 2, timeout_s=5, deadline_s=90, ranks=[0])
    status, message = results[0]
    assert status == "error", results
    assert "AssertionError" not in message, message
    assert any(w in message.lower() for w in ("timeout", "timed out")), message
    assert time.monotonic() - start < 60


def _error_of(call, what):
    """The message of the error `call` raises, at the call or at the next synchronize."""
    import torch

    try:
        call()
        torch.xxnpu.synchronize()
    except RuntimeError as e:
        return str(e)
    raise AssertionError(f"{what} did not fail")


def mismatched(rank, world, kind):
    import torch
    import torch.distributed as dist

    if kind == "shape":
        x = torch.ones(4 + rank, device="xxnpu")
    else:
        x = torch.ones(4, device="xxnpu", dtype=torch.float32 if rank == 0 else torch.int32)
    return _error_of(lambda: dist.all_reduce(x), "mismatched all_reduce")


@pytest.mark.parametrize("transport_env", ["auto", "gloo"])
def test_mismatched_shapes_and_dtypes_fail_clearly(transport_env):
    for kind, words in [("shape", ["differ across ranks", "4 elements", "5 elements"]), ("dtype", ["Int", "Float"])]:
        results = run_ranks(mismatched, 2, timeout_s=TIMEOUT_S, deadline_s=90, kind=kind,
                            env={"XXCCL_TRANSPORT": transport_env})
        for rank in (0, 1):
            status, message = results[rank]
            assert status == "ok", (kind, rank, results[rank])
            assert all(w in message for w in words), (kind, message)


def different_collectives(rank, world):
    import torch
    import torch.distributed as dist

    x = torch.ones(4, device="xxnpu")
    return _error_of(lambda: dist.all_reduce(x) if rank == 0 else dist.broadcast(x, src=0),
                     "all_reduce against broadcast")


@pytest.mark.parametrize("transport_env", ["auto", "gloo"])
def test_ranks_calling_different_collectives_fail_clearly(transport_env):
    start = time.monotonic()
    results = run_ranks(different_collectives, 2, timeout_s=TIMEOUT_S, deadline_s=90,
                        env={"XXCCL_TRANSPORT": transport_env})
    for rank in (0, 1):
        status, message = results[rank]
        assert status == "ok", (rank, results[rank])
        assert "ranks called different collectives" in message, message
        assert "ALLREDUCE" in message and "BROADCAST" in message, message
    assert time.monotonic() - start < 60


def different_roots(rank, world):
    import torch
    import torch.distributed as dist

    x = torch.ones(4, device="xxnpu")
    # Every rank thinks it is the root.
    return _error_of(lambda: dist.broadcast(x, src=rank), "broadcast with different roots")


def test_broadcast_roots_that_differ_fail_clearly_over_shared_memory():
    # (Over Gloo the agreement record has no root: Gloo's own timeout ends that case.)
    results = run_ranks(different_roots, 2, timeout_s=TIMEOUT_S, deadline_s=90)
    for rank in (0, 1):
        status, message = results[rank]
        assert status == "ok", (rank, results[rank])
        assert "ranks disagree on the root" in message, message


def unused(rank, world):
    raise AssertionError("init_process_group accepted a bad XXCCL_TRANSPORT")


def test_bad_transport_setting_is_rejected_naming_the_choices():
    results = run_ranks(unused, 2, timeout_s=TIMEOUT_S, deadline_s=60, env={"XXCCL_TRANSPORT": "infiniband"})
    for rank in (0, 1):
        status, message = results[rank]
        assert status == "error", results[rank]
        assert "XXCCL_TRANSPORT='infiniband'" in message and "'auto'" in message and "'gloo'" in message, message


def wrong_device(rank, world):
    import torch
    import torch.distributed as dist

    errors = {}
    cases = {
        "cpu": lambda: dist.all_reduce(torch.ones(4)),
        "non_contiguous": lambda: dist.all_reduce(torch.ones(4, 4, device="xxnpu").t()),
        "other_xxnpu_device": lambda: dist.all_reduce(torch.ones(4, device="xxnpu:1")),
        "avg_int": lambda: dist.all_reduce(torch.ones(4, device="xxnpu", dtype=torch.int64), op=dist.ReduceOp.AVG),
    }
    dist.all_reduce(torch.ones(4, device="xxnpu:0"))  # the group lives on xxnpu:0
    for name, call in cases.items():
        try:
            call()
        except (RuntimeError, ValueError) as e:
            errors[name] = str(e)
    # Local argument errors do not poison the group.
    x = torch.ones(4, device="xxnpu")
    dist.all_reduce(x)
    assert x.cpu().tolist() == [float(world)] * 4
    return errors


def test_wrong_device_and_bad_tensors_fail_clearly():
    results = run_ranks(wrong_device, 2, timeout_s=TIMEOUT_S, deadline_s=90)
    assert results[0][0] == "ok", results[0]
    errors = results[0][1]
    assert set(errors) == {"cpu", "non_contiguous", "other_xxnpu_device", "avg_int"}, errors
    assert "cpu" in errors["cpu"].lower(), errors["cpu"]
    assert "contiguous" in errors["non_contiguous"], errors["non_contiguous"]
    assert "xxnpu:0" in errors["other_xxnpu_device"] and "xxnpu:1" in errors["other_xxnpu_device"], errors
    assert "AVG" in errors["avg_int"], errors["avg_int"]


def flags_read(rank, world):
    import torch
    import torch.distributed as dist

    b = dist.group.WORLD._get_backend(torch.device("xxnpu"))
    x = torch.ones(4, device="xxnpu")
    dist.all_reduce(x)
    return {"staging": b._staging, "check_shapes": b._check_shapes, "sum": x.cpu().tolist()}


@pytest.mark.parametrize("value,expected", [("false", False), ("OFF", False), ("0", False), ("yes", True)])
def test_staging_flag_false_means_false(value, expected):
    # "false" used to mean true (anything but "0" did).
    results = check_all_ok(run_ranks(flags_read, 2, timeout_s=TIMEOUT_S, deadline_s=60,
                                     env={"XXCCL_STAGING": value, "XXCCL_CHECK_SHAPES": "no"}))
    for r in results.values():
        assert r == {"staging": expected, "check_shapes": False, "sum": [2.0] * 4}, r


def test_bad_flag_value_is_rejected_naming_the_variable():
    results = run_ranks(flags_read, 2, timeout_s=TIMEOUT_S, deadline_s=60, env={"XXCCL_STAGING": "maybe"})
    for rank in (0, 1):
        status, message = results[rank]
        assert status == "error", results[rank]
        assert 'XXCCL_STAGING="maybe"' in message and "0/false/no/off" in message, message
