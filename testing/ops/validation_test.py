"""Bad input gets the CPU's answer (issue 21): out= of a wrong dtype, on the wrong device,
of a wrong shape or overlapping an input, and mixed-dtype / mixed-device inputs, for every
native xxnpu kernel that takes them. Each case runs on the CPU and on xxnpu: both raise the
same exception class, or both succeed with equal values. Out-of-range indices never touch
memory outside the tensors and raise IndexError at the next synchronizing call.

The sweep's cases come from the registrations: every out= overload registered for
PrivateUse1 is matched with the OpInfos whose samples reach it (a TorchDispatchMode
records which aten overload an OpInfo's out= call dispatches to)."""
import functools
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_xxnpu

DEV = "xxnpu"


def _sync():
    torch.xxnpu.synchronize()


def _outcome(fn):
    """("ok", result) or ("raise", exception class, message); xxnpu work is synchronized
    inside, so a device-side error counts as the call's."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
            _sync()
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return ("raise", type(e), str(e).split("\n")[0]), caught
    return ("ok", result), caught


def _tensors(r):
    if isinstance(r, torch.Tensor):
        return [r]
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _tensors(x)]
    return []


def _same_values(a, b):
    ta, tb = _tensors(a), _tensors(b)
    if len(ta) != len(tb):
        return f"{len(ta)} outputs vs {len(tb)}"
    for x, y in zip(ta, tb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"shape/dtype {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}"
        try:
            tol = dict(rtol=1e-4, atol=1e-4) if x.dtype.is_floating_point else dict(rtol=0, atol=0)
            torch.testing.assert_close(x.cpu(), y.cpu(), equal_nan=True, **tol)
        except AssertionError as e:
            return str(e).split("\n")[0]
    return None


def _compare(cpu_fn, xx_fn):
    """None if xxnpu behaves as the CPU, else what differs."""
    cpu, cpu_warn = _outcome(cpu_fn)
    xx, xx_warn = _outcome(xx_fn)
    if cpu[0] != xx[0]:
        return f"cpu {cpu[0]} {cpu[1:] if cpu[0] == 'raise' else ''} / xxnpu {xx[0]} {xx[1:] if xx[0] == 'raise' else ''}"
    if cpu[0] == "raise":
        return None if cpu[1] is xx[1] else f"cpu raised {cpu[1].__name__}: {cpu[2]} / xxnpu {xx[1].__name__}: {xx[2]}"
    resized = lambda ws: any("resized" in str(w.message) for w in ws)  # noqa: E731
    if resized(cpu_warn) != resized(xx_warn):
        return f"resize warning: cpu {resized(cpu_warn)}, xxnpu {resized(xx_warn)}"
    return _same_values(cpu[1], xx[1])


# ---------------------------------------------------------------------------------------
# The listed calls (issue 21): each silently succeeded on xxnpu.


def _both(make):
    """make(device) -> callable; compared on CPU and xxnpu."""
    diff = _compare(make("cpu"), make(DEV))
    assert diff is None, diff


def _rand(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype).to(device)


def test_gather_out_of_another_dtype():
    def make(d):
        x = torch.arange(16, dtype=torch.int64, device=d).view(4, 4)
        idx = torch.zeros(4, 4, dtype=torch.long, device=d)
        return lambda: torch.gather(x, 1, idx, out=torch.empty(4, 4, dtype=torch.int32, device=d))
    _both(make)
    x = torch.arange(16, dtype=torch.int64, device=DEV).view(4, 4)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype long int, but got int instead"):
        torch.gather(x, 1, torch.zeros(4, 4, dtype=torch.long, device=DEV),
                     out=torch.empty(4, 4, dtype=torch.int32, device=DEV))


@pytest.mark.parametrize("op", ["sort", "topk"])
def test_sort_topk_indices_of_another_dtype(op):
    def make(d):
        x = _rand(4, 8, device=d)
        v = torch.empty(0, device=d)
        i = torch.empty(0, dtype=torch.int32, device=d)
        return (lambda: torch.sort(x, out=(v, i))) if op == "sort" else (lambda: torch.topk(x, 5, out=(v, i)))
    _both(make)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype long int, but got int instead"):
        make(DEV)()


def test_tril_out_of_another_dtype():
    _both(lambda d: (lambda x=_rand(4, 4, device=d): torch.tril(
        x, out=torch.empty(4, 4, dtype=torch.float64, device=d))))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        torch.tril(_rand(4, 4, device=DEV), out=torch.empty(4, 4, dtype=torch.float64, device=DEV))


def test_index_put_values_of_another_dtype():
    def make(d):
        s = torch.zeros(5, device=d)
        idx = torch.tensor([1, 3], device=d)
        return lambda: s.index_put_((idx,), torch.ones(2, dtype=torch.float64, device=d))
    _both(make)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        make(DEV)()


def test_index_select_negative_index_is_an_index_error():
    def make(d):
        x = _rand(4, 3, device=d)
        return lambda: torch.index_select(x, 0, torch.tensor([-1], device=d))
    _both(make)
    with pytest.raises(IndexError, match=r"index_select.*index -1.*\[0, 4\)"):
        torch.index_select(_rand(4, 3, device=DEV), 0, torch.tensor([-1], device=DEV)).cpu()
    # The stream is usable again after the error was reported.
    assert torch.index_select(_rand(4, 3, device=DEV), 0, torch.tensor([1], device=DEV)).cpu().shape == (1, 3)


BAD_INDEX = {
    "gather": lambda d: torch.gather(torch.zeros(3, 4, device=d), 1, torch.tensor([[0, 4]], device=d)),
    "scatter": lambda d: torch.zeros(3, 4, device=d).scatter_(1, torch.tensor([[5]], device=d),
                                                              torch.ones(1, 1, device=d)),
    "scatter_add": lambda d: torch.zeros(3, 4, device=d).scatter_add_(0, torch.tensor([[-1]], device=d),
                                                                      torch.ones(1, 1, device=d)),
    "index": lambda d: torch.zeros(3, 4, device=d)[torch.tensor([3], device=d)],
    "index_put_": lambda d: torch.zeros(3, 4, device=d).index_put_((torch.tensor([-4], device=d),),
                                                                   torch.ones(4, device=d)),
    "index_add": lambda d: torch.zeros(3, 4, device=d).index_add_(0, torch.tensor([3], device=d),
                                                                  torch.ones(1, 4, device=d)),
    "index_select": lambda d: torch.index_select(torch.zeros(3, 4, device=d), 0, torch.tensor([3], device=d)),
    "embedding": lambda d: torch.nn.functional.embedding(torch.tensor([7], device=d), torch.zeros(3, 4, device=d)),
    "nll_loss": lambda d: torch.nn.functional.nll_loss(torch.zeros(2, 3, device=d), torch.tensor([0, 3], device=d)),
}


@pytest.mark.parametrize("op", sorted(BAD_INDEX))
def test_out_of_range_index_raises_the_cpus_class(op):
    """The CPU raises at the call: IndexError for index, index_put_, index_select,
    embedding and nll_loss, RuntimeError for gather, scatter and index_add. The device
    kernel checks every index and touches nothing out of bounds; the error comes at the
    next synchronizing call (.cpu() here), naming the kernel, as that class (for
    RuntimeError, torch.AcceleratorError, its subclass and CUDA's class for a device
    fault). The stream works afterwards."""
    with pytest.raises((IndexError, RuntimeError)) as cpu:
        BAD_INDEX[op]("cpu")
    with pytest.raises(cpu.type, match=r"kernel 'xxnpu::.*out of (bounds|range)") as xx:
        BAD_INDEX[op](DEV).cpu()
    assert issubclass(xx.type, cpu.type), (xx.type, cpu.type)
    assert torch.ones(2, device=DEV).sum().item() == 2.0


def test_gather_out_on_the_cpu_is_a_device_error():
    x = _rand(4, 4, device=DEV)
    idx = torch.zeros(4, 4, dtype=torch.long, device=DEV)
    out = torch.full((4, 4), 7.0)
    with pytest.raises(RuntimeError, match="Expected out tensor to have device xxnpu:0, but got cpu instead"):
        torch.gather(x, 1, idx, out=out)
    _sync()
    assert torch.equal(out, torch.full((4, 4), 7.0)), "the CPU out was written"


def test_masked_select_with_a_cpu_self_and_an_xxnpu_mask_is_a_device_error():
    # Found by the fuzzer: the xxnpu kernel read the CPU self as device memory (abort).
    x = _rand(4, 4)
    mask = (torch.arange(16).reshape(4, 4) % 3 == 0).to(DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.masked_select(x, mask)
    # A CPU mask with an xxnpu self is moved to the device, as before.
    got = torch.masked_select(x.to(DEV), mask.cpu())
    assert torch.equal(got.cpu(), torch.masked_select(x, mask.cpu()))


# ---------------------------------------------------------------------------------------
# The _foreach_* out= overloads. None is native on xxnpu: ATen's generated out= wrappers call
# the functional form (native or not) and copy into `out`, so they are checked here as a
# family rather than through the registrations the sweep below reads.


def _foreach_out_overloads():
    return sorted({(s.name.split("::")[1], s.overload_name) for s in torch._C._jit_get_all_schemas()
                   if s.name.startswith("aten::_foreach_") and s.overload_name.endswith("out")})


def _foreach_args(op, device):
    """Arguments for a _foreach out= overload from its schema (two tensors of different
    shapes per list, values in [0.5, 1.5) so every math op is defined), or None."""
    gen = torch.Generator().manual_seed(0)

    def tensors():
        return [(torch.rand(3, 4, generator=gen) + 0.5).to(device), (torch.rand(5, generator=gen) + 0.5).to(device)]

    args = []
    for a in op._schema.arguments:
        if a.is_out:
            continue
        t = str(a.type)
        if t == "List[Tensor]":
            args.append(tensors())
        elif t == "Tensor":  # the Tensor_out overloads' 0-dim scalar operand
            args.append(torch.tensor(0.75).to(device))
        elif t == "List[number]":
            args.append([0.5, 0.25])
        elif t in ("number", "Optional[number]"):
            args.append(2.0 if a.name == "ord" else 0.5)
        elif a.has_default_value():
            args.append(a.default_value)
        else:
            return None
    return args


def _foreach_out_case(name, overload, device, out_kind):
    op = getattr(getattr(torch.ops.aten, name), overload)
    args = _foreach_args(op, device)
    shapes = [(3, 4), (5,)]
    make = {
        "ok": lambda s: torch.empty(s, device=device),
        "dtype-int32": lambda s: torch.empty(s, dtype=torch.int32, device=device),
        "dtype-float64": lambda s: torch.empty(s, dtype=torch.float64, device=device),
        "shape": lambda s: torch.empty(7, device=device),
        "on-cpu": lambda s: torch.empty(s),
    }[out_kind]
    out = [make(s) for s in shapes]
    return lambda: (op(*args, out=out), out)[1]


def test_foreach_out_overloads_match_the_cpu():
    """Each _foreach_* out= overload with a good out, one of another dtype or shape: the same
    outcome (and values) as on the CPU; out= on the CPU for xxnpu inputs raises."""
    swept, bad = 0, []
    for name, overload in _foreach_out_overloads():
        if _foreach_args(getattr(getattr(torch.ops.aten, name), overload), "cpu") is None:
            continue
        swept += 1
        for kind in ("ok", "dtype-int32", "dtype-float64", "shape"):
            diff = _compare(_foreach_out_case(name, overload, "cpu", kind),
                            _foreach_out_case(name, overload, DEV, kind))
            if diff is not None:
                bad.append(f"{name}.{overload} {kind}: {diff}")
        got, _ = _outcome(_foreach_out_case(name, overload, DEV, "on-cpu"))
        if got[0] != "raise" or not issubclass(got[1], RuntimeError):
            bad.append(f"{name}.{overload} out on the CPU: xxnpu {got[0]}")
    print(f"_foreach out= overloads swept: {swept} of {len(_foreach_out_overloads())}")
    assert swept >= 60
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------
# The sweep.


def _out_overloads():
    names = set()
    for reg in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"):
        ns, _, rest = reg.partition("::")
        name, _, overload = rest.partition(".")
        try:
            schema = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")._schema
        except (AttributeError, RuntimeError):
            continue
        if any(a.is_out for a in schema.arguments):
            names.add(f"{ns}::{name}" + (f".{overload}" if overload else ""))
    return names


class _Record(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func.name())
        return func(*args, **(kwargs or {}))


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.detach().to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _first_dtype(opinfo):
    dtypes = opinfo.supported_dtypes("cpu")
    for d in (torch.float32, torch.int64, torch.bool):
        if d in dtypes:
            return d
    return next(iter(dtypes), None)


@functools.lru_cache(maxsize=None)
def _sweep_ops():
    """(opinfo name, variant, dtype, sample list, aten overload) for every OpInfo whose
    out= call reaches a native xxnpu out= overload."""
    from torch.testing._internal.common_methods_invocations import op_db

    targets = _out_overloads()
    base = {t.split("::")[1].split(".")[0] for t in targets}
    cases = []
    for opinfo in op_db:
        if not opinfo.supports_out or opinfo.name.split(".")[-1] not in base and opinfo.aten_name not in base:
            continue
        dtype = _first_dtype(opinfo)
        if dtype is None:
            continue
        try:
            samples = [s for s in opinfo.sample_inputs("cpu", dtype) if isinstance(s.input, torch.Tensor)][:3]
        except Exception:  # noqa: BLE001 - an OpInfo whose samples cannot be made is not swept
            continue
        if not samples:
            continue
        s = samples[0]
        try:
            expected = opinfo.op(s.input, *s.args, **s.kwargs)
            out = _to(expected, DEV)
            rec = _Record()
            with rec:
                opinfo.op(_to(s.input, DEV), *_to(s.args, DEV), **_to(s.kwargs, DEV), out=out)
            _sync()
        except Exception:  # noqa: BLE001
            continue
        hit = [n for n in rec.seen if n in targets]
        if hit:
            cases.append((opinfo, dtype, samples, hit[0]))
    return cases


class _Overload:
    """An out= overload not reached by any OpInfo, called from arguments made from its
    schema: an OpInfo-like object (op, name, samples) for the same cases."""

    variant_test_name = ""

    def __init__(self, qualname):
        ns, _, rest = qualname.partition("::")
        name, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, ns), name)
        self.name, self.out_op = qualname, getattr(packet, overload or "default")
        schema = self.out_op._schema
        self.out_names = [a.name for a in schema.arguments if a.is_out]
        self.inputs = [a for a in schema.arguments if not a.is_out]
        key = [(a.name, str(a.type)) for a in self.inputs]
        self.functional = None
        for o in packet.overloads():
            f = getattr(packet, o)._schema
            if not any(a.is_out for a in f.arguments) and not any(
                    a.alias_info is not None and a.alias_info.is_write for a in f.arguments) and \
                    [(a.name, str(a.type)) for a in f.arguments] == key:
                self.functional = getattr(packet, o)

    def op(self, *args, out=None, **kwargs):
        if out is None:
            return self.functional(*args, **kwargs)
        outs = (out,) if isinstance(out, torch.Tensor) else out
        return self.out_op(*args, **kwargs, **dict(zip(self.out_names, outs)))

    def sample(self):
        """One sample made from the schema (float32 [4, 5] tensors, dim 1, ...), or None."""
        gen = torch.Generator().manual_seed(0)
        values = []
        for a in self.inputs:
            t = str(a.type)
            if a.has_default_value() and a.name not in ("self",):
                values.append(a.default_value)
            elif t == "Tensor":
                values.append(torch.randn(4, 5, generator=gen))
            elif t == "List[Tensor]":
                values.append([torch.randn(4, 5, generator=gen), torch.randn(4, 5, generator=gen)])
            elif t == "List[Optional[Tensor]]":
                values.append([torch.tensor([0, 2, 3])])
            elif t in ("int", "SymInt"):
                values.append(1)
            elif t in ("List[int]", "List[SymInt]", "Optional[List[int]]"):
                values.append([1])
            elif t in ("number", "Optional[number]", "float"):
                values.append(0.5)
            elif t == "bool":
                values.append(False)
            elif t in ("ScalarType", "Optional[ScalarType]"):
                values.append(torch.float32)
            elif t.startswith("Optional["):
                values.append(None)
            else:
                return None
        if not values or not isinstance(values[0], torch.Tensor):
            return None  # no tensor input: the out= tensor alone picks the device
        from torch.testing._internal.opinfo.core import SampleInput
        return SampleInput(values[0], args=tuple(values[1:]))


def _registration_ops(covered):
    """_Overload cases for the out= overloads no OpInfo reached."""
    made = []
    for qualname in sorted(_out_overloads() - covered):
        o = _Overload(qualname)
        s = o.sample() if o.functional is not None else None
        if s is None:
            continue
        try:
            o.op(s.input, *s.args, **s.kwargs)  # the CPU accepts the made-up arguments
        except Exception:  # noqa: BLE001
            continue
        made.append((o, torch.float32, [s], qualname))
    return made


def _alt_dtypes(dtype):
    if dtype.is_floating_point:
        return [torch.float64 if dtype != torch.float64 else torch.float32, torch.int32]
    if dtype == torch.bool:
        return [torch.float32, torch.int64]
    return [torch.int32 if dtype != torch.int32 else torch.int64, torch.float32]


def _out_like(expected, device, change=None):
    """An out= argument like `expected`; change(i, t) may return another tensor for output i."""
    outs = _tensors(expected)
    made = []
    for i, t in enumerate(outs):
        o = change(i, t) if change else None
        made.append(o if o is not None else torch.empty(t.shape, dtype=t.dtype))
    made = [o.to(device) for o in made]
    return made[0] if isinstance(expected, torch.Tensor) else tuple(made)


def _cases_for(opinfo, samples):
    """(case name, make(device) -> callable) for one OpInfo's samples."""
    cases = []
    for k, s in enumerate(samples):
        expected = opinfo.op(s.input, *s.args, **s.kwargs)
        n_out = len(_tensors(expected))

        def call(device, out_fn, s=s):
            inp, args, kwargs = _to(s.input, device), _to(s.args, device), _to(s.kwargs, device)
            return lambda: opinfo.op(inp, *args, **kwargs, out=out_fn(device, inp))

        for i in range(n_out):
            for alt in _alt_dtypes(_tensors(expected)[i].dtype):
                def out_fn(device, inp, i=i, alt=alt, expected=expected):
                    return _out_like(expected, device, lambda j, t: torch.empty(t.shape, dtype=alt) if j == i else None)
                cases.append((f"s{k}-out{i}-dtype-{alt}", functools.partial(call, out_fn=out_fn)))
        cases.append((f"s{k}-shape-larger", functools.partial(call, out_fn=lambda device, inp, e=expected: _out_like(
            e, device, lambda j, t: torch.zeros(t.numel() + 3, dtype=t.dtype)))))
        cases.append((f"s{k}-shape-1", functools.partial(call, out_fn=lambda device, inp, e=expected: _out_like(
            e, device, lambda j, t: torch.zeros(1, 1, dtype=t.dtype) if t.numel() != 1 else torch.zeros(2, dtype=t.dtype)))))
        first = _tensors(expected)[0]
        if s.input.dtype == first.dtype and s.input.shape == first.shape and n_out == 1:
            cases.append((f"s{k}-overlap-input", functools.partial(call, out_fn=lambda device, inp: inp)))
            if s.input.numel() > 1:
                def partial_fn(device, inp, first=first):
                    # out shares all but one element with the input, shifted by one.
                    buf = torch.empty(inp.numel() + 1, dtype=inp.dtype, device=device)
                    buf[:-1].copy_(inp.reshape(-1))
                    return buf[1:].view(first.shape)
                cases.append((f"s{k}-overlap-partial", functools.partial(call, out_fn=partial_fn)))
    return cases


