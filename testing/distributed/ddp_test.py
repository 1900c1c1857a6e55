"""DistributedDataParallel and FSDP2 (fully_shard) on 2 xxccl ranks train a small model
exactly as one process does on the whole batch."""
import os
import sys

# Bazel's runfiles make this directory a package; the harness is imported as a sibling.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dist_harness import check_all_ok, run_ranks

STEPS = 5


def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _batch(step):
    import torch

    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 8, generator=g), torch.randn(8, 4, generator=g)


def train_ddp(rank, world):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_model().to("xxnpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per_rank = 8 // world
    for step in range(STEPS):
        x, y = _batch(step)
        x, y = x[rank * per_rank : (rank + 1) * per_rank], y[rank * per_rank : (rank + 1) * per_rank]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to("xxnpu")), y.to("xxnpu"))
        loss.backward()
        opt.step()
    # Plain lists: tensors would travel through shared memory the exiting child owns.
    return [p.detach().cpu().tolist() for p in model.module.parameters()]


def train_fsdp2(rank, world):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = _model().to("xxnpu")
    mesh = init_device_mesh("xxnpu", (world,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)  # all_gather_into_tensor / reduce_scatter_tensor
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per_rank = 8 // world
    for step in range(STEPS):
        x, y = _batch(step)
        x, y = x[rank * per_rank : (rank + 1) * per_rank], y[rank * per_rank : (rank + 1) * per_rank]
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x.to("xxnpu")), y.to("xxnpu")).backward()
        opt.step()
    return [p.full_tensor().detach().cpu().tolist() for p in model.parameters()]


def _check_against_single_process(results):
    import torch

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = _batch(step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    reference = [p.detach() for p in model.parameters()]
    for rank, params in results.items():
        for got, want in zip(params, reference):
            got = torch.tensor(got)
            assert torch.allclose(got, want, atol=1e-5), f"rank {rank}: max diff {(got - want).abs().max()}"
    # And the initial state differed from the trained one (the test would catch no-op training).
    assert any(not torch.allclose(a, b) for a, b in zip(reference, _model().parameters()))


def test_ddp_matches_single_process():
    _check_against_single_process(check_all_ok(run_ranks(train_ddp, 2)))


def test_fsdp2_matches_single_process():
    _check_against_single_process(check_all_ok(run_ranks(train_fsdp2, 2)))


def default_backend_step(rank, world):
    """init_process_group() named no backend (the harness passed None): collectives on xxnpu
    and CPU tensors, then one DDP step on xxnpu."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    pg = dist.group.WORLD
    backends = {d: str(pg._get_backend(torch.device(d)).name()) for d in ("xxnpu", "cpu")}
    t = torch.full((4,), float(rank + 1), device="xxnpu")
    dist.all_reduce(t)
    c = torch.full((4,), float(rank + 1))
    dist.all_reduce(c)
    model = DDP(_model().to("xxnpu"))
    x, y = _batch(0)
    x, y = x[rank * 4 : (rank + 1) * 4], y[rank * 4 : (rank + 1) * 4]
    torch.nn.functional.mse_loss(model(x.to("xxnpu")), y.to("xxnpu")).backward()
    return {
        "backends": backends,
        "xxnpu": t.cpu().tolist(),
        "cpu": c.tolist(),
        "grads": [p.grad.cpu().tolist() for p in model.module.parameters()],
    }


def test_default_backend_picks_xxccl_for_xxnpu_and_gloo_for_cpu():
    # As init_process_group() picks nccl for cuda tensors (and gloo for CPU ones).
    results = check_all_ok(run_ranks(default_backend_step, 2, backend=None))
    for rank, r in results.items():
        assert r["backends"] == {"xxnpu": "xxccl", "cpu": "gloo"}, (rank, r["backends"])
        assert r["xxnpu"] == [3.0] * 4 and r["cpu"] == [3.0] * 4, (rank, r)
    assert results[0]["grads"] == results[1]["grads"]
