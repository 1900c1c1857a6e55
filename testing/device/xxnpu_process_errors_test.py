"""Fork safety (as CUDA: a child forked after initialisation cannot use the device; spawn
works) and bad input / faults: clear Python exceptions, never a crashed process."""
import multiprocessing
import os

import pytest
import torch

from testlib import run_python

import torch_xxnpu  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel", "ignore:TypedStorage is deprecated")

FORK_MSG = "Cannot re-initialize xxnpu in forked subprocess"


def _use_device_in_child(queue):
    """multiprocessing target: reports what using xxnpu did in this process."""
    try:
        t = torch.arange(4.0, device="xxnpu")
        queue.put(("ok", float(t.sum().item()), torch.xxnpu.device_count()))
    except BaseException as e:  # noqa: BLE001
        queue.put((type(e).__name__, str(e), None))


@pytest.fixture(autouse=True)
def _initialised():
    torch.empty(1, device="xxnpu")  # the parent has used the device
    torch.xxnpu.set_device(0)
    yield
    torch.xxnpu.set_device(0)


# ---------------------------------------------------------------- fork / spawn


def test_os_fork_after_init_child_gets_clear_error():
    assert torch.xxnpu.is_initialized()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 0
        try:
            os.close(r)
            msgs = []
            msgs.append(f"bad_fork={torch.xxnpu._is_in_bad_fork()}")
            msgs.append(f"initialized={torch.xxnpu.is_initialized()}")
            for what, fn in [
                ("empty", lambda: torch.empty(1, device="xxnpu")),
                ("init", torch.xxnpu.init),
                ("current_device", torch.xxnpu.current_device),
            ]:
                try:
                    fn()
                    msgs.append(f"{what}: no error")
                except BaseException as e:  # noqa: BLE001
                    msgs.append(f"{what}: {type(e).__name__}: {e}")
            os.write(w, "\n".join(msgs).encode())
            os.close(w)
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        report = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, report
    lines = report.splitlines()
    assert lines[0] == "bad_fork=True"
    assert lines[1] == "initialized=False"
    for line in lines[2:]:
        assert f"RuntimeError: {FORK_MSG}" in line, line
        assert "'spawn' start method" in line, line
    # the parent is unaffected
    assert not torch.xxnpu._is_in_bad_fork()
    assert torch.ones(2, device="xxnpu").sum().item() == 2.0


def test_multiprocessing_fork_context_reports_clear_error():
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_use_device_in_child, args=(q,))
    p.start()
    kind, msg, _ = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert kind == "RuntimeError"
    assert FORK_MSG in msg and "spawn" in msg


def test_multiprocessing_spawn_child_can_use_the_device():
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_use_device_in_child, args=(q,))
    p.start()
    result = q.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert result == ("ok", 6.0, 2)


