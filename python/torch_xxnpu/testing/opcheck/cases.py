"""Cases: an OpInfo or a custom op, seen the same way by the runner (samples, call,
tolerances, skips and expected failures), and loading and selecting them."""
import sys
import unittest
from typing import Dict, Iterable, List, Optional, Tuple

from torch_xxnpu.testing.opcheck.dtypes import DEFAULT_TOL, dtype_name
from torch_xxnpu.testing.opcheck.samples import DEVICE, move_sample


class Case:
    """What the runner needs of an op: samples on the CPU, a call, tolerances, skips."""

    kind = "?"
    name = "?"

    def dtypes(self) -> List:
        raise NotImplementedError

    def backward_dtypes(self) -> set:
        return set()

    def samples(self, dtype, requires_grad: bool) -> Iterable:
        """SampleInputs on xxnpu."""
        raise NotImplementedError

    def call(self, sample):
        raise NotImplementedError

    def tolerance(self, dtype) -> Tuple[float, float, str]:
        rtol, atol = DEFAULT_TOL.get(dtype_name(dtype), (0.0, 0.0))
        return rtol, atol, "assert_close default"

    def skip_reason(self, dtype) -> Optional[str]:
        return None

    def expected_failure(self, dtype) -> bool:
        return False

    def native_kernel(self, native: set) -> bool:
        return False


class _FakeTestSelf:
    """Stands in for a TestCase when we evaluate an OpInfo's skip decorators."""

    device_type = DEVICE
    precision = 0.0
    rel_tol = 0.0

    def __getattr__(self, name):
        raise AttributeError(name)


def _decorator_effect(decorator) -> Tuple[Optional[str], bool]:
    """(skip reason or None, expected failure?) of one test decorator."""
    def probe(self, *args, **kwargs):
        return None

    try:
        wrapped = decorator(probe)
    except unittest.SkipTest as e:
        return f"{e}" or "skipped", False
    except Exception:
        return None, False
    if getattr(wrapped, "__unittest_skip__", False):
        return getattr(wrapped, "__unittest_skip_why__", "skipped") or "skipped", False
    if getattr(wrapped, "__unittest_expecting_failure__", False):
        return None, True
    try:
        wrapped(_FakeTestSelf(), DEVICE, None, None)
    except unittest.SkipTest as e:
        return f"{e}" or "skipped", False
    except Exception:
        pass
    return None, False


