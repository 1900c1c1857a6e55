"""nn.LSTM / nn.GRU / nn.RNN and their cells on xxnpu against the same modules on the CPU:
outputs, final hidden states and the gradients of inputs, hidden states and every
parameter; packed sequences; the fused cell ops (ops/rnn_ops.cc) on their own; bad input;
the kernels in the profiler. Nothing may fall back to the CPU."""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from testlib import no_fallback

import torch_xxnpu  # noqa: F401  (registers the backend)
from torch_xxnpu import ops as xops

DEV = "xxnpu"
LOW = [torch.float16, torch.bfloat16]
# float32/64 against the same dtype on the CPU; half/bfloat16 against a float32 CPU run
# of the same (rounded) weights and inputs.
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float16: dict(rtol=1e-2, atol=5e-3),
    torch.bfloat16: dict(rtol=5e-2, atol=4e-2),
}


@pytest.fixture(autouse=True)
def _no_fallback():
    """Every test here runs without a single CPU fallback."""
    with no_fallback():
        yield


def _seeded(fn, seed=0):
    torch.manual_seed(seed)
    return fn()


def _round(t, dtype):
    """`t` rounded to `dtype` and back: the values the low-precision run really sees."""
    return t.to(dtype).to(t.dtype)


def _mods(make, dtype):
    """(reference on the CPU, the same module on xxnpu in `dtype`)."""
    base = _seeded(make)
    ref_dtype = torch.float32 if dtype in LOW else dtype
    ref = copy.deepcopy(base).to(ref_dtype)
    if dtype in LOW:
        with torch.no_grad():
            for p in ref.parameters():
                p.copy_(_round(p, dtype))
    dev = copy.deepcopy(base).to(device=DEV, dtype=dtype)
    return ref, dev


def _leaf(t, dtype, device):
    return t.detach().to(device=device, dtype=dtype).requires_grad_(True)


