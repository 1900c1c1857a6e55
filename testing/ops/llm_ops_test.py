"""torch.ops.xxnpu LLM ops (ops/llm_*_ops.cc): the xxnpu kernels against the CPU reference
kernels across dtypes, shapes and strides; against independent Python formulas (so a bug
shared by both kernels shows); opcheck; gradients; argument errors; and the faults the
device kernels raise for bad index values."""
import subprocess
import sys

import pytest
import torch
import torch_xxnpu  # noqa: F401
from torch.library import opcheck

xx = torch.ops.xxnpu
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# torch 2.13's autograd-registration check only knows CPU/CUDA/XPU devices.
XXNPU_OPCHECK = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def tol(dtype):
    return {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=1e-2, atol=1e-2),
            torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}[dtype]


def rand(*shape, dtype=torch.float32, gen=None):
    return torch.randn(*shape, generator=gen).to(dtype)


def xla(t):
    """The same tensor on xxnpu, keeping its strides (a non-contiguous view stays one)."""
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="xxnpu")
    out.copy_(t.detach())
    return out


def assert_close(got, expected, dtype):
    assert got.device.type == "xxnpu"
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, **tol(dtype))


def noncontig(t):
    """t's values in a non-contiguous tensor (every other column of a wider tensor)."""
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    view = wide[..., ::2]
    view.copy_(t)
    assert t.numel() == 0 or not view.is_contiguous()
    return view


# ------------------------------------------------------------------ rms_norm

def rms_norm_formula(x, w, eps):
    xf = x.float()
    return (xf / torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 64), (2, 3, 130), (1, 4096), (0, 16), (5,)])
