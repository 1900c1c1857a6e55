"""Native xxnpu kernels against the CPU, the CPU fallback's reporting, and torch.ops.xxnpu."""
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch_xxnpu  # noqa: F401

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def _make(shape, dtype, gen):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-50, 50, shape, generator=gen, dtype=dtype)


def _tol(dtype):
    return {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}.get(dtype, (1e-6, 1e-6))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((5,), (5,)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (7,)), ((0, 3), (3,))])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_ops_match_cpu(op, shapes, dtype):
    gen = torch.Generator().manual_seed(0)
    a, b = _make(shapes[0], dtype, gen), _make(shapes[1], dtype, gen)
    if op == "div" and not dtype.is_floating_point:
        b = b.masked_fill(b == 0, 1)
    fn = getattr(torch, op)
    expected = fn(a, b)
    got = fn(a.to("xxnpu"), b.to("xxnpu"))
    assert got.device.type == "xxnpu"
    assert got.dtype == expected.dtype
    rtol, atol = _tol(expected.dtype)
    torch.testing.assert_close(got.cpu(), expected, rtol=rtol, atol=atol)


def test_strided_inputs_inplace_out_alpha_and_type_promotion():
    a = torch.randn(6, 8)
    b = torch.randn(8, 6)
    xa, xb = a.to("xxnpu"), b.to("xxnpu")
    # non-contiguous operands
    torch.testing.assert_close((xa + xb.t()).cpu(), a + b.t())
    # alpha, in-place, out=
    torch.testing.assert_close(torch.add(xa, xb.t(), alpha=-2.5).cpu(), torch.add(a, b.t(), alpha=-2.5))
    xc = xa.clone()
    xc.mul_(xb.t())
    torch.testing.assert_close(xc.cpu(), a * b.t())
    out = torch.empty(6, 8, device="xxnpu")
    torch.sub(xa, 1.5, out=out)
    torch.testing.assert_close(out.cpu(), a - 1.5)
    # int tensor * float scalar promotes to float; half + float tensor promotes to float
    i = torch.arange(5)
    assert torch.equal((i.to("xxnpu") * 0.5).cpu(), i * 0.5)
    h = torch.randn(5).half()
    f = torch.randn(5)
    r = h.to("xxnpu") + f.to("xxnpu")
    assert r.dtype == torch.float32
    torch.testing.assert_close(r.cpu(), h + f)
    # true division of integers gives float
    assert (torch.arange(1, 5).to("xxnpu") / 2).dtype == torch.float32


def test_mixing_cpu_and_xxnpu_tensors_is_an_error():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device="xxnpu") + torch.ones(3)


def test_bool_subtraction_is_rejected_like_cuda():
    t = torch.tensor([True, False], device="xxnpu")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        t - t


def test_custom_add_matches_and_has_autograd():
    a = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    xa = a.detach().to("xxnpu").requires_grad_()
    xb = b.detach().to("xxnpu").requires_grad_()
    out = torch.ops.xxnpu.add(xa, xb)
    torch.testing.assert_close(out.cpu(), a + b)
    (out * out).sum().backward()
    ((a + b) * (a + b)).sum().backward()
    torch.testing.assert_close(xa.grad.cpu(), a.grad)
    torch.testing.assert_close(xb.grad.cpu(), b.grad)


def test_custom_add_opcheck():
    from torch.library import opcheck

    opcheck(torch.ops.xxnpu.add.default, (torch.randn(3, 4, requires_grad=True), torch.randn(4)))
    # torch 2.13's autograd-registration check knows only CPU/CUDA/XPU devices.
    opcheck(
        torch.ops.xxnpu.add.default,
        (torch.randn(3, 4, device="xxnpu"), torch.randn(4, device="xxnpu")),
        test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"),
    )


def test_native_ops_lists_the_registered_kernels():
    native = set(torch_xxnpu.ops.native_ops())
    for op in ["aten::add.Tensor", "aten::add.out", "aten::mul.Tensor", "aten::empty_strided", "aten::_copy_from",
               "aten::normal_", "xxnpu::add"]:
        assert op in native, op
    assert "aten::special_bessel_j0" not in native


