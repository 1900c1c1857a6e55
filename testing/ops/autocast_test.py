"""torch.autocast("xxnpu") as torch.autocast("cuda") behaves: ops on CUDA's lists change
dtype, every other op (random init, dropout, factories, indexing, in-place updates) runs
unchanged inside the region, and a mixed-precision training step (bf16, and fp16 with
GradScaler) trains like the float32 one."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from testlib import no_fallback

import torch_xxnpu  # noqa: F401

LOW = [torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def _no_fallback():
    """Autocast, the training step and GradScaler's kernels all run on the device."""
    with no_fallback():
        yield


# Ops on no autocast list: before the AutocastPrivateUse1 fallthrough (ops/autocast.cc)
# each raised "Could not run ... with arguments from the 'Autocastxxnpu' backend".
OFF_LIST = {
    "randn": lambda: torch.randn(4, 4, device="xxnpu"),
    "rand": lambda: torch.rand(4, 4, device="xxnpu"),
    "randint": lambda: torch.randint(0, 5, (4,), device="xxnpu"),
    "normal_": lambda: torch.empty(4, device="xxnpu").normal_(),
    "uniform_": lambda: torch.empty(4, device="xxnpu").uniform_(-1, 1),
    "zeros": lambda: torch.zeros(3, device="xxnpu"),
    "arange": lambda: torch.arange(5, device="xxnpu"),
    "full": lambda: torch.full((2,), 3.0, device="xxnpu"),
    "dropout": lambda: F.dropout(torch.ones(64, device="xxnpu"), 0.5, training=True),
    "index": lambda: torch.arange(6.0, device="xxnpu")[torch.tensor([1, 3], device="xxnpu")],
    "cat": lambda: torch.cat([torch.ones(2, device="xxnpu"), torch.zeros(2, device="xxnpu")]),
    "add_": lambda: torch.ones(3, device="xxnpu").add_(1),
    "relu": lambda: torch.relu(torch.ones(3, device="xxnpu")),
    "clone": lambda: torch.ones(3, device="xxnpu").clone(),
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", sorted(OFF_LIST))
def test_ops_off_the_lists_fall_through(name, dtype):
    expected = OFF_LIST[name]()  # outside the region: the reference dtype and shape
    with torch.autocast("xxnpu", dtype=dtype):
        got = OFF_LIST[name]()
    assert got.device.type == "xxnpu"
    assert got.dtype == expected.dtype  # untouched by autocast, as on CUDA
    assert got.shape == expected.shape


@pytest.mark.parametrize("dtype", LOW)
def test_seeded_random_ops_inside_the_region_match_outside(dtype):
    torch.xxnpu.manual_seed(7)
    outside = (torch.randn(100, device="xxnpu"), F.dropout(torch.ones(100, device="xxnpu"), 0.3))
    torch.xxnpu.manual_seed(7)
    with torch.autocast("xxnpu", dtype=dtype):
        inside = (torch.randn(100, device="xxnpu"), F.dropout(torch.ones(100, device="xxnpu"), 0.3))
    for a, b in zip(outside, inside):
        assert torch.equal(a.cpu(), b.cpu())


def _mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 4))


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 16, generator=g), torch.randint(0, 4, (64,), generator=g)


def _train(model, device, dtype, steps, scaler=None):
    x, y = (t.to(device) for t in _data())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        if dtype is not None:
            assert logits.dtype == dtype  # the last Linear ran in the low precision
            assert loss.dtype == torch.float32  # cross_entropy is on the fp32 list
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype", LOW)
def test_training_step_with_random_init_and_dropout(dtype):
    """Module construction (kaiming/uniform init), dropout and the optimizer all run inside
    the region; the loss follows the float32 run's and falls."""
    with torch.autocast("xxnpu", dtype=dtype):
        torch.manual_seed(0)
        built_inside = nn.Linear(8, 8, device="xxnpu")  # random init under autocast
    assert built_inside.weight.dtype == torch.float32

    torch.xxnpu.manual_seed(0)
    ref = _train(_mlp(1).to("xxnpu"), "xxnpu", None, 30)
    torch.xxnpu.manual_seed(0)
    amp = _train(_mlp(1).to("xxnpu"), "xxnpu", dtype, 30)
    assert amp[-1] < 0.7 * amp[0], amp
    # Same dropout masks (same seed), only the matmul precision differs.
    assert abs(amp[0] - ref[0]) < 0.05, (amp[0], ref[0])
    assert abs(amp[-1] - ref[-1]) < 0.15, (amp[-1], ref[-1])