def _device_case(opinfo, s):
    """out= on the CPU for xxnpu inputs: a RuntimeError, and the CPU tensor untouched."""
    expected = opinfo.op(s.input, *s.args, **s.kwargs)
    out = tuple(torch.full(t.shape, 7, dtype=t.dtype) for t in _tensors(expected))
    before = [o.clone() for o in out]
    inp, args, kwargs = _to(s.input, DEV), _to(s.args, DEV), _to(s.kwargs, DEV)
    got, _ = _outcome(lambda: opinfo.op(inp, *args, **kwargs, out=out[0] if len(out) == 1 else out))
    if got[0] != "raise" or not issubclass(got[1], RuntimeError):
        return f"out= on the CPU: xxnpu {got[0]}"
    if not all(torch.equal(o, b) for o, b in zip(out, before)):
        return "out= on the CPU: raised, but the CPU tensor was written"
    return None


def _mixed_cases(opinfo, s):
    """A second tensor operand of another dtype (compared with the CPU), and on the CPU
    (xxnpu raises a RuntimeError or gives the CPU's values)."""
    cases = []
    positions = [i for i, a in enumerate(s.args) if isinstance(a, torch.Tensor) and a.dim() > 0]
    for p in positions[:1]:
        a = s.args[p]
        alt = _alt_dtypes(a.dtype)[0]

        def make(device, p=p, alt=alt):
            args = list(_to(s.args, device))
            args[p] = args[p].to(alt)
            inp, kwargs = _to(s.input, device), _to(s.kwargs, device)
            return lambda: opinfo.op(inp, *args, **kwargs)
        cases.append((f"arg{p}-dtype-{alt}", make))
    return cases, positions[:1]


