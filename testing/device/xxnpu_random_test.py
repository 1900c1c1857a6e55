"""torch.xxnpu random-number state (torch.cuda.random's twin): seeds, generator states,
per-device generators, lazy seeding before initialisation."""

import pytest
import torch

from testlib import run_python

import torch_xxnpu  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel")


def draw(device="xxnpu", n=64):
    return torch.randn(n, device=device).cpu()


@pytest.fixture(autouse=True)
def _device0():
    torch.xxnpu.set_device(0)
    yield
    torch.xxnpu.set_device(0)


def test_manual_seed_makes_randn_reproducible():
    torch.xxnpu.manual_seed(1234)
    a, b = draw(), draw()
    assert not torch.equal(a, b)  # the generator advances
    torch.xxnpu.manual_seed(1234)
    assert torch.equal(draw(), a) and torch.equal(draw(), b)
    torch.xxnpu.manual_seed(4321)
    assert not torch.equal(draw(), a)
    assert torch.xxnpu.initial_seed() == 4321


def test_values_look_like_the_distributions():
    torch.xxnpu.manual_seed(0)
    n = torch.randn(200_000, device="xxnpu").cpu()
    assert abs(n.mean().item()) < 0.02 and abs(n.std().item() - 1) < 0.02
    u = torch.rand(200_000, device="xxnpu", dtype=torch.float64).cpu()
    assert 0 <= u.min().item() and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01


def test_rng_state_round_trip_reproduces_a_sequence():
    torch.xxnpu.manual_seed(7)
    draw()
    state = torch.xxnpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    seq = [draw() for _ in range(3)]
    torch.xxnpu.set_rng_state(state)
    assert all(torch.equal(draw(), s) for s in seq)
    # the state is a copy: mutating the tensor we passed does not change the generator
    state2 = torch.xxnpu.get_rng_state()
    after = draw()
    torch.xxnpu.set_rng_state(state2)
    state2.zero_()
    assert torch.equal(draw(), after)


def test_generators_are_per_device():
    torch.xxnpu.manual_seed_all(99)
    a0, a1 = draw("xxnpu:0"), draw("xxnpu:1")
    torch.xxnpu.manual_seed_all(99)
    assert torch.equal(draw("xxnpu:1"), a1)  # device 1 does not depend on device 0's draws
    assert torch.equal(draw("xxnpu:0"), a0)

    # manual_seed seeds the current device only
    torch.xxnpu.manual_seed_all(5)
    s1 = torch.xxnpu.get_rng_state(1)
    with torch.xxnpu.device(1):
        torch.xxnpu.manual_seed(6)
        assert torch.xxnpu.initial_seed() == 6
    assert torch.xxnpu.initial_seed() == 5
    assert not torch.equal(torch.xxnpu.get_rng_state(1), s1)

    states = torch.xxnpu.get_rng_state_all()
    assert len(states) == 2
    x = [draw("xxnpu:0"), draw("xxnpu:1")]
    torch.xxnpu.set_rng_state_all(states)
    assert torch.equal(draw("xxnpu:0"), x[0]) and torch.equal(draw("xxnpu:1"), x[1])
    assert torch.equal(torch.xxnpu.get_rng_state("xxnpu:1"), torch.xxnpu.get_rng_state(torch.device("xxnpu", 1)))


def test_seed_and_seed_all_are_nondeterministic():
    torch.xxnpu.seed()
    first = torch.xxnpu.initial_seed()
    torch.xxnpu.seed()
    assert torch.xxnpu.initial_seed() != first
    torch.xxnpu.seed_all()
    with torch.xxnpu.device(1):
        assert torch.xxnpu.initial_seed() == torch.xxnpu.default_generators[0].initial_seed()


def test_torch_manual_seed_and_default_generators():
    torch.manual_seed(31)
    assert torch.xxnpu.initial_seed() == 31
    assert torch.xxnpu.default_generators[1].initial_seed() == 31
    assert len(torch.xxnpu.default_generators) == 2
    g = torch.xxnpu.default_generators[0]
    assert g.device == torch.device("xxnpu", 0)


def test_explicit_generator_and_fork_rng():
    g = torch.Generator(device="xxnpu").manual_seed(3)
    a = torch.randn(32, device="xxnpu", generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(torch.randn(32, device="xxnpu", generator=g).cpu(), a)

    torch.xxnpu.manual_seed(11)
    with torch.random.fork_rng(devices=[0], device_type="xxnpu"):
        inside = draw()
    assert torch.equal(draw(), inside)  # state restored after the block


def test_bad_devices_for_rng_state():
    with pytest.raises(torch.AcceleratorError, match="Invalid xxnpu device index 5"):
        torch.xxnpu.get_rng_state(5)
    with pytest.raises(torch.AcceleratorError, match="Invalid xxnpu device index 2"):
        torch.xxnpu.set_rng_state(torch.xxnpu.get_rng_state(), "xxnpu:2")


def test_seeding_before_initialisation_is_applied_lazily():
    r = run_python(
        """
        import torch, torch_xxnpu
        torch.xxnpu.manual_seed(5)
        torch.xxnpu.manual_seed_all(77)      # the latest seed call wins, as CUDA
        assert not torch.xxnpu.is_initialized()
        a = torch.randn(8, device="xxnpu:1").cpu()
        assert torch.xxnpu.is_initialized()
        torch.xxnpu.manual_seed_all(77)
        b = torch.randn(8, device="xxnpu:1").cpu()
        print(torch.equal(a, b), torch.xxnpu.initial_seed())
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "77"]