def _flat(out):
    """Tensors of a module's output (output, h_n or (h_n, c_n); PackedSequence data)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, nn.utils.rnn.PackedSequence):
        return [out.data]
    return [t for o in out for t in _flat(o)]


def _compare(ref, dev, inputs, dtype, call=lambda m, *a: m(*a), tol=None):
    """Runs `call(module, *inputs)` on both sides, a weighted sum of every output as the
    loss, and compares outputs and the gradients of inputs and parameters."""
    tol = tol or TOL[dtype]
    ref_dtype = torch.float32 if dtype in LOW else dtype
    ref_in = [_leaf(_round(t, dtype) if dtype in LOW else t, ref_dtype, "cpu") for t in inputs]
    dev_in = [_leaf(t, dtype, DEV) for t in inputs]
    ref_out, dev_out = _flat(call(ref, *ref_in)), _flat(call(dev, *dev_in))
    assert len(ref_out) == len(dev_out)
    gen = torch.Generator().manual_seed(7)
    weights = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in ref_out]
    for r, d in zip(ref_out, dev_out):
        assert d.device.type == DEV and d.dtype == dtype and d.shape == r.shape, (d.device, d.dtype, d.shape, r.shape)
        torch.testing.assert_close(d.cpu().to(ref_dtype), r.detach(), **tol)
    sum(((o.to(torch.float64) * w).sum() for o, w in zip(ref_out, weights))).backward()
    sum(((o.to(torch.float64) * w.to(DEV)).sum() for o, w in zip(dev_out, weights))).backward()
    grad_tol = {k: v * 4 for k, v in tol.items()}
    for i, (r, d) in enumerate(zip(ref_in, dev_in)):
        assert d.grad is not None and d.grad.device.type == DEV, f"input {i} has no xxnpu gradient"
        torch.testing.assert_close(d.grad.cpu().to(ref_dtype), r.grad, msg=lambda m: f"input {i}: {m}", **grad_tol)
    for (name, r), (_, d) in zip(ref.named_parameters(), dev.named_parameters()):
        assert d.grad is not None and d.grad.device.type == DEV, f"{name} has no xxnpu gradient"
        torch.testing.assert_close(d.grad.cpu().to(ref_dtype), r.grad, msg=lambda m: f"{name}: {m}", **grad_tol)


def _hidden(layers, batch, size, unbatched=False):
    shape = (layers, size) if unbatched else (layers, batch, size)
    return torch.randn(shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def _seq(seq, batch, feat, batch_first=False, unbatched=False):
    shape = (seq, feat) if unbatched else ((batch, seq, feat) if batch_first else (seq, batch, feat))
    return torch.randn(shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)


# ------------------------------------------------------------------ full modules

LSTM_CONFIGS = {
    "plain": dict(),
    "two_layers": dict(num_layers=2),
    "bidirectional": dict(bidirectional=True),
    "two_layers_bidirectional_batch_first": dict(num_layers=2, bidirectional=True, batch_first=True),
    "proj_size": dict(proj_size=3),
    "proj_size_two_layers_bidirectional": dict(proj_size=3, num_layers=2, bidirectional=True),
    "no_bias": dict(bias=False, num_layers=2),
    "dropout_eval": dict(num_layers=2, dropout=0.5),  # eval mode: dropout is off
}


@pytest.mark.parametrize("config", sorted(LSTM_CONFIGS))
def test_lstm_matches_cpu(config):
    kw = LSTM_CONFIGS[config]
    ref, dev = _mods(lambda: nn.LSTM(5, 6, **kw), torch.float32)
    ref.eval(), dev.eval()
    d = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1) * d
    x = _seq(4, 3, 5, batch_first=kw.get("batch_first", False))
    h0, c0 = _hidden(layers, 3, kw.get("proj_size", 0) or 6), _hidden(layers, 3, 6)
    _compare(ref, dev, [x, h0, c0], torch.float32, call=lambda m, x, h, c: m(x, (h, c)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_lstm_dtypes(dtype):
    ref, dev = _mods(lambda: nn.LSTM(8, 16, num_layers=2, bidirectional=True), dtype)
    _compare(ref, dev, [_seq(5, 4, 8)], dtype)


def test_lstm_default_hidden_and_unbatched_input():
    ref, dev = _mods(lambda: nn.LSTM(5, 6, num_layers=2), torch.float32)
    _compare(ref, dev, [_seq(4, 3, 5)], torch.float32)  # zero h0/c0 made by the module
    _compare(ref, dev, [_seq(4, 0, 5, unbatched=True)], torch.float32)


GRU_CONFIGS = {
    "plain": dict(),
    "two_layers_bidirectional_batch_first": dict(num_layers=2, bidirectional=True, batch_first=True),
    "no_bias": dict(bias=False),
}


@pytest.mark.parametrize("config", sorted(GRU_CONFIGS))
def test_gru_matches_cpu(config):
    kw = GRU_CONFIGS[config]
    ref, dev = _mods(lambda: nn.GRU(5, 7, **kw), torch.float32)
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    x = _seq(4, 3, 5, batch_first=kw.get("batch_first", False))
    _compare(ref, dev, [x, _hidden(layers, 3, 7)], torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_gru_dtypes(dtype):
    ref, dev = _mods(lambda: nn.GRU(8, 16, num_layers=2), dtype)
    _compare(ref, dev, [_seq(5, 4, 8), _hidden(2, 4, 16)], dtype)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_rnn_matches_cpu(nonlinearity, bias):
    ref, dev = _mods(lambda: nn.RNN(5, 6, num_layers=2, bidirectional=True, nonlinearity=nonlinearity, bias=bias),
                     torch.float32)
    _compare(ref, dev, [_seq(4, 3, 5), _hidden(4, 3, 6)], torch.float32)


@pytest.mark.parametrize("dtype", LOW)
def test_rnn_low_precision(dtype):
    ref, dev = _mods(lambda: nn.RNN(8, 16), dtype)
    _compare(ref, dev, [_seq(5, 4, 8), _hidden(1, 4, 16)], dtype)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_dropout_between_layers_in_training_mode(cls):
    torch.manual_seed(0)
    mod = cls(5, 6, num_layers=3, dropout=0.5, bidirectional=True).to(DEV).train()
    x = torch.randn(4, 3, 5, device=DEV, requires_grad=True)
    out, hidden = mod(x)
    assert out.shape == (4, 3, 12) and out.device.type == DEV
    for h in (hidden if cls is nn.LSTM else (hidden,)):
        assert h.shape == (6, 3, 6)
    out.sum().backward()
    assert x.grad.shape == x.shape and all(p.grad is not None for p in mod.parameters())
    # Dropout really acts in training mode and not in eval mode.
    mod.eval()
    with torch.no_grad():
        a, b = mod(x)[0], mod(x)[0]
    assert torch.equal(a.cpu(), b.cpu())
    mod.train()
    with torch.no_grad():
        outs = [mod(x)[0].cpu() for _ in range(3)]
    assert not all(torch.equal(outs[0], o) for o in outs[1:])


# ------------------------------------------------------------------ cells

CELLS = {
    "lstm_cell": (lambda bias: nn.LSTMCell(5, 6, bias=bias), True),
    "gru_cell": (lambda bias: nn.GRUCell(5, 6, bias=bias), False),
    "rnn_tanh_cell": (lambda bias: nn.RNNCell(5, 6, bias=bias), False),
    "rnn_relu_cell": (lambda bias: nn.RNNCell(5, 6, bias=bias, nonlinearity="relu"), False),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cells_match_cpu(name, bias, dtype):
    make, is_lstm = CELLS[name]
    ref, dev = _mods(lambda: make(bias), dtype)
    x, h = _seq(1, 4, 5)[0], _hidden(1, 4, 6)[0]
    if is_lstm:
        c = _hidden(2, 4, 6)[1]
        _compare(ref, dev, [x, h, c], dtype, call=lambda m, x, h, c: m(x, (h, c)))
    else:
        _compare(ref, dev, [x, h], dtype)
    _compare(ref, dev, [x[0]], dtype)  # unbatched, zero hidden state


def test_lstm_cell_over_a_sequence():
    """A hand-written loop: each step's gradient flows through the previous steps' cells."""
    ref, dev = _mods(lambda: nn.LSTMCell(5, 6), torch.float32)

    def run(m, xs):
        h = c = None
        outs = []
        for x in xs.unbind(0):
            h, c = m(x) if h is None else m(x, (h, c))
            outs.append(h)
        return torch.stack(outs), c

    _compare(ref, dev, [_seq(6, 3, 5)], torch.float32, call=run)


# ------------------------------------------------------------------ packed sequences

@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences_match_cpu(cls, enforce_sorted):
    ref, dev = _mods(lambda: cls(5, 6, num_layers=2, bidirectional=True, batch_first=True), torch.float32)
    lengths = [6, 4, 4, 1] if enforce_sorted else [3, 6, 1, 4]

    def run(m, x):
        packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=True, enforce_sorted=enforce_sorted)
        out, hidden = m(packed)
        assert out.data.device == x.device
        padded, out_lengths = pad_packed_sequence(out, batch_first=True)
        assert out_lengths.tolist() == lengths
        return padded, hidden

    _compare(ref, dev, [_seq(6, 4, 5, batch_first=True)], torch.float32, call=run)


# ------------------------------------------------------------------ the fused ops themselves

def _lstm_cell_reference(ig, hg, cx, ib, hb):
    gates = ig + hg + (ib + hb if ib is not None else 0)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def _gru_cell_reference(ig, hg, hx, ib, hb):
    if ib is not None:
        ig, hg = ig + ib, hg + hb
    ir, ii, in_ = ig.chunk(3, 1)
    hr, hi, hn = hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_fused_cell_ops_against_composite_reference(cell, bias, dtype):
    """Forward (with the workspace autograd keeps) and backward of the fused ops against
    the same math in float64 on the CPU; batch and hidden large enough for several blocks."""
    gates, op, reference = (4, torch.ops.aten._thnn_fused_lstm_cell, _lstm_cell_reference) if cell == "lstm" else (
        3, torch.ops.aten._thnn_fused_gru_cell, _gru_cell_reference)
    batch, hidden = 37, 300
    gen = torch.Generator().manual_seed(11)
    shapes = [(batch, gates * hidden), (batch, gates * hidden), (batch, hidden)] + [(gates * hidden,)] * (2 * bias)
    args64 = [_round(torch.randn(s, generator=gen, dtype=torch.float64), dtype) for s in shapes]
    ref_args = [a.clone().requires_grad_(True) for a in args64]
    dev_args = [a.to(device=DEV, dtype=dtype).requires_grad_(True) for a in args64]
    bias_args = lambda a: (a[3], a[4]) if bias else (None, None)  # noqa: E731
    ref_out = reference(*ref_args[:3], *bias_args(ref_args))
    dev_out = op(*dev_args[:3], *bias_args(dev_args))
    tol = TOL[dtype]
    for r, d in zip(ref_out, dev_out):
        assert d.dtype == dtype and d.device.type == DEV
        torch.testing.assert_close(d.cpu().double(), r.detach(), **tol)
    # The workspace is not differentiable; for the LSTM, weight hy and cy.
    outs = 2 if cell == "lstm" else 1
    ws = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in ref_out[:outs]]
    sum((o * w).sum() for o, w in zip(ref_out[:outs], ws)).backward()
    sum((o.double() * w.to(DEV)).sum() for o, w in zip(dev_out[:outs], ws)).backward()
    for i, (r, d) in enumerate(zip(ref_args, dev_args)):
        torch.testing.assert_close(d.grad.cpu().double(), r.grad, msg=lambda m: f"argument {i}: {m}",
                                   **{k: v * 8 for k, v in tol.items()})


def test_fused_lstm_cell_backward_with_only_one_output_used():
    """grad_hy or grad_cy undefined: the backward op gets None for it."""
    gen = torch.Generator().manual_seed(2)
    args = [torch.randn(s, generator=gen) for s in [(3, 8), (3, 8), (3, 2)]]
    for which in (0, 1):
        ref = [a.clone().requires_grad_(True) for a in args]
        dev = [a.to(DEV).requires_grad_(True) for a in args]
        _lstm_cell_reference(*ref, None, None)[which].sum().backward()
        torch.ops.aten._thnn_fused_lstm_cell(*dev)[which].sum().backward()
        for r, d in zip(ref, dev):
            torch.testing.assert_close(d.grad.cpu(), r.grad, rtol=1e-5, atol=1e-6)


def test_double_backward_through_the_cells():
    """create_graph=True takes ATen's differentiable (composite) backward: still native."""
    for make in (lambda: nn.LSTMCell(4, 5), lambda: nn.GRUCell(4, 5)):
        ref, dev = _mods(make, torch.float64)
        results = []
        for m, device in ((ref, "cpu"), (dev, DEV)):
            x = _seq(1, 3, 4)[0].to(device).requires_grad_(True)
            out = _flat(m(x))[0]
            (gx,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
            (ggx,) = torch.autograd.grad(gx.pow(2).sum(), x)
            results.append((gx.detach().cpu(), ggx.cpu()))
        for r, d in zip(*results):
            torch.testing.assert_close(d, r, rtol=1e-10, atol=1e-10)


def test_fused_ops_are_native():
    native = set(xops.native_ops())
    for op in ("_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl", "_thnn_fused_gru_cell",
               "_thnn_fused_gru_cell_backward"):
        assert any(n == op or n.startswith(op + ".") or n == "aten::" + op for n in native), (op, sorted(native))


def test_empty_batch():
    ig = torch.zeros(0, 8, device=DEV, requires_grad=True)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(ig, torch.zeros(0, 8, device=DEV), torch.zeros(0, 2, device=DEV),
                                             torch.zeros(8, device=DEV), torch.zeros(8, device=DEV))
    assert hy.shape == cy.shape == (0, 2) and ws.shape == (0, 8)
    b = torch.randn(6, device=DEV, requires_grad=True)
    hy, _ = torch.ops.aten._thnn_fused_gru_cell(torch.zeros(0, 6, device=DEV), torch.zeros(0, 6, device=DEV),
                                       torch.zeros(0, 2, device=DEV), b, torch.zeros(6, device=DEV))
    hy.sum().backward()
    assert torch.equal(b.grad.cpu(), torch.zeros(6))


# ------------------------------------------------------------------ bad input

def _raises_like_cpu(fn_cpu, fn_dev):
    with pytest.raises(Exception) as cpu_err:
        fn_cpu()
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn_dev()
    return str(cpu_err.value), str(dev_err.value)


def test_wrong_hidden_size_raises_as_on_cpu():
    cpu = nn.LSTM(5, 6, num_layers=2)
    dev = copy.deepcopy(cpu).to(DEV)
    x = torch.randn(4, 3, 5)
    bad = (torch.zeros(2, 3, 7), torch.zeros(2, 3, 6))
    cpu_msg, dev_msg = _raises_like_cpu(lambda: cpu(x, bad), lambda: dev(x.to(DEV), tuple(t.to(DEV) for t in bad)))
    assert cpu_msg == dev_msg and "Expected hidden[0] size (2, 3, 6), got [2, 3, 7]" in dev_msg
    gru_cpu = nn.GRU(5, 6)
    gru = copy.deepcopy(gru_cpu).to(DEV)
    cpu_msg, dev_msg = _raises_like_cpu(lambda: gru_cpu(x, torch.zeros(1, 2, 6)),
                                        lambda: gru(x.to(DEV), torch.zeros(1, 2, 6, device=DEV)))
    assert cpu_msg == dev_msg
    cell_cpu = nn.GRUCell(5, 6)
    cell = copy.deepcopy(cell_cpu).to(DEV)
    cpu_msg, dev_msg = _raises_like_cpu(lambda: cell_cpu(x[0], torch.zeros(3, 4)),
                                        lambda: cell(x[0].to(DEV), torch.zeros(3, 4, device=DEV)))
    assert cpu_msg == dev_msg and "hidden" in dev_msg


def test_mismatched_devices_and_dtypes_raise_as_on_cpu():
    cpu = nn.LSTM(5, 6)
    dev = copy.deepcopy(cpu).to(DEV)
    x = torch.randn(4, 3, 5)
    h = (torch.zeros(1, 3, 6), torch.zeros(1, 3, 6))
    # Hidden state on the other device: RuntimeError on both sides, naming both devices.
    cpu_msg, dev_msg = _raises_like_cpu(lambda: cpu(x, tuple(t.to(DEV) for t in h)),
                                        lambda: dev(x.to(DEV), h))
    assert "xxnpu" in dev_msg and "cpu" in dev_msg, dev_msg
    # Input on the CPU, module on xxnpu (and the reverse).
    _raises_like_cpu(lambda: cpu(x.to(DEV)), lambda: dev(x))
    # Input dtype other than the weights': ValueError on both.
    cpu_msg, dev_msg = _raises_like_cpu(lambda: cpu(x.double()), lambda: dev(x.double().to(DEV)))
    assert cpu_msg == dev_msg
    cell_cpu = nn.LSTMCell(5, 6)
    cell = copy.deepcopy(cell_cpu).to(DEV)
    _raises_like_cpu(lambda: cell_cpu(x[0], (torch.zeros(3, 6).double(), torch.zeros(3, 6))),
                     lambda: cell(x[0].to(DEV), (torch.zeros(3, 6, device=DEV).double(), torch.zeros(3, 6, device=DEV))))


def test_fused_ops_reject_bad_arguments_with_clear_messages():
    z = lambda *s, **kw: torch.zeros(*s, device=DEV, **kw)  # noqa: E731
    cases = [
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 10), z(3, 10), z(3, 2)),
         r"expected input_gates of shape \[batch, 4 \* hidden_size\], got \[3, 10\]"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 8), z(3, 4), z(3, 2)),
         r"expected hidden_gates of shape \[3, 8\] \(the shape of input_gates\), got \[3, 4\]"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 8), z(3, 8), z(3, 3)),
         r"expected cx of shape \[3, 2\] \[batch, hidden_size\], got \[3, 3\]"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 8), z(3, 8), z(3, 2), z(7), z(8)),
         r"expected input_bias of shape \[8\] \[4 \* hidden_size\], got \[7\]"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 8), z(3, 8), z(3, 2, dtype=torch.float64)),
         r"expected cx to have the dtype of the gates \(Float\), got Double"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 8), z(3, 8), torch.zeros(3, 2)),
         r"Expected all tensors to be on the same device, but found at least two devices, xxnpu:0 and cpu"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell(z(3, 8, dtype=torch.int32), z(3, 8, dtype=torch.int32),
                                             z(3, 2, dtype=torch.int32)),
         r"expected a float32, float64, float16 or bfloat16 input_gates, got Int"),
        (lambda: torch.ops.aten._thnn_fused_gru_cell(z(3, 8), z(3, 8), z(3, 2)),
         r"expected input_gates of shape \[batch, 3 \* hidden_size\], got \[3, 8\]"),
        (lambda: torch.ops.aten._thnn_fused_gru_cell(z(3, 6), z(3, 6), z(2, 2)),
         r"expected hx of shape \[3, 2\] \[batch, hidden_size\], got \[2, 2\]"),
        (lambda: torch.ops.aten._thnn_fused_gru_cell(z(3, 6), z(3, 6), z(3, 2), z(6), None),
         r"expected both biases or neither, got input_bias only"),
        (lambda: torch.ops.aten._thnn_fused_gru_cell_backward(z(3, 2), z(3, 9), True),
         r"expected workspace of shape \[batch, 5 \* hidden_size\], got \[3, 9\]"),
        (lambda: torch.ops.aten._thnn_fused_gru_cell_backward(z(3, 3), z(3, 10), True),
         r"expected grad_hy of shape \[3, 2\] \[batch, hidden_size\], got \[3, 3\]"),
        (lambda: torch.ops.aten._thnn_fused_lstm_cell_backward_impl(z(3, 2), None, z(3, 2), z(3, 2), z(3, 4), True),
         r"expected grad_hy of shape \[3, 1\] \[batch, hidden_size\], got \[3, 2\]"),
    ]
    for fn, pattern in cases:
        with pytest.raises(RuntimeError, match=pattern):
            fn()


