"""torch.profiler's exporters and groupings with xxnpu work in them: tensorboard_trace_handler,
export_stacks, export_memory_timeline, key_averages(group_by_input_shape / group_by_stack_n).

torch 2.13 specifics these tests pin down (docs/profiler.md, "Exporters"):
- export_stacks takes "self_privateuse1_time_total" for device time; "self_device_time_total"
  is refused with a ValueError.
- evt.stack (export_stacks, group_by_stack_n) is only filled with
  experimental_config=_ExperimentalConfig(verbose=True); with_stack=True alone records
  Python frames as events but leaves op stacks empty (on CPU too).
"""
import gzip
import json

import pytest
import torch
import torch_xxnpu  # noqa: F401
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

pytestmark = pytest.mark.filterwarnings(
    "ignore:`export_memory_timeline` is deprecated:FutureWarning",
    "ignore:.*has no xxnpu kernel",  # the Linear's matmuls run through the CPU fallback
)


@pytest.fixture(scope="module", autouse=True)
def warm():
    torch.ones(4, device="xxnpu").cpu()
    torch.xxnpu.synchronize()


def xxnpu_model(a):
    b = torch.ops.xxnpu.add(a, a)
    return b * 2


def _kernel_names(trace):
    return sorted(e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel")


@pytest.mark.parametrize("use_gzip", [False, True])
def test_tensorboard_trace_handler_writes_the_device_timeline(tmp_path, use_gzip):
    x = torch.ones(16, device="xxnpu")
    with profile(activities=ACTIVITIES, schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path), worker_name="w0", use_gzip=use_gzip)) as p:
        for step in range(4):
            xxnpu_model(x)
            torch.xxnpu.synchronize()
            p.step()
    suffix = ".pt.trace.json.gz" if use_gzip else ".pt.trace.json"
    files = sorted(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("w0.") and files[0].name.endswith(suffix), files
    opener = gzip.open if use_gzip else open
    with opener(files[0], "rt") as f:
        trace = json.load(f)
    assert _kernel_names(trace) == ["xxnpu::add"] * 2 + ["xxnpu::mul"] * 2  # the 2 active steps
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert procs[0] == "xxnpu:0"
    assert trace["deviceProperties"][0]["name"]
    steps = [e["name"] for e in trace["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]


def test_export_stacks_with_device_time(tmp_path):
    x = torch.ones(256, 256, device="xxnpu")
    with profile(activities=ACTIVITIES, with_stack=True,
                 experimental_config=_ExperimentalConfig(verbose=True)) as prof:
        xxnpu_model(x)
    with pytest.raises(ValueError, match="self_privateuse1_time_total"):
        prof.export_stacks(str(tmp_path / "refused.txt"), "self_device_time_total")

    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path), "self_privateuse1_time_total")
    lines = path.read_text().splitlines()
    assert lines, "no stack with device time"
    stacks = [line.rsplit(" ", 1) for line in lines]
    # Every line is a ';'-joined Python stack ending in a positive number of device microseconds.
    assert all(int(value) > 0 for _, value in stacks)
    in_model = [frames.split(";") for frames, _ in stacks if "xxnpu_model" in frames]
    assert in_model
    for frames in in_model:  # root first: ..., this test, xxnpu_model, [torch.ops call frames]
        i = next(i for i, f in enumerate(frames) if f.endswith(":_xxnpu_model"))
        assert frames[i - 1].endswith(":_test_export_stacks_with_device_time"), frames
    # Device time under xxnpu_model: the add and the mul kernels (each line per event: op, kernel).
    kernel_us = sum(k.duration for e in prof.events() for k in e.kernels if e.name in ("xxnpu::add", "aten::mul"))
    assert sum(int(v) for f, v in stacks if "xxnpu_model" in f) >= int(kernel_us) - 2


def test_group_by_input_shape_separates_device_time_per_shape():
    big, small = torch.ones(512, 512, device="xxnpu"), torch.ones(4, device="xxnpu")
    with profile(activities=ACTIVITIES, record_shapes=True) as prof:
        for _ in range(3):
            torch.ops.xxnpu.add(big, big)
        torch.ops.xxnpu.add(small, small)
    rows = {(e.key, str(e.input_shapes)): e for e in prof.key_averages(group_by_input_shape=True)}
    big_row = rows[("xxnpu::add", "[[512, 512], [512, 512]]")]
    small_row = rows[("xxnpu::add", "[[4], [4]]")]
    assert big_row.count == 3 and small_row.count == 1
    assert big_row.self_device_time_total > small_row.self_device_time_total > 0
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="self_device_time_total", row_limit=-1)
    assert "Input Shapes" in table and "[[512, 512], [512, 512]]" in table and "Self XXNPU" in table