def test_fallback_warns_once_and_counts_each_use():
    torch_xxnpu.ops.reset_fallback_counts()
    x = torch.tensor([-1.0, 2.0, -3.0], device="xxnpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = torch.special.bessel_j0(x)
        torch.special.bessel_j0(x)
        torch.special.bessel_j0(x)
    torch.testing.assert_close(y.cpu(), torch.special.bessel_j0(torch.tensor([-1.0, 2.0, -3.0])))
    assert y.device.type == "xxnpu"
    counts = torch_xxnpu.ops.fallback_counts()
    assert counts.get("aten::special_bessel_j0", 0) + counts.get("aten::special_bessel_j0.out", 0) == 3, counts
    # Warned at most once per op in the process (possibly earlier in this process).
    assert sum("aten::special_bessel_j0" in str(w.message) for w in caught) <= 1
    torch_xxnpu.ops.reset_fallback_counts()
    assert torch_xxnpu.ops.fallback_counts() == {}


def test_strict_fallback_makes_a_fallback_an_error():
    code = (
        "import torch, torch_xxnpu\n"
        "x = torch.ones(2, device='xxnpu')\n"
        "y = x + x\n"  # native: fine
        "try:\n"
        "    torch.special.bessel_j0(x)\n"
        "except NotImplementedError as e:\n"
        "    print('REFUSED', e)\n"
    )
    env = dict(os.environ, XXNPU_STRICT_FALLBACK="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "REFUSED" in out.stdout, out.stdout + out.stderr
    assert "aten::special_bessel_j0" in out.stdout and "XXNPU_STRICT_FALLBACK" in out.stdout


@pytest.mark.parametrize("value", ["false", "False", "no", "off", "0"])
def test_strict_fallback_false_allows_the_fallback(value):
    # "false" used to mean true (anything but "" and "0" did).
    code = (
        "import torch, torch_xxnpu\n"
        "x = torch.ones(2, device='xxnpu')\n"
        "print('RAN', torch.special.bessel_j0(x).cpu().tolist())\n"
    )
    env = dict(os.environ, XXNPU_STRICT_FALLBACK=value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "RAN" in out.stdout, out.stdout + out.stderr


def test_strict_fallback_bad_value_is_an_error_naming_the_variable():
    code = (
        "import torch, torch_xxnpu\n"
        "try:\n"
        "    torch.special.bessel_j0(torch.ones(2, device='xxnpu'))\n"
        "except ValueError as e:\n"
        "    print('REJECTED', e)\n"
    )
    env = dict(os.environ, XXNPU_STRICT_FALLBACK="ture")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert 'REJECTED XXNPU_STRICT_FALLBACK="ture"' in out.stdout, out.stdout + out.stderr
    assert "0/false/no/off" in out.stdout


def test_python_flag_parser_matches_the_cpp_one():
    from torch_xxnpu._env import parse_flag

    for v in ("1", "true", "YES", " On "):
        assert parse_flag("X", v) is True
    for v in ("0", "False", "no", "OFF"):
        assert parse_flag("X", v, default=True) is False
    assert parse_flag("X", None, default=True) is True and parse_flag("X", "") is False
    with pytest.raises(ValueError, match=r"XXNPU_PROFILER_ON_DEMAND='maybe': expected 1/true/yes/on or 0/false/no/off"):
        parse_flag("XXNPU_PROFILER_ON_DEMAND", "maybe")


def test_copies_of_conjugate_and_negative_views():
    """x.conj() and x.conj().imag are lazy views (conj/neg bits); copying them to or from
    xxnpu applies the pending operation instead of recursing (it used to overflow the stack)."""
    z = torch.randn(5, dtype=torch.complex64)
    xz = z.to("xxnpu")
    assert torch.equal(xz.conj().cpu(), z.conj())
    assert torch.equal(xz.conj().resolve_conj().cpu(), z.conj().resolve_conj())
    assert torch.equal(xz.conj().imag.cpu(), z.conj().imag)  # a negative view
    assert torch.equal(z.conj().to("xxnpu").cpu(), z.conj())  # from a CPU conj view
    out = torch.empty(5, dtype=torch.complex64, device="xxnpu")
    out.conj().copy_(xz)  # into a conj view: stored values are conj(z)
    assert torch.equal(out.cpu(), z.conj())


@pytest.mark.parametrize("python_mode", [False, True], ids=["plain", "under_a_dispatch_mode"])
def test_lazy_views_resolve_under_a_python_dispatch_mode(python_mode):
    """Under a TorchDispatchMode (torch.compile's AOTAutograd runs every compiled graph under
    one; FlopCounterMode, debug modes) the redispatch excludes the Conjugate and Negative
    keys, so the PrivateUse1 copy itself sees the conj/neg bits. clone, copy_ and .cpu() of
    x.conj() returned x unconjugated there (and so did a compiled ``a.conj() + 1``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    z = torch.randn(3, 4, dtype=torch.complex64)
    xz = z.to("xxnpu")
    cases = {
        "clone": (lambda t: t.conj().clone(), z.conj()),
        "copy_": (lambda t: torch.empty_like(t).copy_(t.conj()), z.conj()),
        "into a conj view": (lambda t: (lambda o: (o.conj().copy_(t), o)[1])(torch.empty_like(t)), z.conj()),
        "to the CPU": (lambda t: t.conj().to("cpu"), z.conj()),
        "pointwise": (lambda t: t.conj() + 1, z.conj() + 1),
        "negative view": (lambda t: t.conj().imag.clone(), z.conj().imag),
        "matmul": (lambda t: t.mH @ t, z.mH @ z),
        # The same bit on both sides, through the host paths (another layout on the CPU; a
        # non-contiguous CPU source): those hand tensors to the CPU's copy_/contiguous().
        "conj into conj, to the host": (
            lambda t: torch.zeros(4, 3, dtype=t.dtype).t().conj().copy_(t.conj()).resolve_conj(), z.conj()),
        "conj into conj, from the host": (
            lambda t: torch.zeros_like(t).conj().copy_(z.t().contiguous().t().conj()).resolve_conj(), z.conj()),
    }
    for name, (fn, want) in cases.items():
        if python_mode:
            with PassThrough():
                got = fn(xz)
        else:
            got = fn(xz)
        torch.testing.assert_close(got.cpu(), want, msg=lambda m, name=name: f"{name}: {m}")


def test_compiled_conjugate_matches_eager():
    z = torch.randn(6, dtype=torch.complex64)
    for fn in (lambda a: a.conj() + 1, lambda a: (a * a.conj()).real.sum()):
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(fn, backend="aot_eager")(z.to("xxnpu")).cpu(), fn(z))


def test_every_backend_specific_view_op_has_an_xxnpu_kernel():
    """A view op that ATen registers per backend (not as a composite) needs an xxnpu kernel:
    the CPU fallback can only return a copy. unfold, view_as_real and view_as_complex had
    none, and writes through them were lost. The fallback now refuses view ops outright."""
    import re

    missing = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or "nested" in name:
            continue
        for schema in torch._C._jit_get_schemas_for_operator(name):
            returns = str(schema).split("->")[-1]
            if not re.search(r"Tensor\([a-z]\)", returns):  # no immutable alias returned: not a view
                continue
            full = name + (f".{schema.overload_name}" if schema.overload_name else "")
            try:
                if not torch._C._dispatch_has_kernel_for_dispatch_key(full, "CPU"):
                    continue
                if any(torch._C._dispatch_has_kernel_for_dispatch_key(full, key) for key in (
                        "PrivateUse1", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                        "CompositeExplicitAutogradNonFunctional")):
                    continue
            except RuntimeError:  # a schema the dispatcher does not know by this name
                continue
            missing.append(full)
    assert missing == []


def test_writes_through_unfold_and_view_as_real_reach_the_tensor():
    x = torch.zeros(6, device="xxnpu")
    windows = x.unfold(0, 2, 2)  # [3, 2] over x's storage
    windows[:, 1] = 1
    assert x.cpu().tolist() == [0, 1, 0, 1, 0, 1]
    z = torch.zeros(3, dtype=torch.complex64, device="xxnpu")
    torch.view_as_real(z)[:, 1] = 2
    assert torch.equal(z.cpu(), torch.full((3,), 2j, dtype=torch.complex64))
    parts = torch.arange(6.0, device="xxnpu").view(3, 2)
    assert torch.view_as_complex(parts).cpu().tolist() == [complex(0, 1), complex(2, 3), complex(4, 5)]
    assert torch.view_as_complex(parts).data_ptr() == parts.data_ptr()


def test_complex_random_fills_both_parts_as_on_the_cpu():
    """randn/rand/normal_/uniform_ of complex tensors: each part drawn as the CPU and CUDA do
    (normal parts with half the variance each), on the device, reproducible by seed."""
    torch.xxnpu.manual_seed(0)
    z = torch.randn(200_000, dtype=torch.complex64, device="xxnpu").cpu()
    assert abs(z.real.var().item() - 0.5) < 0.01 and abs(z.imag.var().item() - 0.5) < 0.01
    assert abs(z.abs().square().mean().item() - 1.0) < 0.02  # E|z|^2 = 1, torch.randn's convention
    assert abs(torch.corrcoef(torch.stack([z.real, z.imag]))[0, 1].item()) < 0.01
    u = torch.rand(100_000, dtype=torch.complex128, device="xxnpu").cpu()
    for part in (u.real, u.imag):
        assert part.min() >= 0 and part.max() < 1 and abs(part.mean().item() - 0.5) < 0.01
    n = torch.empty(100_000, dtype=torch.complex64, device="xxnpu").normal_(2.0, 3.0).cpu()
    assert abs(n.real.mean().item() - 2.0) < 0.05 and abs(n.imag.mean().item() - 2.0) < 0.05
    assert abs(n.real.std().item() - 3.0 / 2 ** 0.5) < 0.05
    torch.xxnpu.manual_seed(7)
    a = torch.randn(8, dtype=torch.complex64, device="xxnpu").cpu()
    torch.xxnpu.manual_seed(7)
    assert torch.equal(a, torch.randn(8, dtype=torch.complex64, device="xxnpu").cpu())
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torch.empty(2, dtype=torch.complex64, device="xxnpu").normal_(0.0, -1.0)


def test_device_casts_to_and_from_float8_and_complex32_match_the_cpu_bit_for_bit():
    """x.to(torch.float8_e4m3fn) on xxnpu (the input of a scaled matmul) and torch.chalf
    raised '"xxnpu_copy_out" not implemented'; every pair against the CPU's cast, compared
    as bits (NaN encodings included)."""
    dtypes = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
              torch.complex32, torch.float32, torch.bfloat16, torch.complex64, torch.int32, torch.bool]

    def values(t):  # float8 as bits (NaN encodings included); wider types as float64 parts
        if t.element_size() == 1:
            return t.view(torch.uint8)
        if t.is_complex():
            return torch.view_as_real(t.to(torch.complex128))
        return t.to(torch.float64) if t.is_floating_point() else t

    x = torch.cat([torch.randn(60, generator=torch.Generator().manual_seed(0)) * 4,
                   torch.tensor([0.0, -0.0, 1e6, float("nan")])])
    for a in dtypes:
        src = x.to(a)
        for b in dtypes:
            try:
                want = src.to(b)
            except (RuntimeError, NotImplementedError):  # a cast the CPU does not do either
                continue
            got = src.to("xxnpu").to(b)
            assert got.device.type == "xxnpu" and got.dtype == b
            got, want = values(got.cpu()), values(want)
            if not (b.is_floating_point or b.is_complex or b == torch.bool):
                # NaN and out-of-range values to an integer type are undefined behaviour in
                # C++ (x86 gives INT_MIN, the CPU's vector path 0): compare the rest.
                finite = torch.isfinite(src.to(torch.complex128) if a.is_complex else src.to(torch.float64))
                got, want = got[finite], want[finite]
            assert torch.equal(got, want) or (
                got.is_floating_point() and torch.equal(got.isnan(), want.isnan())
                and torch.equal(got.nan_to_num(), want.nan_to_num())), (a, b)
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.complex32):  # fills, as on the CPU
        for value in (0.0, 1.5):
            got = torch.full((5,), value, dtype=dtype, device="xxnpu")
            assert torch.equal(values(got.cpu()), values(torch.full((5,), value, dtype=dtype)))


def test_uniform_bounds_are_checked_as_on_the_cpu():
    t = torch.empty(4, device="xxnpu")
    with pytest.raises(RuntimeError, match="to is out of bounds for float"):
        t.uniform_(0, 1e39)
    with pytest.raises(RuntimeError, match="from is out of bounds for c10::Half"):
        t.half().uniform_(-1e5, 0)
    with pytest.raises(RuntimeError, match=r"uniform_ expects to-from <= std::numeric_limits<Float>::max\(\)"):
        t.uniform_(-3e38, 3e38)
    with pytest.raises(RuntimeError, match="to is out of bounds"):  # complex: each part's dtype
        torch.empty(2, dtype=torch.complex64, device="xxnpu").uniform_(0, 1e39)
    assert t.uniform_(-2, 2).cpu().abs().max() <= 2
