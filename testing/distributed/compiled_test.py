"""torch.compile with xxccl on 2 ranks: collectives inside a compiled graph (functional
collectives and the in-place c10d calls Dynamo rewrites into them) lowered by Inductor
onto xxccl, and a compiled DistributedDataParallel model computing the gradient one
process computes on the whole batch (torch 2.13 compiles DDP's step in pieces, with the same
frames and graph breaks on the CPU with gloo; its DDPOptimizer does not split them here).
Each rank compiles in its own process, with a private Inductor cache."""
import os
import sys
import tempfile

# Bazel's runfiles make this directory a package; the harness is imported as a sibling.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dist_harness import check_all_ok, run_ranks


def _env():
    return {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="xxnpu_dist_compile_")}


def collectives_in_a_graph(rank, world):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    x = torch.full((4,), float(rank + 1), device="xxnpu")
    ranks_sum = float(sum(range(1, world + 1)))

    def functional(t):
        return funcol.all_reduce(t * 2, "sum", group) + 1

    def in_place(t):
        t = t * 2
        dist.all_reduce(t)  # Dynamo traces it as a functional all_reduce
        return t + 1

    def gather(t):
        return funcol.all_gather_tensor(t.sin(), 0, group).cos()

    results = {}
    for name, fn in (("functional", functional), ("in_place", in_place), ("gather", gather)):
        torch._dynamo.reset()
        out = torch.compile(fn, fullgraph=True)(x)  # fullgraph: a graph break would raise
        assert out.device.type == "xxnpu", name
        results[name] = out.cpu()
    assert results["functional"].tolist() == [2 * ranks_sum + 1] * 4
    assert results["in_place"].tolist() == [2 * ranks_sum + 1] * 4
    want = torch.cat([torch.full((4,), float(r + 1)).sin() for r in range(world)]).cos()
    torch.testing.assert_close(results["gather"], want)
    return True


def test_collectives_inside_a_compiled_graph():
    check_all_ok(run_ranks(collectives_in_a_graph, 2, deadline_s=300, timeout_s=240, env=_env()))


def compiled_ddp_gradient(rank, world):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():  # 4 MB of parameters: several 1 MB buckets
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512))

    def batch(r):
        return torch.randn(8, 512, generator=torch.Generator().manual_seed(r))

    local = model().to("xxnpu")
    torch.compile(DDP(local, bucket_cap_mb=1))(batch(rank).to("xxnpu")).square().mean().backward()
    reference = model()  # one process, every rank's batch: DDP averages the gradients
    reference(torch.cat([batch(r) for r in range(world)])).square().mean().backward()
    for p, q in zip(local.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-6)
    return True


def test_compiled_ddp_computes_the_whole_batch_gradient():
    check_all_ok(run_ranks(compiled_ddp_gradient, 2, deadline_s=300, timeout_s=240, env=_env()))
