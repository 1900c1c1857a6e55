"""XXNPU_MEMCHECK=1 (this target sets it): a kernel's out-of-bounds device access is its
sticky error naming the kernel and the allocation, the process lives on and the device
stays usable; the caching allocator does not hide overruns (docs/device-runtime.md, "The
memory checker").

torch.ops.xxnpu._debug_access_kernel(x, byte_offset, write) queues a kernel
"xxnpu::debug_access" that touches x.data_ptr() + byte_offset unchecked, as a buggy kernel
would."""
import os
import re

import pytest
import torch

import torch_xxnpu  # noqa: F401


def _failure(kind, where):
    return (re.escape("kernel 'xxnpu::debug_access' failed on xxnpu:0 stream ") + r"\d+" +
            re.escape(f": memcheck: invalid {kind} at ") + r"0x[0-9a-f]+" + re.escape(f" on xxnpu:0: {where}"))


@pytest.fixture(autouse=True)
def _clean_device():
    assert os.environ.get("XXNPU_MEMCHECK") == "1"
    torch.xxnpu.synchronize()
    yield
    torch.xxnpu.synchronize()


def _usable():
    y = torch.arange(10.0, device="xxnpu")
    assert torch.equal((y * 2).cpu(), torch.arange(10.0) * 2)


def test_write_one_past_the_end_names_the_kernel_and_the_allocation():
    x = torch.zeros(1000, device="xxnpu")  # 4000 bytes
    torch.ops.xxnpu._debug_access_kernel(x, 4000, True)
    with pytest.raises(RuntimeError, match=_failure(
            "write", f"0 bytes past the end of the allocation at {hex(x.data_ptr())} of 4000 bytes")):
        torch.xxnpu.synchronize()
    assert torch.equal(x.cpu(), torch.zeros(1000))  # the neighbour-to-be was never touched
    _usable()


def test_read_past_the_end_and_in_bounds_accesses():
    x = torch.ones(3, device="xxnpu")  # 12 bytes: the smallest tensors are guarded too
    torch.ops.xxnpu._debug_access_kernel(x, 11, False)  # its last byte: fine
    torch.ops.xxnpu._debug_access_kernel(x, 0, True)
    torch.xxnpu.synchronize()
    torch.ops.xxnpu._debug_access_kernel(x, 12 + 5, False)
    with pytest.raises(RuntimeError, match=_failure(
            "read", f"5 bytes past the end of the allocation at {hex(x.data_ptr())} of 12 bytes")):
        x.cpu()  # any synchronizing call reports it
    _usable()


def test_the_caching_allocator_does_not_hide_overruns():
    # Normally a freed 8000-byte block would be split and reused for the 4000-byte request,
    # and 4000 bytes past its end would lie inside the cached block.
    big = torch.empty(2000, device="xxnpu")
    del big
    x = torch.empty(1000, device="xxnpu")
    torch.ops.xxnpu._debug_access_kernel(x, 4000, True)
    with pytest.raises(RuntimeError, match=_failure("write", "0 bytes past the end of the allocation at")):
        torch.xxnpu.synchronize()
    # An exact-size request reuses the cached block, still guarded.
    addr = x.data_ptr()
    del x
    y = torch.empty(1000, device="xxnpu")
    assert y.data_ptr() == addr
    torch.ops.xxnpu._debug_access_kernel(y, -1, True)  # before its start: the canary
    with pytest.raises(RuntimeError, match=re.escape(
            f"memcheck: a write 1 bytes before the start of the allocation at {hex(addr)} of 4000 bytes")):
        torch.xxnpu.synchronize()
    _usable()


def test_ops_run_normally_under_memcheck():
    a = torch.randn(37, 5, device="xxnpu")
    b = torch.randn(5, 11, device="xxnpu")
    assert torch.allclose((a @ b).cpu(), a.cpu() @ b.cpu(), atol=1e-5)
    assert torch.equal(torch.sort(a, dim=0).values.cpu(), torch.sort(a.cpu(), dim=0).values)