class OpInfoCase(Case):
    kind = "opinfo"
    # The test whose decorators (skips, tolerances) apply: PyTorch's own device-vs-CPU check.
    TEST = ("TestCommon", "test_compare_cpu")

    def __init__(self, op):
        self.op = op
        self.name = op.full_name if hasattr(op, "full_name") else (
            op.name + ("." + op.variant_test_name if op.variant_test_name else ""))
        self.aten_name = getattr(op, "aten_name", None) or op.name

    def dtypes(self):
        return sorted(self.op.supported_dtypes("cpu"), key=dtype_name)

    def backward_dtypes(self):
        if not self.op.supports_autograd:
            return set()
        return set(self.op.supported_backward_dtypes("cpu"))

    def samples(self, dtype, requires_grad):
        # Made on xxnpu, as PyTorch's device tests do: the sample functions know which
        # arguments must stay on the CPU (tensor_split's indices, for instance).
        return self.op.sample_inputs(DEVICE, dtype, requires_grad=requires_grad)

    def call(self, sample):
        return self.op(sample.input, *sample.args, **sample.kwargs)

    def _active(self, dtype, test_names=None, any_test=False):
        from torch.testing._internal.opinfo.core import DecorateInfo

        cls_name, test_name = self.TEST
        for d in self.op.decorators:
            if not isinstance(d, DecorateInfo):
                yield d, True
                continue
            if not d.active_if:
                continue
            if d.dtypes is not None and dtype not in d.dtypes:
                continue
            exact = (d.cls_name in (None, cls_name) and d.test_name in (None, test_name)
                     and d.device_type in (None, DEVICE, "privateuse1"))
            if exact:
                for dec in d.decorators:
                    yield dec, True
            elif any_test and d.device_type in (None, "cuda", DEVICE, "privateuse1"):
                for dec in d.decorators:
                    yield dec, False

    def tolerance(self, dtype):
        from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

        rtol, atol, _ = super().tolerance(dtype)
        exact, other = [], []
        for dec, is_exact in self._active(dtype, any_test=True):
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                (exact if is_exact else other).append((dec.d[dtype].rtol, dec.d[dtype].atol))
            elif isinstance(dec, precisionOverride) and dtype in dec.d:
                (exact if is_exact else other).append((0.0, dec.d[dtype]))
        # An override for test_compare_cpu itself wins; else the loosest the OpInfo grants
        # any of its accelerator tests (those document how far a device kernel's results
        # legitimately drift from the CPU's: reduction order, fused ops).
        chosen, source = (exact, "OpInfo override (test_compare_cpu)") if exact else (
            other, "OpInfo override (device tests)")
        if not chosen:
            return rtol, atol, "assert_close default"
        return max(rtol, max(r for r, _ in chosen)), max(atol, max(a for _, a in chosen)), source

    def _effects(self, dtype):
        from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

        skip, xfail = None, False
        for dec, is_exact in self._active(dtype):
            if not is_exact or isinstance(dec, (toleranceOverride, precisionOverride)):
                continue
            s, x = _decorator_effect(dec)
            skip = skip or s
            xfail = xfail or x
        return skip, xfail

    def skip_reason(self, dtype):
        skip, _ = self._effects(dtype)
        if skip:
            return f"OpInfo skips TestCommon.test_compare_cpu: {skip}"
        code = getattr(self.op.op, "__code__", None)
        if code is not None and "wrapper_set_seed" in code.co_names:
            # PyTorch wraps the ops it knows to be random (randn, dropout, ...) so that each
            # call reseeds; xxnpu's Philox generator still draws other numbers than the CPU's.
            return "random op (the OpInfo reseeds it with wrapper_set_seed): xxnpu's generator is not the CPU's"
        return None

    def expected_failure(self, dtype):
        return self._effects(dtype)[1]

    def native_kernel(self, native):
        base = self.aten_name.split(".")[-1]
        return any(n.split("::", 1)[-1].split(".")[0] in (base, base + "_") for n in native)


class SampleError(Exception):
    """A custom op's generic sample cannot be built (the runner reports the op skipped)."""