def test_grad_scaler_fp16_scales_unscales_and_skips_inf_steps():
    model = _mlp(2).to("xxnpu")
    scaler = torch.amp.GradScaler("xxnpu", init_scale=2.0**10, growth_interval=1)
    losses = _train(model, "xxnpu", torch.float16, 20, scaler)
    assert losses[-1] < 0.7 * losses[0], losses
    assert scaler.get_scale() > 2.0**10  # finite steps grew the scale

    # A step whose gradients overflow is skipped and halves the scale, as on CUDA.
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    scale = scaler.get_scale()
    for p in model.parameters():
        p.grad = torch.full_like(p, float("inf"))
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == scale * 0.5
    for b, p in zip(before, model.parameters()):
        assert torch.equal(b, p.detach().cpu())


def _unscale(grads, inv_scale):
    found = torch.zeros(1, device=grads[0].device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.full((1,), inv_scale, device=grads[0].device))
    return found


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_unscale_kernel_matches_the_cpu(dtype):
    g = torch.Generator().manual_seed(3)
    base = [torch.randn(n, generator=g).to(dtype) for n in (1, 7, 70000, 3)]
    base.append(torch.randn(6, 5, generator=g).to(dtype).t())  # strided: its own kernel
    for poison in (None, float("inf"), float("nan")):
        cpu = [t.clone() for t in base]
        if poison is not None:
            cpu[2][12345] = poison
        dev = [t.to("xxnpu") for t in cpu]
        if len(dev) == 5:
            dev[4] = cpu[4].t().to("xxnpu").t()  # keep it strided on the device
        found_cpu = torch.zeros(1)
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, found_cpu, torch.full((1,), 0.125))
        found_dev = _unscale(dev, 0.125)
        assert found_dev.item() == found_cpu.item() == (0.0 if poison is None else 1.0)
        for c, d in zip(cpu, dev):
            torch.testing.assert_close(d.cpu(), c, equal_nan=True, rtol=0, atol=0)


def test_update_scale_kernel_follows_the_cpu_schedule():
    scale_c, tracker_c = torch.full((1,), 1024.0), torch.zeros(1, dtype=torch.int32)
    scale_x, tracker_x = scale_c.to("xxnpu"), tracker_c.to("xxnpu")
    for found in [0, 0, 1, 0, 0, 0, 1, 1, 0]:
        f = torch.full((1,), float(found))
        torch._amp_update_scale_(scale_c, tracker_c, f, 2.0, 0.5, 2)
        torch._amp_update_scale_(scale_x, tracker_x, f.to("xxnpu"), 2.0, 0.5, 2)
        assert scale_x.item() == scale_c.item() and tracker_x.item() == tracker_c.item()


def test_amp_kernels_reject_bad_operands():
    g = [torch.ones(3, device="xxnpu")]
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element tensor, got 2"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros(2, device="xxnpu"),
                                                         torch.ones(1, device="xxnpu"))
    with pytest.raises(RuntimeError, match="inv_scale must be a float tensor, got Double"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros(1, device="xxnpu"),
                                                         torch.ones(1, dtype=torch.float64, device="xxnpu"))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3)], torch.zeros(1, device="xxnpu"),
                                                         torch.ones(1, device="xxnpu"))
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(torch.ones(1, device="xxnpu"), torch.zeros(1, device="xxnpu"),
                                 torch.zeros(1, device="xxnpu"), 2.0, 0.5, 2)
    assert torch.equal(g[0].cpu(), torch.ones(3))  # nothing was half-done
