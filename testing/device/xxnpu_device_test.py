"""torch.xxnpu at parity with torch.cuda: registration, devices, streams, events, threads,
and the two default simulated devices."""
import threading

import pytest
import torch

from testlib import run_python

import torch_xxnpu  # noqa: F401  (registers the backend)

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel", "ignore:TypedStorage is deprecated")


@pytest.fixture(autouse=True)
def _restore_device_and_stream():
    torch.xxnpu.set_device(0)
    yield
    for d in range(torch.xxnpu.device_count()):
        torch.xxnpu.set_stream(torch.xxnpu.default_stream(d))
    torch.xxnpu.set_device(0)


# ---------------------------------------------------------------- registration


def test_import_renames_privateuse1_and_installs_torch_xxnpu():
    assert torch._C._get_privateuse1_backend_name() == "xxnpu"
    assert torch.xxnpu is torch_xxnpu.xxnpu
    assert torch.get_device_module("xxnpu") is torch.xxnpu
    assert torch.device("xxnpu:1").type == "xxnpu" and torch.device("xxnpu:1").index == 1


def test_generated_tensor_module_and_storage_methods():
    t = torch.arange(4.0)
    assert not t.is_xxnpu
    d = t.xxnpu()
    assert d.is_xxnpu and d.device == torch.device("xxnpu", 0)
    assert t.xxnpu(1).device == torch.device("xxnpu", 1)
    assert torch.equal(d.cpu(), t)

    m = torch.nn.Linear(3, 2).xxnpu(1)
    assert all(p.device == torch.device("xxnpu", 1) for p in m.parameters())

    s = t.untyped_storage().xxnpu()
    assert s.is_xxnpu and s.device.type == "xxnpu"
    assert not t.untyped_storage().is_xxnpu
    assert torch.tensor([], dtype=torch.float32).set_(s.cpu()).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert t.storage().xxnpu().is_xxnpu  # TypedStorage too


def test_registration_is_idempotent():
    torch_xxnpu._register_backend()
    assert torch.xxnpu is torch_xxnpu.xxnpu
    assert torch.ones(1, device="xxnpu").is_xxnpu


