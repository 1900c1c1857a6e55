"""PyTorch's device-generic test machinery on xxnpu.

``instantiate_device_type_tests`` turns each generic test class below into one class per
available device type; with torch_xxnpu imported first, PyTorch's ``PrivateUse1TestBase``
is among them (it needs ``torch.xxnpu`` registered with ``_register_device_module`` and
``is_available()``), so every class gets an ``...XXNPU`` twin whose tests receive
``device="xxnpu:0"``. The classes use PyTorch's own decorators (``@ops`` over the OpInfo
database, ``@dtypes``, ``@onlyPRIVATEUSE1``, ``@deviceCountAtLeast``) and
``TestCase.assertEqual`` with its dtype-aware tolerances, exactly like PyTorch's test suite;
PyTorch's own test files (test/test_*.py, not shipped in the wheel) run the same way from
a PyTorch checkout (docs/testing.md).
"""
import torch
import torch_xxnpu  # noqa: F401  (must come before common_device_type: it picks the test bases at import)

from torch.testing._internal.common_device_type import (  # noqa: E402
    PrivateUse1TestBase,
    deviceCountAtLeast,
    dtypes,
    instantiate_device_type_tests,
    onlyPRIVATEUSE1,
    ops,
    tol,
    toleranceOverride,
)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_utils import TestCase, make_tensor  # noqa: E402

# A handful of OpInfos: the native binary kernels and ops that run through the fallback.
_OPS = [op for op in op_db if op.name in ("add", "sub", "mul", "div", "abs", "neg", "clone", "where", "sum", "t")]


class TestCompareCpu(TestCase):
    """The device-vs-CPU check of PyTorch's TestCommon.test_compare_cpu, on OpInfo samples."""

    # float16 add/sub with alpha: the CPU's scalar loop rounds alpha * other to half before
    # adding (its vectorised loop does not); xxnpu rounds once, and the two differ by up to
    # ~2e-3 where a and alpha * other cancel. opcheck checks such rows against float32.
    @toleranceOverride({torch.float16: tol(atol=2e-3, rtol=2e-3)})
    @ops(_OPS, allowed_dtypes=(torch.float32, torch.float16, torch.int64))
    def test_compare_cpu(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            cpu_sample = sample.transform(lambda t: t.to("cpu") if isinstance(t, torch.Tensor) else t)
            actual = op(sample.input, *sample.args, **sample.kwargs)
            expected = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            self.assertEqual(sample.output_process_fn_grad(actual), cpu_sample.output_process_fn_grad(expected),
                             exact_device=False)

    @ops([op for op in _OPS if op.supports_out], allowed_dtypes=(torch.float32,))
    def test_out_matches_functional(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            expected = op(sample.input, *sample.args, **sample.kwargs)
            if not isinstance(expected, torch.Tensor):
                continue
            out = torch.empty(0, device=device, dtype=expected.dtype)
            op(sample.input, *sample.args, **sample.kwargs, out=out)
            self.assertEqual(out, expected)
            self.assertEqual(out.device, expected.device)


class TestXxnpuTensorBasics(TestCase):
    """Factories, copies, views and type promotion, checked with TestCase.assertEqual."""

    @dtypes(torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)
    def test_factories_and_round_trip(self, device, dtype):
        x = make_tensor((5, 7), dtype=dtype, device="cpu")
        d = x.to(device)
        self.assertEqual(d.device.type, "xxnpu")
        self.assertEqual(d.cpu(), x)
        self.assertEqual(torch.zeros(3, 4, device=device, dtype=dtype).cpu(), torch.zeros(3, 4, dtype=dtype))
        self.assertEqual(torch.full((2, 3), 1, device=device, dtype=dtype).cpu(), torch.ones(2, 3, dtype=dtype))
        self.assertEqual(torch.empty(0, 3, device=device, dtype=dtype).shape, (0, 3))

    @dtypes(torch.float32, torch.int32)
    def test_views_and_strided_copies(self, device, dtype):
        x = make_tensor((6, 8), dtype=dtype, device="cpu")
        d = x.to(device)
        self.assertEqual(d.t().cpu(), x.t())
        self.assertEqual(d[1:5:2, ::3].cpu(), x[1:5:2, ::3])
        self.assertEqual(d.view(4, 12).cpu(), x.view(4, 12))
        self.assertEqual(d.as_strided((3, 3), (9, 2), 1).cpu(), x.as_strided((3, 3), (9, 2), 1))
        y = torch.empty(8, 6, device=device, dtype=dtype)
        y.copy_(d.t())
        self.assertEqual(y, x.t(), exact_device=False)

    @dtypes(torch.float32, torch.float16, torch.int64)
    def test_binary_ops_broadcast_and_promote(self, device, dtype):
        a = make_tensor((4, 1, 5), dtype=dtype, device="cpu", low=1, high=9)
        b = make_tensor((3, 1), dtype=dtype, device="cpu", low=1, high=9)
        for fn in (torch.add, torch.sub, torch.mul, torch.div):
            self.assertEqual(fn(a.to(device), b.to(device)), fn(a, b), exact_device=False)
        self.assertEqual((a.to(device) * 0.5).dtype, torch.promote_types(dtype, torch.get_default_dtype())
                         if not dtype.is_floating_point else dtype)

    @onlyPRIVATEUSE1
    def test_device_is_xxnpu(self, device):
        self.assertEqual(self.device_type, "xxnpu")
        self.assertTrue(device.startswith("xxnpu"))
        self.assertIs(torch.xxnpu, self.device_mod)

    @deviceCountAtLeast(2)
    def test_copy_between_devices(self, devices):
        x = torch.arange(10.0, device=devices[0])
        y = x.to(devices[1])
        self.assertEqual(y.device, torch.device(devices[1]))
        self.assertEqual((y * 2).cpu(), torch.arange(10.0) * 2)


# PrivateUse1TestBase learns the backend's name in setUpClass, which instantiating @ops
# tests calls: without this, the first class would be named ...PRIVATEUSE1, later ones ...XXNPU.
PrivateUse1TestBase.setUpClass()
instantiate_device_type_tests(TestCompareCpu, globals(), only_for="privateuse1")
instantiate_device_type_tests(TestXxnpuTensorBasics, globals(), only_for="privateuse1")


def test_privateuse1_test_base_is_registered():
    """xxnpu is picked up by PyTorch's own mechanism, not by a base class of ours."""
    from torch.testing._internal.common_device_type import device_type_test_bases

    assert PrivateUse1TestBase in device_type_test_bases
    assert "TestCompareCpuXXNPU" in globals(), [n for n in globals() if n.startswith("Test")]
    assert "TestXxnpuTensorBasicsXXNPU" in globals()
    names = [n for n in dir(globals()["TestCompareCpuXXNPU"]) if n.startswith("test_")]
    assert "test_compare_cpu_add_xxnpu_float32" in names, names[:10]