def test_fork_before_initialisation_child_can_use_the_device():
    # As CUDA: only initialisation before the fork poisons the child.
    r = run_python(
        """
        import os, torch, torch_xxnpu
        assert not torch.xxnpu.is_initialized()
        pid = os.fork()
        if pid == 0:
            ok = torch.arange(3.0, device="xxnpu").sum().item() == 3.0
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(os.WEXITSTATUS(status))
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


# ---------------------------------------------------------------- bad device indices


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.xxnpu.set_device(5),
        lambda: torch.empty(1, device="xxnpu:7"),
        lambda: torch.ones(2).to("xxnpu:3"),
        lambda: torch.ones(2).xxnpu(3),
        lambda: torch.xxnpu.Stream(device=5),
        lambda: torch.xxnpu.current_stream(5),
        lambda: torch.xxnpu.synchronize(5),
        lambda: torch.xxnpu.memory_allocated(5),
        lambda: torch.xxnpu.mem_get_info(5),
        lambda: torch.xxnpu.device(5).__enter__(),
        lambda: torch.xxnpu.get_rng_state(5),
        lambda: torch.accelerator.set_device_index(9),
    ],
    ids=[
        "set_device",
        "empty",
        "to",
        "xxnpu_method",
        "Stream",
        "current_stream",
        "synchronize",
        "memory_allocated",
        "mem_get_info",
        "device_ctx",
        "get_rng_state",
        "accelerator_set_device_index",
    ],
)
def test_out_of_range_device_index_is_an_accelerator_error(call):
    # torch.cuda raises torch.AcceleratorError ("invalid device ordinal") for these.
    with pytest.raises(torch.AcceleratorError, match=r"Invalid xxnpu device index \d: expected 0 <= index < 2"):
        call()
    assert torch.xxnpu.current_device() == 0  # nothing half-done


@pytest.mark.parametrize("idx", [9, 2, -3])
def test_get_device_properties_out_of_range(idx):
    with pytest.raises(AssertionError, match=f"Invalid device id {idx}: xxnpu has 2 devices"):
        torch.xxnpu.get_device_properties(idx)


def test_wrong_device_type_is_rejected():
    with pytest.raises(ValueError, match="Expected an xxnpu device, but got: cpu"):
        torch.xxnpu.set_device("cpu")
    with pytest.raises(ValueError, match="Expected an xxnpu device"):
        torch.xxnpu.get_rng_state("cpu")
    with pytest.raises(ValueError, match="Expected a torch.device, str, int or None"):
        torch.xxnpu.current_stream(1.5)


# ---------------------------------------------------------------- mixed devices


SAME_DEVICE = "Expected all tensors to be on the same device, but found at least two devices"


@pytest.mark.parametrize(
    "op",
    [
        lambda x, c: x + c,
        lambda x, c: c.add_(x),
        lambda x, c: torch.mm(x.view(2, 2), c.view(2, 2)),
        lambda x, c: torch.cat([x, c]),
        lambda x, c: torch.stack([c, x]),
        lambda x, c: torch.where(x > 0, x, c),
        lambda x, c: torch.index_select(x, 0, torch.tensor([0, 1])),
        lambda x, c: torch.dot(x, c),
    ],
    ids=["add", "cpu_inplace_add", "mm", "cat", "stack", "where", "index_select", "dot"],
)
def test_cpu_and_xxnpu_tensors_in_one_op_are_rejected(op):
    x = torch.ones(4, device="xxnpu")
    c = torch.ones(4)
    with pytest.raises(RuntimeError, match=SAME_DEVICE) as info:
        op(x, c)
    msg = str(info.value)
    assert "xxnpu:0" in msg and "cpu" in msg
    assert torch.equal(c, torch.ones(4))  # the CPU operand was not written


def test_two_xxnpu_devices_in_one_op_are_rejected():
    a = torch.ones(2, 2, device="xxnpu:0")
    b = torch.ones(2, 2, device="xxnpu:1")
    for op in (lambda: a + b, lambda: torch.mm(a, b), lambda: torch.cat([a, b])):
        with pytest.raises(RuntimeError, match=SAME_DEVICE) as info:
            op()
        assert "xxnpu:0" in str(info.value) and "xxnpu:1" in str(info.value)


def test_what_cuda_accepts_with_cpu_operands_still_works():
    x = torch.arange(4.0, device="xxnpu")
    # 0-dim CPU tensors are scalars (TensorIterator ops)
    assert torch.equal((x * torch.tensor(2.0)).cpu(), torch.arange(4.0) * 2)
    assert torch.equal(torch.where(x > 1, x, torch.tensor(-1.0)).cpu(), torch.tensor([-1.0, -1.0, 2.0, 3.0]))
    # CPU index tensors for advanced indexing
    assert torch.equal(x[torch.tensor([3, 0])].cpu(), torch.tensor([3.0, 0.0]))
    y = x.clone()
    y[torch.tensor([1])] = torch.tensor(9.0)
    assert torch.equal(y.cpu(), torch.tensor([0.0, 9.0, 2.0, 3.0]))
    # copies between devices are what .to()/copy_ are for
    assert torch.equal(torch.empty(4).copy_(x), torch.arange(4.0))


# ---------------------------------------------------------------- faults
# An asynchronous kernel failure cannot be provoked from Python yet (every registered
# kernel returns OK); the runtime's sticky-error path is covered by //device:runtime_test.


def test_process_survives_a_burst_of_bad_calls():
    for _ in range(20):
        with pytest.raises(torch.AcceleratorError):
            torch.empty(1, device="xxnpu:7")
        with pytest.raises(RuntimeError, match=SAME_DEVICE):
            torch.mm(torch.ones(2, 2, device="xxnpu"), torch.ones(2, 2))
    assert torch.ones(3, device="xxnpu").sum().item() == 3.0