# ------------------------------------------------------------------ profiler

def test_profile_of_an_lstm_step_shows_the_cell_kernels():
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    lstm = nn.LSTM(64, 128, num_layers=2).to(DEV)
    gru = nn.GRU(64, 128).to(DEV)
    x = torch.randn(3, 16, 64, device=DEV, requires_grad=True)
    (lstm(x)[0].sum() + gru(x)[0].sum()).backward()  # warm-up
    torch.xxnpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (lstm(x)[0].sum() + gru(x)[0].sum()).backward()
        torch.xxnpu.synchronize()
    avg = {e.key: e for e in prof.key_averages()}
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=25)
    # One kernel per cell step: 3 steps x 2 layers of LSTM, 3 steps of GRU, same backward.
    for kernel, count in (("xxnpu::lstm_cell", 6), ("xxnpu::lstm_cell_backward", 6), ("xxnpu::gru_cell", 3),
                          ("xxnpu::gru_cell_backward", 3)):
        assert kernel in avg, table
        assert avg[kernel].count == count, (kernel, avg[kernel].count, table)
        assert avg[kernel].self_device_time_total > 0, (kernel, table)
    # The device time belongs to the ops that launched it.
    for op in ("aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl",
               "aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward"):
        assert avg[op].self_device_time_total > 0, (op, table)
    assert avg["aten::lstm"].device_time_total >= avg["aten::_thnn_fused_lstm_cell"].device_time_total > 0


def test_autocast_runs_the_cells_in_bfloat16_as_on_cuda():
    """CUDA's autocast lists put lstm/gru cells and the fused cell ops in the low dtype."""
    torch.manual_seed(0)
    lstm, cell = nn.LSTM(8, 16, num_layers=2).to(DEV), nn.GRUCell(8, 16).to(DEV)
    x = torch.randn(5, 3, 8, device=DEV, requires_grad=True)
    full = lstm(x)[0].detach().cpu()
    with torch.autocast(DEV, dtype=torch.bfloat16):
        out, (h, c) = lstm(x)
        y = cell(x[0])
    assert out.dtype == h.dtype == c.dtype == y.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), full, **TOL[torch.bfloat16])
    (out.float().sum() + y.float().sum()).backward()
    assert x.grad.dtype == torch.float32 and lstm.weight_ih_l0.grad.dtype == torch.float32