def test_group_by_stack_n_attributes_device_time_to_call_sites():
    x = torch.ones(256, 256, device="xxnpu")

    def site_a(t):
        return t * 3

    def site_b(t):
        return t * 4

    with profile(activities=ACTIVITIES, with_stack=True,
                 experimental_config=_ExperimentalConfig(verbose=True)) as prof:
        site_a(x)
        site_b(x)
        site_b(x)
    rows = [e for e in prof.key_averages(group_by_stack_n=1) if e.key == "aten::mul"]
    by_site = {e.stack[0].split(": ")[-1]: e for e in rows}
    assert set(by_site) == {"site_a", "site_b"}, [e.stack for e in rows]
    assert by_site["site_a"].count == 1 and by_site["site_b"].count == 2
    assert by_site["site_a"].self_device_time_total > 0 and by_site["site_b"].self_device_time_total > 0


@pytest.fixture(scope="module")
def training_profile():
    """Two SGD steps of a Linear on xxnpu, with everything the memory profiler needs."""
    model = torch.nn.Linear(64, 64).to("xxnpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 64, device="xxnpu")

    def step():
        opt.zero_grad(set_to_none=True)
        (model(x) * model(x)).sum().backward()
        opt.step()

    step()
    torch.xxnpu.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            step()
    return prof


def test_export_memory_timeline_categorises_xxnpu_memory(training_profile, tmp_path):
    from torch.profiler._memory_profiler import Category, _CATEGORY_TO_INDEX

    path = tmp_path / "timeline.json"
    training_profile.export_memory_timeline(str(path), device="xxnpu:0")
    times, sizes = json.loads(path.read_text())
    assert len(times) == len(sizes) > 10
    assert times == sorted(times)

    def peak(category):
        return max(s[_CATEGORY_TO_INDEX[category] + 1] for s in sizes)

    assert peak(Category.PARAMETER) == 64 * 64 * 4 + 64 * 4      # weight + bias
    assert peak(Category.OPTIMIZER_STATE) == 64 * 64 * 4 + 64 * 4  # momentum buffers
    assert peak(Category.INPUT) == 32 * 64 * 4
    assert peak(Category.GRADIENT) > 0 and peak(Category.ACTIVATION) > 0

    # Raw events for the same device, and none of these tensors on the CPU timeline.
    raw = tmp_path / "timeline.raw.json.gz"
    training_profile.export_memory_timeline(str(raw), device="xxnpu:0")
    with gzip.open(raw, "rt") as f:
        events = json.load(f)
    assert events and all(len(e) == 4 for e in events)
    cpu = tmp_path / "cpu.json"
    training_profile.export_memory_timeline(str(cpu), device="cpu")
    _, cpu_sizes = json.loads(cpu.read_text())
    assert all(s[_CATEGORY_TO_INDEX[Category.PARAMETER] + 1] == 0 for s in cpu_sizes)


def test_export_memory_timeline_needs_the_three_flags():
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        torch.ones(4, device="xxnpu")
    with pytest.raises(ValueError, match="record_shapes=True, with_stack=True required"):
        prof.export_memory_timeline("unused.json", device="xxnpu:0")
