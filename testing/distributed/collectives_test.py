"""Every xxccl collective and reduce op with real data between 2 and 4 processes on
loopback, checked against the values computed locally from every rank's inputs, over
both transports (shared memory + Gloo, the default on one host, and Gloo only); plus
registration (default backend, "cpu:gloo,xxnpu:xxccl")."""
import os
import sys

import pytest

# Bazel's runfiles make this directory a package; the harness is imported as a sibling.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dist_harness import check_all_ok, run_ranks, transport

DEV = "xxnpu"


def _vals(rank, n=6, dtype=None):
    import torch

    # Distinct, exactly representable values per rank (products stay small).
    return torch.arange(n, dtype=dtype or torch.float32) % 3 + rank + 1


def _expect(name, got, want):
    import torch

    got = got.cpu()
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
    assert torch.allclose(got.double(), want.double()), f"{name}: got {got.tolist()}, expected {want.tolist()}"


def all_collectives(rank, world):
    import torch
    import torch.distributed as dist

    done = []
    ranks = range(world)

    # all_reduce: every op, float and integer.
    all_vals = torch.stack([_vals(r) for r in ranks])
    for op, want in [
        (dist.ReduceOp.SUM, all_vals.sum(0)),
        (dist.ReduceOp.AVG, all_vals.mean(0)),
        (dist.ReduceOp.MAX, all_vals.max(0).values),
        (dist.ReduceOp.MIN, all_vals.min(0).values),
        (dist.ReduceOp.PRODUCT, all_vals.prod(0)),
    ]:
        t = _vals(rank).to(DEV)
        dist.all_reduce(t, op=op)
        _expect(f"all_reduce {op}", t, want)
    ti = _vals(rank, dtype=torch.int64).to(DEV)
    dist.all_reduce(ti)
    _expect("all_reduce int64", ti, torch.stack([_vals(r, dtype=torch.int64) for r in ranks]).sum(0))
    # A 2-D tensor big enough for several transport chunks, async, waited explicitly.
    big = torch.full((512, 1024), float(rank), device=DEV)
    work = dist.all_reduce(big, async_op=True)
    work.wait()
    _expect("all_reduce async 2-D", big, torch.full((512, 1024), float(sum(ranks))))
    # More than one shared-memory round (4 MiB a round), with a ragged last round.
    n = (3 << 20) + 7
    huge = torch.arange(n, dtype=torch.float32, device=DEV) % 1000 + rank
    dist.all_reduce(huge, op=dist.ReduceOp.MAX)
    _expect("all_reduce 12 MB MAX", huge, torch.arange(n, dtype=torch.float32) % 1000 + world - 1)
    # Half precision, and an empty tensor.
    for dtype in (torch.float16, torch.bfloat16):
        h = _vals(rank, dtype=dtype).to(DEV)
        dist.all_reduce(h)
        _expect(f"all_reduce {dtype}", h, torch.stack([_vals(r, dtype=dtype) for r in ranks]).sum(0))
    e = torch.empty(0, device=DEV)
    dist.all_reduce(e)
    assert e.numel() == 0
    done.append("all_reduce")

    t = _vals(rank).to(DEV)
    dist.broadcast(t, src=world - 1)
    _expect("broadcast", t, _vals(world - 1))
    # Several shared-memory rounds from a root that is not rank 0.
    n = (5 << 20) + 3
    big = torch.arange(n, dtype=torch.float32, device=DEV) % 977 + rank
    dist.broadcast(big, src=1)
    _expect("broadcast 20 MB", big, torch.arange(n, dtype=torch.float32) % 977 + 1)
    done.append("broadcast")

    for op, want in [(dist.ReduceOp.SUM, all_vals.sum(0)), (dist.ReduceOp.MAX, all_vals.max(0).values)]:
        t = _vals(rank).to(DEV)
        dist.reduce(t, dst=0, op=op)
        _expect(f"reduce {op}", t, want if rank == 0 else _vals(rank))
    done.append("reduce")

    outs = [torch.empty(6, device=DEV) for _ in ranks]
    dist.all_gather(outs, _vals(rank).to(DEV))
    for r in ranks:
        _expect(f"all_gather[{r}]", outs[r], _vals(r))
    out = torch.empty(world * 6, device=DEV)
    dist.all_gather_into_tensor(out, _vals(rank).to(DEV))
    _expect("all_gather_into_tensor", out, torch.cat([_vals(r) for r in ranks]))
    out = torch.empty(world * 2, 3, device=DEV)  # 2-D, as FSDP's shards
    dist.all_gather_into_tensor(out, _vals(rank).view(2, 3).to(DEV))
    _expect("all_gather_into_tensor 2-D", out, torch.cat([_vals(r).view(2, 3) for r in ranks]))
    n = (1 << 20) + 5  # 4 MB + 20 bytes a rank: two rounds
    out = torch.empty(world * n, device=DEV)
    dist.all_gather_into_tensor(out, torch.arange(n, dtype=torch.float32, device=DEV) % 13 + 100 * rank)
    _expect("all_gather_into_tensor 4 MB", out, torch.cat([torch.arange(n, dtype=torch.float32) % 13 + 100 * r
                                                            for r in ranks]))
    # The deprecated list-of-lists form (ProcessGroup.allgather_coalesced).
    lists = [[torch.empty(6, device=DEV), torch.empty(2, 2, device=DEV)] for _ in ranks]
    dist.all_gather_coalesced(lists, [_vals(rank).to(DEV), _vals(rank, 4).view(2, 2).to(DEV)])
    for r in ranks:
        _expect(f"all_gather_coalesced[{r}][0]", lists[r][0], _vals(r))
        _expect(f"all_gather_coalesced[{r}][1]", lists[r][1], _vals(r, 4).view(2, 2))
    done.append("all_gather")

    # reduce_scatter: rank r's input chunk i is _vals(r) + i; rank i keeps the reduction of chunk i.
    for op, reduce in [(dist.ReduceOp.SUM, lambda s: s.sum(0)), (dist.ReduceOp.AVG, lambda s: s.mean(0))]:
        inputs = [(_vals(rank) + i).to(DEV) for i in ranks]
        out = torch.empty(6, device=DEV)
        dist.reduce_scatter(out, inputs, op=op)
        _expect(f"reduce_scatter {op}", out, reduce(torch.stack([_vals(r) + rank for r in ranks])))
    for op, reduce in [(dist.ReduceOp.SUM, lambda s: s.sum(0)), (dist.ReduceOp.MAX, lambda s: s.max(0).values)]:
        inp = torch.cat([_vals(rank) + i for i in ranks]).to(DEV)
        out = torch.empty(6, device=DEV)
        dist.reduce_scatter_tensor(out, inp, op=op)
        _expect(f"reduce_scatter_tensor {op}", out, reduce(torch.stack([_vals(r) + rank for r in ranks])))
        _expect("reduce_scatter_tensor keeps its input", inp, torch.cat([_vals(rank) + i for i in ranks]))
    done.append("reduce_scatter")

    # all_to_all with a different size for every (source, destination) pair.
    def piece(src, dst):
        return torch.full((src + dst + 1,), float(10 * src + dst))

    outs = [torch.empty(r + rank + 1, device=DEV) for r in ranks]
    dist.all_to_all(outs, [piece(rank, d).to(DEV) for d in ranks])
    for r in ranks:
        _expect(f"all_to_all from {r}", outs[r], piece(r, rank))
    inp = torch.cat([torch.full((2,), float(10 * rank + d)) for d in ranks]).to(DEV)
    out = torch.empty(2 * world, device=DEV)
    dist.all_to_all_single(out, inp)
    _expect("all_to_all_single", out, torch.cat([torch.full((2,), float(10 * r + rank)) for r in ranks]))
    in_splits = [d + 1 for d in ranks]
    out_splits = [rank + 1] * world
    inp = torch.cat([piece(rank, d)[: d + 1] for d in ranks]).to(DEV)
    out = torch.empty(sum(out_splits), device=DEV)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    _expect("all_to_all_single uneven", out, torch.cat([piece(r, rank)[: rank + 1] for r in ranks]))
    done.append("all_to_all")

    root = 1 % world
    gathered = [torch.empty(6, device=DEV) for _ in ranks] if rank == root else None
    dist.gather(_vals(rank).to(DEV), gathered, dst=root)
    if rank == root:
        for r in ranks:
            _expect(f"gather[{r}]", gathered[r], _vals(r))
    out = torch.empty(6, device=DEV)
    dist.scatter(out, [(_vals(0) * (r + 1)).to(DEV) for r in ranks] if rank == 0 else None, src=0)
    _expect("scatter", out, _vals(0) * (rank + 1))
    done.append("gather/scatter")

    dist.barrier()
    done.append("barrier")

    # send/recv: rank 0 to the last rank and back.
    if rank == 0:
        dist.send(_vals(0).to(DEV), dst=world - 1)
        t = torch.empty(6, device=DEV)
        dist.recv(t, src=world - 1)
        _expect("recv", t, _vals(world - 1) * 2)
    elif rank == world - 1:
        t = torch.empty(6, device=DEV)
        dist.recv(t, src=0)
        _expect("recv", t, _vals(0))
        dist.send(_vals(world - 1).to(DEV) * 2, dst=0)
    # batch_isend_irecv around a ring with messages far above socket buffer sizes: every
    # rank sends before it receives, which only completes if the ops are posted together.
    n = 1 << 20
    send_t = torch.full((n,), float(rank), device=DEV)
    recv_t = torch.empty(n, device=DEV)
    ops = [
        dist.P2POp(dist.isend, send_t, (rank + 1) % world),
        dist.P2POp(dist.irecv, recv_t, (rank - 1) % world),
    ]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    _expect("batch_isend_irecv", recv_t, torch.full((n,), float((rank - 1) % world)))
    done.append("p2p")

    # Coalesced forms (DDP/FSDP): all_reduce_coalesced and the coalescing manager.
    a, b = _vals(rank).to(DEV), (_vals(rank, 3) * 2).to(DEV)
    dist.all_reduce_coalesced([a, b])
    _expect("all_reduce_coalesced a", a, all_vals.sum(0))
    _expect("all_reduce_coalesced b", b, torch.stack([_vals(r, 3) * 2 for r in ranks]).sum(0))
    dev = torch.device(DEV, 0)
    a, b = _vals(rank).to(DEV), _vals(rank, 4).to(DEV)
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    _expect("coalesced all_reduce a", a, all_vals.sum(0))
    _expect("coalesced all_reduce b", b, torch.stack([_vals(r, 4) for r in ranks]).sum(0))
    outs = [torch.empty(6 * world, device=DEV), torch.empty(3 * world, device=DEV)]
    with dist._coalescing_manager(device=dev):
        dist.all_gather_into_tensor(outs[0], _vals(rank).to(DEV))
        dist.all_gather_into_tensor(outs[1], _vals(rank, 3).to(DEV))
    _expect("coalesced all_gather_into_tensor", outs[1], torch.cat([_vals(r, 3) for r in ranks]))
    outs = [torch.empty(6, device=DEV), torch.empty(3, device=DEV)]
    with dist._coalescing_manager(device=dev):
        dist.reduce_scatter_tensor(outs[0], torch.cat([_vals(rank) + i for i in ranks]).to(DEV))
        dist.reduce_scatter_tensor(outs[1], torch.cat([_vals(rank, 3) + i for i in ranks]).to(DEV))
    _expect("coalesced reduce_scatter_tensor", outs[1], torch.stack([_vals(r, 3) + rank for r in ranks]).sum(0))
    done.append("coalesced")
    return done, transport()