def test_rms_norm_matches_cpu(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x, w = rand(*shape, dtype=dtype, gen=g), rand(shape[-1], dtype=dtype, gen=g)
    expected = xx.rms_norm(x, w, 1e-6)
    torch.testing.assert_close(expected, rms_norm_formula(x, w, 1e-6), **tol(dtype))
    assert_close(xx.rms_norm(xla(x), xla(w), 1e-6), expected, dtype)


def test_rms_norm_non_contiguous_and_transposed_inputs():
    g = torch.Generator().manual_seed(1)
    x = rand(6, 48, gen=g)
    w = rand(48, gen=g)
    for xi in [noncontig(x), x.t().contiguous().t()]:
        assert not xi.is_contiguous()
        assert_close(xx.rms_norm(xla(xi), xla(noncontig(w)), 1e-5), rms_norm_formula(x, w, 1e-5), torch.float32)


def test_fused_add_rms_norm_updates_both_in_place():
    for dtype in DTYPES:
        g = torch.Generator().manual_seed(2)
        x, r, w = rand(5, 3, 96, dtype=dtype, gen=g), rand(5, 3, 96, dtype=dtype, gen=g), rand(96, dtype=dtype, gen=g)
        cx, cr = x.clone(), r.clone()
        xx.fused_add_rms_norm(cx, cr, w, 1e-6)
        torch.testing.assert_close(cr, x + r)
        torch.testing.assert_close(cx, rms_norm_formula(x + r, w, 1e-6), **tol(dtype))
        dx, dr = xla(x), xla(r)
        xx.fused_add_rms_norm(dx, dr, xla(w), 1e-6)
        assert_close(dr, cr, dtype)
        assert_close(dx, cx, dtype)


def test_fused_add_rms_norm_strided_in_place_and_unflattenable_error():
    x, r, w = torch.randn(4, 32), torch.randn(4, 32), torch.randn(32)
    cx, cr = x.clone(), r.clone()
    xx.fused_add_rms_norm(cx, cr, w, 1e-6)
    # Column-strided in-place operands are written through their strides.
    bx = xla(torch.zeros(4, 64))
    br = xla(torch.zeros(4, 64))
    bx[:, ::2] = xla(x)
    br[:, 1::2] = xla(r)
    xx.fused_add_rms_norm(bx[:, ::2], br[:, 1::2], xla(w), 1e-6)
    assert_close(bx[:, ::2], cx, torch.float32)
    assert_close(br[:, 1::2], cr, torch.float32)
    assert torch.equal(bx[:, 1::2].cpu(), torch.zeros(4, 32))  # untouched
    # Leading dims that do not flatten into rows cannot be updated in place.
    t = xla(torch.randn(3, 4, 8)).transpose(0, 1)
    with pytest.raises(RuntimeError, match="must flatten into rows without a copy"):
        xx.fused_add_rms_norm(t, xla(torch.randn(4, 3, 8)), xla(torch.randn(8)), 1e-6)


# ------------------------------------------------------------------ silu_and_mul

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 64), (2, 5, 22), (1, 2 * 11008), (0, 8)])
def test_silu_and_mul_matches_cpu(shape, dtype):
    x = rand(*shape, dtype=dtype, gen=torch.Generator().manual_seed(3))
    d = shape[-1] // 2
    expected = xx.silu_and_mul(x)
    formula = (torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()).to(dtype)
    torch.testing.assert_close(expected, formula, **tol(dtype))
    assert_close(xx.silu_and_mul(xla(x)), expected, dtype)
    assert_close(xx.silu_and_mul(xla(noncontig(x))), expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul_row_strided_and_extreme_values_match_cpu(dtype):
    # Rows padded apart (a slice of wider rows: dense halves, so float32/bfloat16 take the
    # SIMD row) with tails of every length up to a vector and a half; large magnitudes where
    # exp overflows (silu(-100) is -0, silu(100) is 100) and NaN.
    g = torch.Generator().manual_seed(5)
    for d in (1, 7, 8, 15, 17, 24, 33):
        wide = rand(6, 2 * d + 5, dtype=dtype, gen=g) * 4
        wide[0, 0], wide[1, 1 % d], wide[2, 0] = -100.0, 100.0, float("nan")
        x = wide[:, : 2 * d]
        assert x.stride(0) == 2 * d + 5 and x.stride(1) == 1
        expected = xx.silu_and_mul(x)
        formula = (torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float()).to(dtype)
        torch.testing.assert_close(expected, formula, equal_nan=True, **tol(dtype))
        got = xx.silu_and_mul(xla(wide)[:, : 2 * d])
        assert got.device.type == "xxnpu" and got.shape == expected.shape and got.is_contiguous()
        torch.testing.assert_close(got.cpu(), expected, equal_nan=True, **tol(dtype))


# ------------------------------------------------------------------ rotary_embedding

def rope_cache(max_pos, rot_dim, dtype=torch.float32):
    inv = 1.0 / (10000 ** (torch.arange(0, rot_dim, 2).double() / rot_dim))
    ang = torch.arange(max_pos).double()[:, None] * inv
    return torch.cat([ang.cos(), ang.sin()], -1).to(dtype)


def rope_formula(positions, x, head_size, cache, is_neox):
    """Per-element loop form (independent of both kernels)."""
    T = positions.numel()
    xf = x.reshape(T, -1, head_size).double()
    out = xf.clone()
    rot = cache.shape[1]
    half = rot // 2
    for t in range(T):
        c = cache[positions.reshape(-1)[t]].double()
        for i in range(half):
            i1, i2 = (i, i + half) if is_neox else (2 * i, 2 * i + 1)
            x1, x2 = xf[t, :, i1], xf[t, :, i2]
            out[t, :, i1] = x1 * c[i] - x2 * c[half + i]
            out[t, :, i2] = x2 * c[i] + x1 * c[half + i]
    return out.reshape(x.shape).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("layout", ["flat", "3d", "batched", "partial_rotary"])
def test_rotary_embedding_matches_cpu(layout, is_neox, dtype):
    g = torch.Generator().manual_seed(4)
    D, H, KVH = 16, 4, 2
    rot = 8 if layout == "partial_rotary" else D
    cache = rope_cache(64, rot)
    if layout == "batched":
        positions = torch.randint(0, 64, (2, 3), generator=g)
        q, k = rand(2, 3, H * D, dtype=dtype, gen=g), rand(2, 3, KVH * D, dtype=dtype, gen=g)
    elif layout == "3d":
        positions = torch.randint(0, 64, (5,), generator=g).int()
        q, k = rand(5, H, D, dtype=dtype, gen=g), rand(5, KVH, D, dtype=dtype, gen=g)
    else:
        positions = torch.randint(0, 64, (5,), generator=g)
        q, k = rand(5, H * D, dtype=dtype, gen=g), rand(5, KVH * D, dtype=dtype, gen=g)
    eq, ek = xx.rotary_embedding(positions, q, k, D, cache, is_neox)
    torch.testing.assert_close(eq, rope_formula(positions, q, D, cache, is_neox), **tol(dtype))
    torch.testing.assert_close(ek, rope_formula(positions, k, D, cache, is_neox), **tol(dtype))
    gq, gk = xx.rotary_embedding(xla(positions), xla(q), xla(k), D, xla(cache), is_neox)
    assert_close(gq, eq, dtype)
    assert_close(gk, ek, dtype)
    # Cache in the query's own dtype too.
    c2 = cache.to(dtype)
    gq2, _ = xx.rotary_embedding(xla(positions), xla(q), xla(k), D, xla(c2), is_neox)
    assert_close(gq2, xx.rotary_embedding(positions, q, k, D, c2, is_neox)[0], dtype)
    # In place: the same values written into query and key.
    iq, ik = xla(q), xla(k)
    xx.rotary_embedding_(xla(positions), iq, ik, D, xla(cache), is_neox)
    assert_close(iq, eq, dtype)
    assert_close(ik, ek, dtype)
    cq, ck = q.clone(), k.clone()
    xx.rotary_embedding_(positions, cq, ck, D, cache, is_neox)
    torch.testing.assert_close(cq, eq)


def test_rotary_embedding_on_views_of_a_fused_qkv():
    """q and k as column slices of one qkv projection (strided rows), as a model has them."""
    g = torch.Generator().manual_seed(5)
    D, T = 8, 6
    qkv = rand(T, (4 + 2 + 2) * D, gen=g)
    positions = torch.arange(T)
    cache = rope_cache(16, D)
    q, k, _ = qkv.split([4 * D, 2 * D, 2 * D], -1)
    eq, ek = xx.rotary_embedding(positions, q, k, D, cache, True)
    dq, dk, dv = xla(qkv).split([4 * D, 2 * D, 2 * D], -1)
    gq, gk = xx.rotary_embedding(xla(positions), dq, dk, D, xla(cache), True)
    assert_close(gq, eq, torch.float32)
    assert_close(gk, ek, torch.float32)
    # In place on the views: v's columns stay untouched.
    xx.rotary_embedding_(xla(positions), dq, dk, D, xla(cache), True)
    assert_close(dq, eq, torch.float32)
    assert torch.equal(dv.cpu(), qkv[:, 6 * D:])


# ------------------------------------------------------------------ paged KV cache

def make_cache(num_blocks, block_size, kvh, D, dtype):
    shape = (num_blocks, block_size, kvh, D)
    return torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_and_cache_writes_the_slots(dtype):
    g = torch.Generator().manual_seed(6)
    NB, BS, KVH, D, T = 6, 4, 2, 8, 7
    key, value = rand(T, KVH, D, dtype=dtype, gen=g), rand(T, KVH, D, dtype=dtype, gen=g)
    slots = torch.tensor([5, 0, 23, -1, 9, 14, 2])  # -1: padding, skipped
    kc, vc = make_cache(NB, BS, KVH, D, dtype)
    xx.reshape_and_cache(key, value, kc, vc, slots)
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            assert torch.equal(kc[s // BS, s % BS], key[t]) and torch.equal(vc[s // BS, s % BS], value[t])
    assert kc.flatten(0, 1)[[1, 3, 4]].abs().sum() == 0  # slots nobody wrote
    for slot_dtype in [torch.int64, torch.int32]:
        dkc, dvc = xla(make_cache(NB, BS, KVH, D, dtype)[0]), xla(make_cache(NB, BS, KVH, D, dtype)[1])
        xx.reshape_and_cache(xla(key), xla(value), dkc, dvc, xla(slots.to(slot_dtype)))
        assert torch.equal(dkc.cpu(), kc) and torch.equal(dvc.cpu(), vc)
    # Strided key/value (slices of a fused projection) and a cache permuted in memory.
    kv = rand(T, 2, KVH, D, dtype=dtype, gen=g)
    base = xla(torch.zeros(NB, KVH, BS, D, dtype=dtype))
    dkc = base.transpose(1, 2)  # [NB, BS, KVH, D] view with non-standard strides
    dvc = xla(torch.zeros(NB, BS, KVH, D, dtype=dtype))
    dkv = xla(kv)
    xx.reshape_and_cache(dkv[:, 0], dkv[:, 1], dkc, dvc, xla(slots))
    ckc, cvc = make_cache(NB, BS, KVH, D, dtype)
    xx.reshape_and_cache(kv[:, 0], kv[:, 1], ckc, cvc, slots)
    assert torch.equal(dkc.cpu(), ckc) and torch.equal(dvc.cpu(), cvc)


def attention_formula(q, k, v, scale):
    """q [H, D], k/v [L, KVH, D] -> [H, D] in float64."""
    H, KVH = q.shape[0], k.shape[1]
    k = k.double().repeat_interleave(H // KVH, 1)
    v = v.double().repeat_interleave(H // KVH, 1)
    p = torch.softmax(torch.einsum("hd,lhd->hl", q.double(), k) * scale, -1)
    return torch.einsum("hl,lhd->hd", p, v)


def paged_setup(dtype, seq_lens, H=8, KVH=2, D=16, BS=4, seed=7):
    g = torch.Generator().manual_seed(seed)
    S = len(seq_lens)
    max_blocks = max((n + BS - 1) // BS for n in seq_lens) + 1
    NB = S * max_blocks + 2
    order = torch.randperm(NB, generator=g)
    tables = order[: S * max_blocks].reshape(S, max_blocks).int()
    kc, vc = rand(NB, BS, KVH, D, dtype=dtype, gen=g), rand(NB, BS, KVH, D, dtype=dtype, gen=g)
    q = rand(S, H, D, dtype=dtype, gen=g)
    return q, kc, vc, tables, torch.tensor(seq_lens, dtype=torch.int32), D ** -0.5


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", [(8, 2), (4, 4), (6, 1)])
def test_paged_attention_matches_cpu_and_formula(heads, dtype):
    H, KVH = heads
    q, kc, vc, tables, lens, scale = paged_setup(dtype, [5, 1, 12, 0, 8], H=H, KVH=KVH)
    expected = xx.paged_attention(q, kc, vc, tables, lens, scale)
    BS = kc.shape[1]
    for s, n in enumerate(lens.tolist()):
        if n == 0:
            assert torch.equal(expected[s], torch.zeros_like(expected[s]))
            continue
        blocks = tables[s, : (n + BS - 1) // BS].long()
        k = kc[blocks].flatten(0, 1)[:n]
        v = vc[blocks].flatten(0, 1)[:n]
        torch.testing.assert_close(expected[s].double(), attention_formula(q[s], k, v, scale), **tol(dtype))
    got = xx.paged_attention(xla(q), xla(kc), xla(vc), xla(tables), xla(lens), scale)
    assert_close(got, expected, dtype)
    # int64 tables/lengths and a strided query give the same.
    got64 = xx.paged_attention(xla(noncontig(q)), xla(kc), xla(vc), xla(tables.long()), xla(lens.long()), scale)
    assert_close(got64, expected, dtype)


def test_paged_attention_long_sequence_is_numerically_stable():
    q, kc, vc, tables, lens, _ = paged_setup(torch.float32, [300], BS=16)
    # Large logits: a softmax without the max subtraction overflows.
    expected = xx.paged_attention(q, kc, vc, tables, lens, 20.0)
    got = xx.paged_attention(xla(q), xla(kc), xla(vc), xla(tables), xla(lens), 20.0)
    assert torch.isfinite(expected).all()
    assert_close(got, expected, torch.float32)


def test_prefill_through_paged_attention_is_causal_attention():
    """Cache a prompt with reshape_and_cache, then one query per prompt token with seq_lens
    1..n over the same block table: the same as causal scaled_dot_product_attention."""
    g = torch.Generator().manual_seed(8)
    n, H, KVH, D, BS = 10, 4, 2, 8, 4
    q, k, v = rand(n, H, D, gen=g), rand(n, KVH, D, gen=g), rand(n, KVH, D, gen=g)
    table = torch.tensor([[3, 0, 5]], dtype=torch.int32)
    pos = torch.arange(n)
    slots = (table[0, pos // BS].long() * BS + pos % BS)
    kc, vc = xla(torch.zeros(6, BS, KVH, D)), xla(torch.zeros(6, BS, KVH, D))
    xx.reshape_and_cache(xla(k), xla(v), kc, vc, xla(slots))
    out = xx.paged_attention(xla(q), kc, vc, xla(table.expand(n, 3).contiguous()), xla((pos + 1).int()), D ** -0.5)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.repeat_interleave(2, 1).transpose(0, 1), v.repeat_interleave(2, 1).transpose(0, 1),
        is_causal=True).transpose(0, 1)
    assert_close(out, ref, torch.float32)


# ------------------------------------------------------------------ opcheck

def opcheck_cases():
    g = torch.Generator().manual_seed(9)
    x, w = torch.randn(3, 16, generator=g), torch.randn(16, generator=g)
    pos = torch.tensor([0, 3, 7])
    q, k = torch.randn(3, 4 * 8, generator=g), torch.randn(3, 2 * 8, generator=g)
    cache = rope_cache(8, 8)
    kv = torch.randn(3, 2, 8, generator=g)
    kc, vc = torch.zeros(4, 2, 2, 8), torch.zeros(4, 2, 2, 8)
    pq, pkc, pvc, tables, lens, scale = paged_setup(torch.float32, [3, 6, 1])
    return [
        ("rms_norm", (x, w, 1e-6)),
        ("fused_add_rms_norm", (x.clone(), x.clone() + 1, w, 1e-6)),
        ("silu_and_mul", (x,)),
        ("rotary_embedding", (pos, q, k, 8, cache, True)),
        ("rotary_embedding_", (pos, q.clone(), k.clone(), 8, cache, False)),
        ("reshape_and_cache", (kv, kv + 1, kc, vc, torch.tensor([1, 6, 3]))),
        ("paged_attention", (pq, pkc, pvc, tables, lens, scale)),
    ]


def _to(args, device, requires_grad=False):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = xla(a) if device == "xxnpu" else a.clone()
            if requires_grad and a.is_floating_point():
                a.requires_grad_()
        out.append(a)
    return tuple(out)


@pytest.mark.parametrize("name", [c[0] for c in opcheck_cases()])
def test_opcheck(name):
    args = dict(opcheck_cases())[name]
    op = getattr(xx, name).default
    differentiable = name in ("rms_norm", "silu_and_mul", "rotary_embedding")
    opcheck(op, _to(args, "cpu", requires_grad=differentiable))
    opcheck(op, _to(args, "xxnpu"), test_utils=XXNPU_OPCHECK)


def test_native_ops_lists_the_llm_ops():
    native = set(torch_xxnpu.ops.native_ops())
    for name in ["rms_norm", "fused_add_rms_norm", "rotary_embedding", "rotary_embedding_", "silu_and_mul",
                 "reshape_and_cache", "paged_attention"]:
        assert f"xxnpu::{name}" in native, name


# ------------------------------------------------------------------ gradients

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_gradients_match_cpu_and_formula(dtype):
    g = torch.Generator().manual_seed(10)
    x, w, gy = rand(4, 3, 24, dtype=dtype, gen=g), rand(24, dtype=dtype, gen=g), rand(4, 3, 24, dtype=dtype, gen=g)
    cx, cw = x.clone().requires_grad_(), w.clone().requires_grad_()
    xx.rms_norm(cx, cw, 1e-5).backward(gy)
    # The formula's gradients through autograd are the reference.
    fx, fw = x.float().clone().requires_grad_(), w.float().clone().requires_grad_()
    rms_norm_formula(fx, fw, 1e-5).backward(gy.float())
    torch.testing.assert_close(cx.grad.float(), fx.grad, **tol(dtype))
    torch.testing.assert_close(cw.grad.float(), fw.grad, **tol(dtype))
    dx, dw = xla(x).requires_grad_(), xla(w).requires_grad_()
    xx.rms_norm(dx, dw, 1e-5).backward(xla(gy))
    assert_close(dx.grad, cx.grad, dtype)
    assert_close(dw.grad, cw.grad, dtype)


def test_silu_and_mul_and_rotary_gradients():
    g = torch.Generator().manual_seed(11)
    x = rand(5, 20, gen=g)
    gy = rand(5, 10, gen=g)
    cx = x.clone().requires_grad_()
    xx.silu_and_mul(cx).backward(gy)
    fx = x.clone().requires_grad_()
    (torch.nn.functional.silu(fx[:, :10]) * fx[:, 10:]).backward(gy)
    torch.testing.assert_close(cx.grad, fx.grad)
    dx = xla(x).requires_grad_()
    xx.silu_and_mul(dx).backward(xla(gy))
    assert_close(dx.grad, cx.grad, torch.float32)

    D = 8
    pos = torch.tensor([1, 5, 2])
    cache = rope_cache(8, 6)  # partial rotary: dims 6, 7 pass through
    q, k = rand(3, 2 * D, gen=g), rand(3, D, gen=g)
    gq, gk = rand(3, 2 * D, gen=g), rand(3, D, gen=g)
    for is_neox in [True, False]:
        cq, ck = q.clone().requires_grad_(), k.clone().requires_grad_()
        oq, ok = xx.rotary_embedding(pos, cq, ck, D, cache, is_neox)
        ((oq * gq).sum() + (ok * gk).sum()).backward()
        fq, fk = q.double().requires_grad_(), k.double().requires_grad_()
        ((rope_formula(pos, fq, D, cache, is_neox) * gq).sum() + (rope_formula(pos, fk, D, cache, is_neox) * gk).sum()
         ).backward()
        torch.testing.assert_close(cq.grad, fq.grad.float())
        torch.testing.assert_close(ck.grad, fk.grad.float())
        dq, dk = xla(q).requires_grad_(), xla(k).requires_grad_()
        oq, ok = xx.rotary_embedding(xla(pos), dq, dk, D, xla(cache), is_neox)
        ((oq * xla(gq)).sum() + (ok * xla(gk)).sum()).backward()
        assert_close(dq.grad, cq.grad, torch.float32)
        assert_close(dk.grad, ck.grad, torch.float32)


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("device", ["cpu", "xxnpu"])
def test_argument_errors_are_clear(device):
    def on(t):
        return xla(t) if device == "xxnpu" else t

    x, w = on(torch.randn(3, 16)), on(torch.randn(16))
    with pytest.raises(RuntimeError, match=r"xxnpu::rms_norm: weight has 8 elements but x's last dimension"):
        xx.rms_norm(x, on(torch.randn(8)), 1e-6)
    with pytest.raises(RuntimeError, match=r"x must be float32, float16 or bfloat16, got Double"):
        xx.rms_norm(on(torch.randn(3, 16).double()), w, 1e-6)
    with pytest.raises(RuntimeError, match=r"weight must have the dtype of x \(Float\), got Half"):
        xx.rms_norm(x, w.half(), 1e-6)
    with pytest.raises(RuntimeError, match=r"residual must have x's shape"):
        xx.fused_add_rms_norm(x, on(torch.randn(3, 15)), w, 1e-6)
    with pytest.raises(RuntimeError, match=r"silu_and_mul: x's last dimension must be even"):
        xx.silu_and_mul(on(torch.randn(3, 7)))
    pos, cache = on(torch.arange(3)), on(rope_cache(8, 8))
    with pytest.raises(RuntimeError, match=r"positions must be int32 or int64, got Float"):
        xx.rotary_embedding(on(torch.zeros(3)), on(torch.randn(3, 16)), on(torch.randn(3, 8)), 8, cache, True)
    with pytest.raises(RuntimeError, match=r"query's per-token shape \[12\] is not a whole number of heads"):
        xx.rotary_embedding(pos, on(torch.randn(3, 12)), on(torch.randn(3, 8)), 8, cache, True)
    with pytest.raises(RuntimeError, match=r"rot_dim\) must be even and in \(0, head_size=4\]"):
        xx.rotary_embedding(pos, on(torch.randn(3, 16)), on(torch.randn(3, 8)), 4, cache, True)
    with pytest.raises(RuntimeError, match=r"key's leading dimensions \[4\] must match positions' shape \[3\]"):
        xx.rotary_embedding(pos, on(torch.randn(3, 16)), on(torch.randn(4, 8)), 8, cache, True)
    kc = on(torch.zeros(4, 2, 2, 8))
    with pytest.raises(RuntimeError, match=r"slot_mapping has 2 entries for 3 tokens"):
        xx.reshape_and_cache(on(torch.randn(3, 2, 8)), on(torch.randn(3, 2, 8)), kc, kc.clone(),
                             on(torch.tensor([0, 1])))
    with pytest.raises(RuntimeError, match=r"key_cache's \[num_kv_heads, head_size\] = \[2, 8\] must match key's"):
        xx.reshape_and_cache(on(torch.randn(3, 1, 8)), on(torch.randn(3, 1, 8)), kc, kc.clone(),
                             on(torch.tensor([0, 1, 2])))
    with pytest.raises(RuntimeError, match=r"query's 3 heads must be a multiple of the cache's 2 kv heads"):
        xx.paged_attention(on(torch.randn(1, 3, 8)), kc, kc, on(torch.zeros(1, 2, dtype=torch.int32)),
                           on(torch.ones(1, dtype=torch.int32)), 1.0)
    with pytest.raises(RuntimeError, match=r"block_tables must be 2-D \[num_seqs, max_blocks_per_seq\]"):
        xx.paged_attention(on(torch.randn(1, 2, 8)), kc, kc, on(torch.zeros(2, dtype=torch.int32)),
                           on(torch.ones(1, dtype=torch.int32)), 1.0)


def test_mixed_devices_are_rejected():
    x = xla(torch.randn(3, 16))
    # CUDA's message, the one every xxnpu kernel gives (xxnpu::CheckSameDevice).
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, but found at least two "
                                           r"devices, xxnpu:0 and cpu! \(when checking argument for argument weight "
                                           r"in method xxnpu::rms_norm\)"):
        xx.rms_norm(x, torch.randn(16), 1e-6)
    with pytest.raises(RuntimeError, match=r"xxnpu:0 and cpu! \(when checking argument for argument seq_lens in "
                                           r"method xxnpu::paged_attention\)"):
        kc = xla(torch.zeros(4, 2, 2, 8))
        xx.paged_attention(xla(torch.randn(1, 2, 8)), kc, kc, xla(torch.zeros(1, 2, dtype=torch.int32)),
                           torch.ones(1, dtype=torch.int32), 1.0)


def test_second_device_and_side_stream():
    """Kernels go to the tensors' device (not the current one) and its current stream."""
    x, w = torch.randn(3, 16), torch.randn(16)
    y = xx.rms_norm(x.to("xxnpu:1"), w.to("xxnpu:1"), 1e-6)
    assert y.device == torch.device("xxnpu:1")
    torch.testing.assert_close(y.cpu(), xx.rms_norm(x, w, 1e-6))
    s = torch.xxnpu.Stream(device="xxnpu:1")
    x1 = x.to("xxnpu:1")
    torch.xxnpu.synchronize("xxnpu:1")
    with torch.xxnpu.stream(s):
        y2 = xx.silu_and_mul(x1)
    s.synchronize()
    torch.testing.assert_close(y2.cpu(), xx.silu_and_mul(x))
    with pytest.raises(RuntimeError, match=r"found at least two devices, xxnpu:1 and xxnpu:0! \(when checking "
                                           r"argument for argument weight in method xxnpu::rms_norm\)"):
        xx.rms_norm(x.to("xxnpu:1"), w.to("xxnpu:0"), 1e-6)


def test_bad_device_index_values_fail_the_kernel_with_a_message():
    """Values only the device sees (they are on the device): the kernel fails, and the
    error surfaces at the next synchronising call (at the call itself under
    XXNPU_LAUNCH_BLOCKING=1), naming the kernel and the value. The kernels report them as
    out-of-range (absl kOutOfRange), which torch_xxnpu raises as torch.AcceleratorError (as CUDA
    raises a device-side assert)."""
    kc = xla(torch.zeros(4, 2, 2, 8))
    with pytest.raises(torch.AcceleratorError, match=r"xxnpu::reshape_and_cache: slot_mapping\[1\] = 8 is outside the "
                                         r"cache's 8 slots"):
        xx.reshape_and_cache(xla(torch.randn(2, 2, 8)), xla(torch.randn(2, 2, 8)), kc, kc.clone(),
                             xla(torch.tensor([1, 8])))
        torch.xxnpu.synchronize()
    with pytest.raises(torch.AcceleratorError, match=r"block_tables\[1\]\[1\] = 9 is outside the cache's 4 blocks"):
        out = xx.paged_attention(xla(torch.randn(2, 2, 8)), kc, kc, xla(torch.tensor([[0, 1], [2, 9]])),
                                 xla(torch.tensor([3, 4])), 1.0)
        out.cpu()
    with pytest.raises(torch.AcceleratorError, match=r"seq_lens\[0\] = 5 does not fit the block table's 2 blocks of 2 tokens"):
        xx.paged_attention(xla(torch.randn(1, 2, 8)), kc, kc, xla(torch.tensor([[0, 1]])), xla(torch.tensor([5])),
                           1.0)
        torch.xxnpu.synchronize()
    with pytest.raises(torch.AcceleratorError, match=r"positions\[1\] = 8 is outside the cos_sin_cache's rows \[0, 8\)"):
        xx.rotary_embedding(xla(torch.tensor([0, 8])), xla(torch.randn(2, 8)), xla(torch.randn(2, 8)), 8,
                            xla(rope_cache(8, 8)), True)
        torch.xxnpu.synchronize()
    # The device is usable afterwards.
    assert torch.equal((xla(torch.ones(2)) + xla(torch.ones(2))).cpu(), torch.full((2,), 2.0))
    # The CPU reference checks the same values on the host.
    with pytest.raises(RuntimeError, match=r"slot_mapping holds slot 8, outside the cache's 8 slots"):
        ckc = torch.zeros(4, 2, 2, 8)
        xx.reshape_and_cache(torch.randn(2, 2, 8), torch.randn(2, 2, 8), ckc, ckc.clone(), torch.tensor([1, 8]))


def test_kernels_show_in_the_profiler_with_their_names():
    from torch.profiler import ProfilerActivity, profile

    x, w = xla(torch.randn(4, 32)), xla(torch.randn(32))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        xx.rms_norm(x, w, 1e-6)
        xx.silu_and_mul(x)
        torch.xxnpu.synchronize()
    names = {e.name for e in prof.events()}
    assert "xxnpu::rms_norm" in names and "xxnpu::silu_and_mul" in names, sorted(names)


_NO_BLAS_TEAM = r"""
import os, torch, torch_xxnpu
torch.set_num_threads(2)
def threads():
    return len(os.listdir("/proc/self/task"))
x = torch.randn(1 << 22, device="xxnpu")
(x * 2 + 1).sum().item()  # starts the device's compute pool
a = torch.randn(256, 256, device="xxnpu")
(a @ a).sum().item()  # the stream thread's own BLAS threads
torch.xxnpu.synchronize()
before = threads()
T, H, KV, D, BS = 74, 8, 2, 64, 16
q = torch.randn(T, H, D, device="xxnpu")
kc = torch.randn(8, BS, KV, D, device="xxnpu")
vc = torch.randn_like(kc)
bt = torch.arange(8, dtype=torch.int32, device="xxnpu").repeat(T, 1)
sl = (torch.arange(T, dtype=torch.int32) % (8 * BS) + 1).to("xxnpu")
for _ in range(3):
    torch.ops.xxnpu.paged_attention(q, kc, vc, bt, sl, 0.125)
torch.xxnpu.synchronize()
print(before, threads())
"""


def test_paged_attention_keeps_the_blas_on_its_compute_thread():
    """paged_attention's tile GEMMs run single-threaded on each compute thread: without that,
    MKL starts an OpenMP team from the compute thread (one more OS thread here) that fights
    the other compute threads for the cores (the Llama prefill ran at 2.4 ms per call instead
    of 0.1 ms). In a fresh process, so no earlier test has started that team already."""
    out = subprocess.run([sys.executable, "-c", _NO_BLAS_TEAM], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split()[-2:])
    assert after == before, f"paged_attention started {after - before} BLAS thread(s) from a compute thread"