class CustomOpCase(Case):
    """A torch.ops.<ns>.* overload: its xxnpu kernel against its own CPU kernel."""

    kind = "custom"

    def __init__(self, qualname: str):
        import torch

        self.qualname = qualname  # "xxnpu::add" or "xxnpu::add.out"
        self.name = qualname
        ns, rest = qualname.split("::", 1)
        opname, _, overload = rest.partition(".")
        self.packet = getattr(getattr(torch.ops, ns), opname)
        self.overload = getattr(self.packet, overload or "default")
        self.schema = self.overload._schema
        from torch_xxnpu.testing import custom_samples

        self.registered = custom_samples.lookup(qualname)

    def dtypes(self):
        import torch

        if self.registered:
            return list(self.registered[1])
        return [torch.float32, torch.float64, torch.float16, torch.bfloat16]

    def backward_dtypes(self):
        return {d for d in self.dtypes() if d.is_floating_point or d.is_complex}

    def _has_kernel(self, key):
        import torch

        return any(torch._C._dispatch_has_kernel_for_dispatch_key(self.qualname, k)
                   for k in (key, "CompositeImplicitAutograd", "CompositeExplicitAutograd"))

    def skip_reason(self, dtype):
        if self.qualname.split("::", 1)[1].startswith("_"):
            return "private op (name starts with _)"
        if not self._has_kernel("CPU"):
            return "no CPU kernel to compare against (register one: TORCH_LIBRARY_IMPL(<ns>, CPU, m))"
        return None

    def native_kernel(self, native):
        return self.qualname in native or self.qualname.split(".")[0] in native

    def samples(self, dtype, requires_grad):
        gen = self.registered[0] if self.registered else self._generic_samples
        return (move_sample(s, DEVICE) for s in gen(dtype, requires_grad))

    def _generic_samples(self, dtype, requires_grad):
        import torch
        from torch.testing import make_tensor
        from torch.testing._internal.opinfo.core import SampleInput

        values = []
        for arg in self.schema.arguments:
            t = str(arg.type)
            if arg.has_default_value():
                values.append(arg.default_value)
            elif t.startswith("Tensor"):
                values.append(make_tensor((4, 8), dtype=dtype, device="cpu", low=-2, high=2,
                                          requires_grad=requires_grad))
            elif t in ("float", "Scalar"):
                values.append(0.5)
            elif t in ("int", "SymInt"):
                values.append(1)
            elif t == "bool":
                values.append(False)
            elif t.startswith("int[]") or t.startswith("SymInt[]"):
                values.append([4, 8])
            else:
                raise SampleError(f"no generic value for argument {arg.name}: {t}; register samples "
                                   "in torch_xxnpu/testing/custom_samples.py")
        if not values:
            raise SampleError("op takes no arguments")
        yield SampleInput(values[0], args=tuple(values[1:]))

    def call(self, sample):
        out = self.overload(sample.input, *sample.args, **sample.kwargs)
        mutated = []
        flat = [sample.input, *sample.args]
        for i, arg in enumerate(self.schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write and i < len(flat):
                mutated.append(flat[i])
        return (out, mutated) if mutated else out


def discover_custom_ops(namespaces: List[str]) -> List[str]:
    import torch

    names = []
    for qual in torch._C._dispatch_get_all_op_names():
        ns = qual.split("::", 1)[0]
        if ns in namespaces:
            names.append(qual)
    return sorted(set(names))


def load_cases(namespaces: List[str], with_opinfo: bool = True) -> Dict[str, Case]:
    cases: Dict[str, Case] = {}
    if with_opinfo:
        try:
            from torch.testing._internal.common_methods_invocations import op_db
        except ModuleNotFoundError as e:
            raise SystemExit(f"opcheck: PyTorch's OpInfo database needs {e.name!r}, which is not installed "
                             f"(pip install {e.name})") from e

        for op in op_db:
            c = OpInfoCase(op)
            cases[c.name] = c
    for qual in discover_custom_ops(namespaces):
        try:
            c = CustomOpCase(qual)
        except Exception as e:  # an op whose packet cannot be resolved: report, do not die
            print(f"opcheck: cannot load custom op {qual}: {e}", file=sys.stderr)
            continue
        cases[c.name] = c
    return cases


def select_cases(cases: Dict[str, Case], ops: Optional[str]) -> List[Case]:
    if not ops:
        return [cases[k] for k in sorted(cases)]
    chosen, missing = [], []
    for want in [w.strip() for w in ops.split(",") if w.strip()]:
        # "xxnpu.add" is accepted for "xxnpu::add"; a name picks all its OpInfo variants.
        alt = want.replace(".", "::", 1) if "::" not in want else want
        hits = [c for k, c in cases.items()
                if k == want or k == alt or (c.kind == "opinfo" and c.op.name == want)]
        if not hits:
            missing.append(want)
        for h in hits:
            if h not in chosen:
                chosen.append(h)
    if missing:
        raise SystemExit(f"opcheck: no such op: {', '.join(missing)} (OpInfo names such as "
                         "'add', 'nn.functional.relu', 'div.floor_rounding', or 'xxnpu::add')")
    return sorted(chosen, key=lambda c: c.name)
