"""Issue 21: xxccl and the caching allocator under the lifetimes real programs produce.

- A collective's kernel owns its tensors; when the caller drops them and empties the cache
  (or an allocation retries after OOM), the thread freeing cached segments waits for the
  device and destroys the finished kernel there, which frees the tensors into the same
  allocator. That used to deadlock on the allocator's lock in the second round.
- Process groups own a comm stream (a device thread): destroying the group must release it.
"""
import os
import sys

# Bazel's runfiles make this directory a package; the harness is imported as a sibling.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest

from dist_harness import check_all_ok, run_ranks, transport

TIMEOUT_S = 30


def drop_and_empty_cache(rank, world, rounds, numel):
    import torch
    import torch.distributed as dist

    dev = torch.device("xxnpu", 0)
    w = None
    for _ in range(rounds):
        t = torch.ones(numel, device=dev)
        w = dist.all_reduce(t, async_op=True)
        del t
        torch.xxnpu.empty_cache()
    w.wait()
    torch.xxnpu.synchronize()
    # The results were dropped; one more collective checks that the group still works.
    check = torch.full((4,), float(rank + 1), device=dev)
    dist.all_reduce(check)
    return transport(), rounds, check.cpu().tolist()


# 1 << 16 floats is the reporter's loop (small-pool blocks: it hangs once a 2 MiB segment
# empties while a kernel still holds its last tensor, which depends on timing); 1 << 22
# floats (16 MiB, a segment per tensor) hung here within a few rounds every time.
@pytest.mark.parametrize("numel", [1 << 16, 1 << 22])
@pytest.mark.parametrize("transport_env", ["auto", "gloo"])
def test_dropping_a_collectives_tensor_then_empty_cache_does_not_hang(transport_env, numel):
    # A regression shows as a rank that "hang"s at the harness's deadline, not a stuck CI.
    results = check_all_ok(run_ranks(drop_and_empty_cache, 2, timeout_s=TIMEOUT_S, deadline_s=90,
                                     env={"XXCCL_TRANSPORT": transport_env}, rounds=50, numel=numel))
    expected_transport = "shm+gloo" if transport_env == "auto" else "gloo"
    for rank in (0, 1):
        assert results[rank] == (expected_transport, 50, [3.0] * 4)


def threads():
    return len(os.listdir("/proc/self/task"))


def create_and_destroy_groups(rank, world, groups):
    import torch
    import torch.distributed as dist

    dev = torch.device("xxnpu", 0)

    def one_group():
        g = dist.new_group(backend="xxccl")
        t = torch.ones(4, device=dev)
        dist.all_reduce(t, group=g)  # starts the group's comm stream (its device thread)
        torch.xxnpu.synchronize()
        assert t.cpu().tolist() == [float(world)] * 4
        dist.destroy_process_group(g)

    one_group()  # the first one also starts what the process keeps (Gloo's, torch's threads)
    before = threads()
    for _ in range(groups):
        one_group()
    after = threads()
    # The default group still works after its siblings came and went.
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    return before, after, t.cpu().tolist()


def test_destroying_groups_releases_their_comm_streams():
    # Each xxccl group's comm stream is a device thread: before issue 21's fix every group
    # left one behind (and its /dev/shm mapping), so N groups grew the process by N threads.
    n = 10
    results = check_all_ok(run_ranks(create_and_destroy_groups, 2, timeout_s=TIMEOUT_S, deadline_s=150, groups=n))
    for rank in (0, 1):
        before, after, check = results[rank]
        assert after - before <= 2, f"rank {rank}: {after - before} more threads after {n} groups"
        assert check == [2.0] * 4