def _mixed_device(opinfo, s, p):
    args = list(_to(s.args, DEV))
    args[p] = s.args[p].detach().clone()  # stays on the CPU
    inp, kwargs = _to(s.input, DEV), _to(s.kwargs, DEV)
    got, _ = _outcome(lambda: opinfo.op(inp, *args, **kwargs))
    if got[0] == "raise":
        return None if issubclass(got[1], RuntimeError) else f"arg{p} on the CPU: xxnpu raised {got[1].__name__}"
    ref, _ = _outcome(lambda: opinfo.op(s.input, *s.args, **s.kwargs))
    if ref[0] != "ok":
        return f"arg{p} on the CPU: xxnpu succeeded where the CPU raises"
    return _same_values(ref[1], got[1])


@functools.lru_cache(maxsize=None)
def _all_swept():
    from_opinfo = _sweep_ops()
    return from_opinfo + _registration_ops(frozenset(o for *_, o in from_opinfo))


# (overload, case prefix) where both sides succeed but the values may differ, and why.
KNOWN_VALUE_DIFFERENCES = {
    # amax(x, out=x) with x 0-dim: the CPU fills out with the reduction's identity before it
    # reads the aliased input and returns -inf; xxnpu returns max(x). Neither raises.
    ("aten::amax.out", "overlap-input"): "CPU returns the identity (-inf) for amax(x, out=x)",
    ("aten::amin.out", "overlap-input"): "CPU returns the identity (inf) for amin(x, out=x)",
}