def test_lazy_initialisation_in_fresh_process():
    r = run_python(
        """
        import torch, torch_xxnpu
        assert torch.xxnpu.is_available() and torch.xxnpu.device_count() == 2
        torch.manual_seed(0)              # seeds xxnpu lazily, as CUDA
        assert torch.xxnpu.memory_allocated() == 0
        assert not torch.xxnpu.is_initialized(), "queried without starting the device"
        torch.empty(1, device="xxnpu")
        assert torch.xxnpu.is_initialized()
        print("ok")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_init_is_explicit_and_idempotent():
    torch.xxnpu.init()
    torch.xxnpu.init()
    assert torch.xxnpu.is_initialized()


# ---------------------------------------------------------------- devices


def test_device_count_and_availability_follow_environment():
    assert torch.xxnpu.is_available()
    assert torch.xxnpu.device_count() == 2
    r = run_python("import torch, torch_xxnpu; print(torch.xxnpu.device_count())", XXNPU_DEVICE_COUNT="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_set_device_and_current_device():
    torch.xxnpu.set_device(1)
    assert torch.xxnpu.current_device() == 1
    assert torch.empty(2, device="xxnpu").device == torch.device("xxnpu", 1)
    torch.xxnpu.set_device("xxnpu:0")
    assert torch.xxnpu.current_device() == 0
    torch.xxnpu.set_device(torch.device("xxnpu", 1))
    assert torch.xxnpu.current_device() == 1
    torch.xxnpu.set_device(-1)  # as torch.cuda: a negative index is a no-op
    assert torch.xxnpu.current_device() == 1


@pytest.mark.parametrize("index", [256, 257, 2, 128, 1 << 40, -2, -129, -256])
def test_an_index_out_of_range_is_an_error_everywhere(index):
    """256 used to be narrowed to 8 bits and select device 0 (128 became -128). Every API
    taking an index raises what torch.cuda raises for an invalid ordinal, naming the range;
    -1 alone means the current device."""
    torch.xxnpu.set_device(1)
    calls = {
        "set_device": lambda: torch.xxnpu.set_device(index),
        "device": lambda: torch.xxnpu.device(index).__enter__(),
        "synchronize": lambda: torch.xxnpu.synchronize(index),
        "mem_get_info": lambda: torch.xxnpu.mem_get_info(index),
        "memory_allocated": lambda: torch.xxnpu.memory_allocated(index),
        "reset_peak_memory_stats": lambda: torch.xxnpu.reset_peak_memory_stats(index),
        "set_per_process_memory_fraction": lambda: torch.xxnpu.set_per_process_memory_fraction(0.5, index),
        "current_stream": lambda: torch.xxnpu.current_stream(index),
        "default_stream": lambda: torch.xxnpu.default_stream(index),
        "Stream": lambda: torch.xxnpu.Stream(index),
    }
    for name, call in calls.items():
        with pytest.raises(torch.AcceleratorError, match=rf"Invalid xxnpu device index {index}: expected 0 <= index < 2"):
            call()
        assert torch.xxnpu.current_device() == 1, name
    for call in (torch.xxnpu.get_device_properties, torch.xxnpu.get_device_name):  # torch.cuda's class
        with pytest.raises(AssertionError, match=f"Invalid device id {index}: xxnpu has 2 devices"):
            call(index)
    # The bindings check the full value too (no narrowing on the way in).
    with pytest.raises(torch.AcceleratorError, match="Invalid xxnpu device index"):
        torch_xxnpu._C._set_device(index)
    assert torch.xxnpu.current_device() == 1
    torch.xxnpu.set_device(0)


def test_device_context_manager_nests_and_restores():
    assert torch.xxnpu.current_device() == 0
    with torch.xxnpu.device(1):
        assert torch.xxnpu.current_device() == 1
        assert torch.empty(1, device="xxnpu").device.index == 1
        with torch.xxnpu.device("xxnpu:0"):
            assert torch.xxnpu.current_device() == 0
        assert torch.xxnpu.current_device() == 1
        with torch.xxnpu.device(None):  # no-op, as torch.cuda.device(None)
            assert torch.xxnpu.current_device() == 1
    assert torch.xxnpu.current_device() == 0
    with pytest.raises(KeyError):
        with torch.xxnpu.device(1):
            raise KeyError("propagates")
    assert torch.xxnpu.current_device() == 0


def test_device_of_follows_tensor():
    t = torch.empty(1, device="xxnpu:1")
    with torch.xxnpu.device_of(t):
        assert torch.xxnpu.current_device() == 1
    with torch.xxnpu.device_of(torch.empty(1)):  # CPU tensor: no change
        assert torch.xxnpu.current_device() == 0


def test_device_properties_and_name():
    p = torch.xxnpu.get_device_properties(1)
    assert p.index == 1
    assert p.total_memory == 8 << 30  # XXNPU_DEVICE_MEMORY default 8G
    assert p.multi_processor_count >= 1
    assert torch.xxnpu.get_device_name() == p.name == "xxnpu simulated NPU"
    assert torch.xxnpu.get_device_name("xxnpu:1") == p.name
    assert torch.xxnpu.get_device_properties(torch.device("xxnpu", 0)).index == 0
    assert "xxnpu simulated NPU" in repr(p)


def test_synchronize_waits_for_queued_work():
    x = torch.empty(1 << 20, device="xxnpu")
    x.fill_(3.0)  # asynchronous kernel
    torch.xxnpu.synchronize()
    assert torch.xxnpu.current_stream().query()
    torch.xxnpu.synchronize("xxnpu:1")
    torch.xxnpu.synchronize(torch.device("xxnpu", 0))
    assert x[-1].item() == 3.0


# ---------------------------------------------------------------- streams


def test_default_and_current_streams():
    d0 = torch.xxnpu.default_stream()
    assert d0.stream_id == 0 and d0.device == torch.device("xxnpu", 0)
    assert torch.xxnpu.current_stream() == d0
    d1 = torch.xxnpu.default_stream(1)
    assert d1.device_index == 1 and d1 != d0
    assert isinstance(d0, torch.Stream) and isinstance(d0, torch.xxnpu.Stream)


def test_new_streams_come_from_pool_with_priority():
    s = torch.xxnpu.Stream()
    hi = torch.xxnpu.Stream(priority=-1)
    on1 = torch.xxnpu.Stream(device="xxnpu:1")
    assert s.stream_id != 0 and s.device_index == 0
    assert on1.device_index == 1
    assert s.priority == 0 and hi.priority == -1
    assert torch.xxnpu.Stream.priority_range() == (0, -1)
    assert s == torch.xxnpu.Stream(stream_id=s.stream_id, device_index=0, device_type=s.device_type)
    assert hash(s) == hash(torch.xxnpu.Stream(stream_id=s.stream_id, device_index=0, device_type=s.device_type))
    assert "xxnpu:0" in repr(s)


def test_set_stream_and_stream_context():
    s = torch.xxnpu.Stream()
    torch.xxnpu.set_stream(s)
    assert torch.xxnpu.current_stream() == s
    torch.xxnpu.set_stream(None)  # no-op
    assert torch.xxnpu.current_stream() == s
    torch.xxnpu.set_stream(torch.xxnpu.default_stream())
    other = torch.xxnpu.Stream()
    with torch.xxnpu.stream(other) as entered:
        assert entered == other
        assert torch.xxnpu.current_stream() == other
        assert torch.accelerator.current_stream() == other
    assert torch.xxnpu.current_stream() == torch.xxnpu.default_stream()
    with torch.xxnpu.stream(None):
        assert torch.xxnpu.current_stream() == torch.xxnpu.default_stream()


def test_stream_context_on_other_device_switches_device_like_cuda():
    s1 = torch.xxnpu.Stream(device=1)
    with torch.xxnpu.stream(s1):
        assert torch.xxnpu.current_device() == 1
        assert torch.xxnpu.current_stream() == s1
        assert torch.empty(1, device="xxnpu").device.index == 1
    assert torch.xxnpu.current_device() == 0
    assert torch.xxnpu.current_stream(1) == torch.xxnpu.default_stream(1)
    assert torch.xxnpu.current_stream(0) == torch.xxnpu.default_stream(0)


def test_set_stream_rejects_a_cpu_stream():
    with pytest.raises(RuntimeError, match="Expected an xxnpu stream"):
        torch.xxnpu.set_stream(torch.Stream("cpu"))


def test_ops_run_on_the_current_stream_and_wait_stream_orders_them():
    s = torch.xxnpu.Stream()
    x = torch.empty(1 << 21, device="xxnpu")
    with torch.xxnpu.stream(s):
        x.fill_(7.0)
    torch.xxnpu.current_stream().wait_stream(s)
    y = torch.empty_like(x)
    y.copy_(x)  # on the default stream, after s's fill
    assert torch.equal(y[-4:].cpu(), torch.full((4,), 7.0))
    s.synchronize()
    assert s.query()


def test_external_stream_wraps_a_runtime_handle():
    s = torch.xxnpu.Stream()
    ext = torch.xxnpu.ExternalStream(s.xxnpu_stream)
    assert ext == s
    assert ext.xxnpu_stream == s.native_handle
    with pytest.raises(ValueError, match="belongs to xxnpu:0"):
        torch.xxnpu.ExternalStream(s.xxnpu_stream, device=1)


# ---------------------------------------------------------------- events


def test_event_record_query_synchronize_elapsed_time():
    start = torch.xxnpu.Event(enable_timing=True)
    end = torch.xxnpu.Event(enable_timing=True)
    start.record()
    torch.empty(1 << 20, device="xxnpu").normal_()
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert end.device == torch.device("xxnpu", 0)
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms > 0
    assert end.elapsed_time(start) < 0
    # a plain torch.Event of the same device pairs with it as well
    plain = torch.Event(device="xxnpu", enable_timing=True)
    plain.record()
    plain.synchronize()
    assert start.elapsed_time(plain) >= ms


def test_event_timing_errors():
    a = torch.xxnpu.Event(enable_timing=True)
    untimed = torch.xxnpu.Event()
    a.record()
    untimed.record()
    torch.xxnpu.synchronize()
    # RuntimeError as torch.cuda's (here its AcceleratorError subclass: the runtime refuses).
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        a.elapsed_time(untimed)
    with pytest.raises(RuntimeError, match="must be recorded"):
        a.elapsed_time(torch.xxnpu.Event(enable_timing=True))
    with pytest.raises(TypeError, match="torch.Event"):
        a.elapsed_time(object())
    with pytest.raises(NotImplementedError):
        torch.xxnpu.Event(interprocess=True)


def test_event_wait_orders_another_stream():
    s = torch.xxnpu.Stream()
    x = torch.empty(1 << 21, device="xxnpu")
    with torch.xxnpu.stream(s):
        x.fill_(2.0)
        e = s.record_event()
    torch.xxnpu.current_stream().wait_event(e)
    y = torch.empty_like(x).copy_(x)
    assert y[0].item() == 2.0 and y[-1].item() == 2.0
    assert e.query()


def test_event_from_another_device():
    e = torch.xxnpu.Event()
    e.record(torch.xxnpu.current_stream(0))
    # Waiting on it from device 1 is legal (cross-device ordering) ...
    torch.xxnpu.current_stream(1).wait_event(e)
    torch.xxnpu.synchronize(1)
    # ... re-recording it on device 1 is not, as with CUDA events.
    with pytest.raises(RuntimeError, match="Event device index 0 does not match recording stream's device index 1"):
        e.record(torch.xxnpu.Stream(device=1))
    # Timing across devices is refused.
    a = torch.xxnpu.Event(enable_timing=True)
    a.record()
    with torch.xxnpu.device(1):
        b = torch.xxnpu.Event(enable_timing=True)
        b.record()
    torch.xxnpu.synchronize(0)
    torch.xxnpu.synchronize(1)
    with pytest.raises(RuntimeError, match="different devices, xxnpu:0 and xxnpu:1"):
        a.elapsed_time(b)


# ---------------------------------------------------------------- threads


def test_threads_each_on_their_own_stream():
    n_threads, rounds, n = 4, 25, 4096
    errors = []
    barrier = threading.Barrier(n_threads)

    def worker(i):
        try:
            dev = i % 2
            torch.xxnpu.set_device(dev)
            s = torch.xxnpu.Stream()
            barrier.wait()
            with torch.xxnpu.stream(s):
                assert torch.xxnpu.current_stream() == s
                for k in range(rounds):
                    value = float(i * 1000 + k)
                    a = torch.empty(n, device="xxnpu")
                    a.fill_(value)
                    b = torch.empty(n, device="xxnpu").copy_(a)
                    host = torch.arange(n, dtype=torch.float32) + value
                    c = host.to("xxnpu")
                    assert torch.equal(b.cpu(), torch.full((n,), value)), (i, k)
                    assert torch.equal(c.cpu(), host), (i, k)
                    assert a.device.index == dev
            # the stream was this thread's only
            assert torch.xxnpu.current_stream() == torch.xxnpu.default_stream()
        except BaseException as e:  # noqa: BLE001
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    # other threads' set_device did not leak into this one
    assert torch.xxnpu.current_device() == 0


# ---------------------------------------------------------------- two devices


def test_tensors_and_copies_across_the_two_devices():
    host = torch.arange(1000, dtype=torch.float32)
    a = host.to("xxnpu:0")
    b = a.to("xxnpu:1")
    assert b.device == torch.device("xxnpu", 1)
    c = b.to("xxnpu:0")
    assert torch.equal(c.cpu(), host)
    # strided / casting copies across devices
    d = torch.empty(500, dtype=torch.float64, device="xxnpu:1").copy_(a[::2])
    assert torch.equal(d.cpu(), host[::2].double())
    # ownership of memory per device
    before = torch.xxnpu.memory_allocated(1)
    e = torch.empty(1 << 20, device="xxnpu:1")
    assert torch.xxnpu.memory_allocated(1) - before >= 4 << 20
    del e
    assert torch.xxnpu.memory_allocated(1) == before


def test_module_on_second_device():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    m.to("xxnpu:1")
    assert {p.device for p in m.parameters()} == {torch.device("xxnpu", 1)}
    back = {k: v.cpu() for k, v in m.state_dict().items()}
    assert all(torch.equal(ref[k], back[k]) for k in ref)


# ---------------------------------------------------------------- shallow copies


def test_data_assignment_between_cpu_and_xxnpu_as_with_cuda():
    """`t.data = other` across devices (what optimizers' state swaps and older .to() code
    do) works with CUDA tensors; xxnpu dense tensors are shallow-copy compatible the same way."""
    x = torch.arange(6.0, device="xxnpu").reshape(2, 3)
    c = torch.zeros(4)
    assert torch._has_compatible_shallow_copy_type(c, x)
    assert torch._has_compatible_shallow_copy_type(x, c)
    assert torch._has_compatible_shallow_copy_type(x, torch.ones(1, device="xxnpu:1"))
    c.data = x
    assert c.device == x.device and c.shape == (2, 3)
    assert c.data_ptr() == x.data_ptr()  # a shallow copy: the same storage
    x.add_(1)
    assert torch.equal(c.cpu(), torch.arange(1.0, 7.0).reshape(2, 3))

    p = torch.nn.Parameter(torch.randn(3, device="xxnpu"))
    p.data = torch.ones(3)  # back to the CPU, keeping the Parameter object
    assert isinstance(p, torch.nn.Parameter)
    assert p.device.type == "cpu" and torch.equal(p.detach(), torch.ones(3))


def test_sparse_and_dense_stay_incompatible():
    x = torch.ones(2, device="xxnpu")
    s = torch.ones(2, 2).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(x, s)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        x.data = s
