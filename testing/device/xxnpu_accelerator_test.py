"""torch.accelerator with xxnpu as the accelerator, pinned host memory and non_blocking
copies."""
import pytest
import torch

import torch_xxnpu  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel")

N = 1 << 22  # 16 MiB of float32


@pytest.fixture(autouse=True)
def _restore():
    torch.accelerator.set_device_index(0)
    yield
    for d in range(torch.xxnpu.device_count()):
        torch.xxnpu.set_stream(torch.xxnpu.default_stream(d))
    torch.accelerator.set_device_index(0)


# ---------------------------------------------------------------- torch.accelerator


def test_xxnpu_is_the_current_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("xxnpu")
    assert torch.accelerator.current_accelerator(check_available=True).type == "xxnpu"
    assert torch.accelerator.device_count() == torch.xxnpu.device_count() == 2


def test_device_index_follows_torch_xxnpu():
    torch.accelerator.set_device_index(1)
    assert torch.xxnpu.current_device() == 1 and torch.accelerator.current_device_index() == 1
    assert torch.empty(1, device="xxnpu").device.index == 1
    torch.xxnpu.set_device(0)
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(1):
        assert torch.xxnpu.current_device() == 1
    assert torch.xxnpu.current_device() == 0


def test_streams_through_torch_accelerator():
    assert torch.accelerator.current_stream() == torch.xxnpu.default_stream()
    s = torch.xxnpu.Stream()
    torch.accelerator.set_stream(s)
    assert torch.xxnpu.current_stream() == s
    assert torch.accelerator.current_stream(0) == s
    assert torch.accelerator.current_stream(1) == torch.xxnpu.default_stream(1)
    x = torch.empty(N, device="xxnpu")
    x.fill_(1.0)  # queued on s
    torch.accelerator.synchronize()
    assert s.query()
    torch.accelerator.synchronize(1)
    # a generic torch.Stream made by torch for xxnpu works with torch.xxnpu
    g = torch.Stream(device="xxnpu:1")
    with torch.xxnpu.stream(g):
        assert torch.xxnpu.current_stream(1) == g


def test_memory_functions_agree_with_torch_xxnpu():
    torch.xxnpu.reset_peak_memory_stats()
    x = torch.empty(3 << 20, dtype=torch.uint8, device="xxnpu")
    assert torch.accelerator.memory_allocated() == torch.xxnpu.memory_allocated()
    assert torch.accelerator.memory_allocated(0) >= 3 << 20
    assert torch.accelerator.max_memory_allocated() == torch.xxnpu.max_memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.xxnpu.memory_reserved()
    assert torch.accelerator.max_memory_reserved() == torch.xxnpu.max_memory_reserved()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == torch.xxnpu.memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert total == torch.xxnpu.get_device_properties().total_memory and 0 < free <= total
    del x
    reserved = torch.accelerator.memory_reserved()
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved() <= reserved - (3 << 20)
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()


# ---------------------------------------------------------------- pinned memory


def test_pin_memory_and_is_pinned():
    t = torch.arange(10.0)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and torch.equal(p, t)
    assert torch.empty(8, pin_memory=True).is_pinned()
    assert p.untyped_storage().is_pinned()
    ds = torch.utils.data.TensorDataset(torch.arange(8.0))
    assert all(b[0].is_pinned() for b in torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True))
    with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
        torch.empty(2, device="xxnpu", pin_memory=True)


def _make_stream_busy():
    """Queues enough device work that the current stream stays busy for a while."""
    outs = [torch.randn(N, device="xxnpu") for _ in range(4)]
    return outs


def test_non_blocking_h2d_from_pinned_returns_before_completion():
    src = (torch.arange(N, dtype=torch.float32) % 1000).pin_memory()
    dst = torch.empty(N, device="xxnpu")
    torch.xxnpu.synchronize()
    stream = torch.xxnpu.current_stream()
    busy = _make_stream_busy()
    dst.copy_(src, non_blocking=True)
    assert not stream.query(), "the copy waited for the device"
    stream.synchronize()
    assert stream.query()
    assert torch.equal(dst.cpu(), src)
    del busy


def test_blocking_copies_wait():
    src = torch.ones(N).pin_memory()
    dst = torch.empty(N, device="xxnpu")
    stream = torch.xxnpu.current_stream()
    busy = _make_stream_busy()
    dst.copy_(src)  # non_blocking=False: returns when the copy is done
    assert stream.query()
    busy = _make_stream_busy()
    dst.copy_(torch.ones(N), non_blocking=True)  # pageable: the host waits, as CUDA
    assert stream.query()
    del busy


def test_to_non_blocking_and_d2h_into_pinned():
    src = torch.arange(1000, dtype=torch.float32).pin_memory()
    d = src.to("xxnpu", non_blocking=True)
    assert d.device == torch.device("xxnpu", 0)
    d1 = src.to("xxnpu:1", non_blocking=True)
    back = torch.empty(1000).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.xxnpu.current_stream().synchronize()
    assert torch.equal(back, src)
    torch.xxnpu.synchronize(1)
    assert torch.equal(d1.cpu(), src)
    host = d.to("cpu", non_blocking=True)
    torch.xxnpu.synchronize()
    assert torch.equal(host, src)


def test_pinned_buffer_reuse_waits_for_pending_copy():
    # Freeing a pinned buffer with a copy in flight must not let the allocator hand the
    # same memory out again before the copy has read it.
    dst = torch.empty(N, device="xxnpu")
    busy = _make_stream_busy()
    src = torch.full((N,), 3.0).pin_memory()
    dst.copy_(src, non_blocking=True)
    del src
    scribble = torch.empty(N).pin_memory()
    scribble.fill_(-1.0)
    torch.xxnpu.synchronize()
    assert dst[0].item() == 3.0 and dst[-1].item() == 3.0
    del busy


# ---------------------------------------------------------------- capability

# What ops/copy.cc converts between (the capability's contract: allocate and convert).
_CAPABLE = {
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.bool,
}


def test_device_capability_lists_the_dtypes_the_device_converts():
    cap = torch.accelerator.get_device_capability()
    assert cap == torch.accelerator.get_device_capability("xxnpu:1")
    assert set(cap["supported_dtypes"]) == _CAPABLE
    src = torch.arange(6).reshape(2, 3)
    for dt in cap["supported_dtypes"]:
        x = src.to(dt).to("xxnpu")  # allocate + host-to-device
        for other in (torch.float32, torch.int64, dt):
            got = x.to(other)  # conversion on the device
            assert got.device.type == "xxnpu" and got.dtype == other
            assert torch.equal(got.cpu(), src.to(dt).to(other)), (dt, other)
    assert torch.xxnpu.get_device_capability() == (1, 0)
    assert torch.xxnpu.get_device_capability(1) == (
        torch.xxnpu.get_device_properties(1).major,
        torch.xxnpu.get_device_properties(1).minor,
    )


def test_device_capability_of_a_bad_index_fails_as_other_device_calls():
    get_uncached = torch.accelerator.get_device_capability.__wrapped__  # the function is @cache'd
    with pytest.raises(torch.AcceleratorError, match="Invalid xxnpu device index 7"):
        get_uncached(7)
    with pytest.raises(AssertionError, match="Invalid device id 7"):  # as torch.cuda's
        torch.xxnpu.get_device_capability(7)