def _known(overload, case, diff):
    return diff is not None and not diff.startswith(("cpu ", "out= ", "arg", "resize", "shape", "sweep")) and any(
        overload == o and case.endswith(c) for o, c in KNOWN_VALUE_DIFFERENCES)


def run_sweep():
    """Every case of every swept op: (op, case, difference or None)."""
    rows = []
    for opinfo, dtype, samples, overload in _all_swept():
        name = f"{opinfo.name}{'.' + opinfo.variant_test_name if opinfo.variant_test_name else ''}[{overload}]"
        for case, make in _cases_for(opinfo, samples):
            try:
                diff = _compare(make("cpu"), make(DEV))
                rows.append((name, case, None if _known(overload, case, diff) else diff))
            except Exception as e:  # noqa: BLE001 - a case the sweep could not build
                rows.append((name, case, f"sweep error {type(e).__name__}: {e}"))
        s = samples[0]
        rows.append((name, "out-on-cpu", _device_case(opinfo, s)))
        mixed, positions = _mixed_cases(opinfo, s)
        for case, make in mixed:
            rows.append((name, case, _compare(make("cpu"), make(DEV))))
        for p in positions:
            rows.append((name, f"arg{p}-on-cpu", _mixed_device(opinfo, s, p)))
    return rows


def test_sweep_covers_the_out_overloads():
    covered = {overload for _, _, _, overload in _all_swept()}
    targets = _out_overloads()
    print(f"out= overloads registered for xxnpu: {len(targets)}; swept: {len(covered)}")
    print("not reached:", sorted(targets - covered))
    assert len(covered) >= 0.9 * len(targets)


def test_sweep():
    rows = run_sweep()
    bad = [r for r in rows if r[2] is not None]
    ops = {r[0] for r in rows}
    print(f"swept {len(ops)} OpInfo variants, {len(rows)} cases, {len(bad)} differ from the CPU")
    assert not bad, "\n".join(f"{op} {case}: {diff}" for op, case, diff in bad)


if __name__ == "__main__":
    rows = run_sweep()
    bad = [r for r in rows if r[2] is not None]
    for op, case, diff in bad:
        print(f"{op} {case}: {diff}")
    print(f"swept {len({r[0] for r in rows})} OpInfo variants, {len(rows)} cases, {len(bad)} differ")