# Gloo-only with 2 ranks: the transport used across hosts, and by XXCCL_TRANSPORT=gloo.
@pytest.mark.parametrize("world,transport_env,expected", [(2, "auto", "shm+gloo"), (4, "auto", "shm+gloo"),
                                                          (2, "gloo", "gloo")])
def test_every_collective(world, transport_env, expected):
    results = check_all_ok(run_ranks(all_collectives, world, deadline_s=240, env={"XXCCL_TRANSPORT": transport_env}))
    assert all("coalesced" in done for done, _ in results.values())
    assert {used for _, used in results.values()} == {expected}


def backend_names(rank, world):
    import torch
    import torch.distributed as dist

    pg = dist.group.WORLD
    names = {}
    for dev in ("cpu", "xxnpu"):
        try:
            names[dev] = pg._get_backend(torch.device(dev)).name()
        except RuntimeError:
            names[dev] = None
    # Both devices' tensors in one group.
    if names["cpu"] is not None:
        c = torch.ones(3) * (rank + 1)
        dist.all_reduce(c)
        assert c.tolist() == [float(sum(range(1, world + 1)))] * 3
    x = torch.ones(3, device="xxnpu") * (rank + 1)
    dist.all_reduce(x)
    assert x.cpu().tolist() == [float(sum(range(1, world + 1)))] * 3
    return names


def test_default_backend_for_xxnpu_is_xxccl():
    # init_process_group() without a backend: the accelerator (xxnpu) decides.
    results = check_all_ok(run_ranks(backend_names, 2, backend=None))
    # CPU tensors keep gloo, as with "cpu:gloo,xxnpu:xxccl" (torch_xxnpu/distributed.py).
    assert results[0] == {"cpu": "gloo", "xxnpu": "xxccl"}


def test_cpu_gloo_and_xxnpu_xxccl_in_one_group():
    results = check_all_ok(run_ranks(backend_names, 2, backend="cpu:gloo,xxnpu:xxccl"))
    assert results[0] == {"cpu": "gloo", "xxnpu": "xxccl"}
