"""Fused scaled-dot-product attention on xxnpu (ops/attention_ops.cc): F.scaled_dot_product_attention
takes the PrivateUse1 OVERRIDEABLE backend where the fused kernels apply. Forward and
backward against the CPU and against xxnpu's own math path, masks, causal, GQA, dtypes, odd
sizes, masked-out rows, the backend choice, the profile, no CPU fallback, bad input."""
import pytest
import torch
import torch.nn.functional as F
import torch_xxnpu  # noqa: F401
from testlib import no_fallback
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch_xxnpu import ops as xops

OVERRIDEABLE, MATH = 4, 0
FUSED_KERNELS = ("xxnpu::sdpa_flash_fwd", "xxnpu::sdpa_flash_bwd_dq", "xxnpu::sdpa_flash_bwd_dkdv")
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float16: dict(rtol=5e-3, atol=5e-3),
       torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


@pytest.fixture(autouse=True)
def _no_fallback():
    with no_fallback():
        yield


def _x(t):
    return t.to("xxnpu")


def _rand(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


def _sdpa_with_grads(q, k, v, mask, grad, **kw):
    """Output and the gradients of q, k, v (and of a float mask that requires grad)."""
    ins = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    m = mask
    if mask is not None and mask.dtype != torch.bool:
        m = mask.detach().clone().requires_grad_()
    out = F.scaled_dot_product_attention(*ins, attn_mask=m, **kw)
    out.backward(grad)
    grads = [t.grad for t in ins] + ([m.grad] if m is not None and m.requires_grad else [])
    return out.detach(), grads


def _check(got, ref, dtype):
    got, ref = got.cpu().float(), ref.cpu().float()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    # Gradients of long sums lose more precision in half types: scale by the magnitude.
    tol = dict(TOL[dtype])
    if dtype != torch.float32 and ref.numel():
        tol["atol"] *= max(1.0, ref.abs().max().item())
    torch.testing.assert_close(got, ref, **tol)


# (B, H, Hk, L, S, E, Ev, is_causal, mask): mask None, "bool" / "float" of a shape.
CASES = {
    "plain": (2, 3, 3, 5, 7, 8, 8, False, None),
    "causal": (2, 2, 2, 9, 9, 16, 16, True, None),
    "causal_L_lt_S": (1, 2, 2, 4, 11, 8, 8, True, None),
    "causal_L_gt_S": (1, 2, 2, 11, 4, 8, 8, True, None),
    "bool_mask_LS": (2, 2, 2, 6, 10, 8, 8, False, ("bool", (6, 10))),
    "bool_mask_B1LS": (2, 3, 3, 6, 10, 8, 8, False, ("bool", (2, 1, 6, 10))),
    "float_mask_1HLS": (2, 3, 3, 6, 10, 8, 8, False, ("float", (1, 3, 6, 10))),
    "float_mask_S": (2, 2, 2, 5, 10, 8, 8, False, ("float", (10,))),
    "float_mask_BHLS": (2, 2, 2, 5, 10, 8, 8, False, ("float", (2, 2, 5, 10))),
    "gqa": (2, 8, 2, 6, 6, 16, 16, False, None),
    "gqa_causal_mqa": (1, 4, 1, 7, 7, 8, 8, True, None),
    "gqa_mask": (1, 6, 3, 5, 9, 8, 8, False, ("float", (1, 6, 5, 9))),
    "decode_L1": (3, 4, 2, 1, 37, 32, 32, False, None),
    "head_dim_72": (1, 2, 2, 13, 17, 72, 72, True, None),
    "head_dims_differ": (1, 2, 2, 5, 6, 16, 24, False, None),
    # More than one key tile (128) and query block: the online softmax across tiles.
    "long_causal_gqa": (1, 4, 2, 300, 300, 32, 32, True, None),
    "long_mask": (1, 2, 2, 150, 260, 24, 24, False, ("bool", (150, 260))),
    # Both: the CPU's SDPA applies both (its math path rejects the combination).
    "causal_and_mask": (2, 4, 2, 140, 140, 16, 16, True, ("bool", (2, 1, 140, 140))),
}


def _inputs(case, dtype, seed=0):
    B, H, Hk, L, S, E, Ev, causal, mask = CASES[case]
    g = torch.Generator().manual_seed(seed)
    q, k, v = _rand(g, B, H, L, E, dtype=dtype), _rand(g, B, Hk, S, E, dtype=dtype), _rand(g, B, Hk, S, Ev, dtype=dtype)
    grad = _rand(g, B, H, L, Ev, dtype=dtype)
    m = None
    if mask is not None:
        kind, shape = mask
        if kind == "bool":
            m = torch.rand(*shape, generator=g) > 0.3
        else:
            m = _rand(g, *shape, dtype=dtype)
    kw = dict(is_causal=causal, enable_gqa=H != Hk)
    return q, k, v, m, grad, kw


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_matches_cpu_and_math_path(case, dtype):
    q, k, v, m, grad, kw = _inputs(case, dtype)
    xq, xk, xv, xgrad = (_x(t) for t in (q, k, v, grad))
    xm = None if m is None else _x(m)
    assert torch._fused_sdp_choice(xq, xk, xv, xm, is_causal=kw["is_causal"], enable_gqa=kw["enable_gqa"]) == \
        OVERRIDEABLE
    # The reference: the CPU in float32 from the same (rounded) inputs.
    ref_out, ref_grads = _sdpa_with_grads(*(t.float() for t in (q, k, v)), None if m is None else
                                          (m if m.dtype == torch.bool else m.float()), grad.float(), **kw)
    out, grads = _sdpa_with_grads(xq, xk, xv, xm, xgrad, **kw)
    assert out.dtype == dtype and out.device.type == "xxnpu"
    _check(out, ref_out, dtype)
    assert len(grads) == len(ref_grads)
    for got, ref in zip(grads, ref_grads):
        assert got.dtype == dtype
        _check(got, ref, dtype)
    if kw["is_causal"] and m is not None:
        return  # the math path rejects is_causal with a mask
    # xxnpu's own math path on the same inputs.
    with sdpa_kernel(SDPBackend.MATH):
        math_out, math_grads = _sdpa_with_grads(xq, xk, xv, xm, xgrad, **kw)
    _check(out, math_out, dtype)
    for got, ref in zip(grads, math_grads):
        _check(got, ref, dtype)


def test_against_cpu_in_the_same_dtype():
    """The CPU's own SDPA (its flash kernel) on the same half-precision inputs."""
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v, m, grad, kw = _inputs("gqa", dtype, seed=3)
        ref_out, ref_grads = _sdpa_with_grads(q, k, v, m, grad, **kw)
        out, grads = _sdpa_with_grads(_x(q), _x(k), _x(v), m, _x(grad), **kw)
        _check(out, ref_out, dtype)
        for got, ref in zip(grads, ref_grads):
            _check(got, ref, dtype)


def test_non_contiguous_inputs_and_output_layout():
    """[B, L, H, E] projections transposed to [B, H, L, E], as attention modules pass them;
    the output is laid out like the query (ATen's meta function does the same)."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (_rand(g, 2, 7, 4, 16).transpose(1, 2) for _ in range(3))
    grad = _rand(g, 2, 4, 7, 16)
    ref_out, ref_grads = _sdpa_with_grads(q, k, v, None, grad, is_causal=True)
    xq, xk, xv = (_x(t.transpose(1, 2).contiguous()).transpose(1, 2) for t in (q, k, v))
    out, grads = _sdpa_with_grads(xq, xk, xv, None, _x(grad), is_causal=True)
    _check(out, ref_out, torch.float32)
    for got, ref in zip(grads, ref_grads):
        _check(got, ref, torch.float32)
    out = F.scaled_dot_product_attention(xq, xk, xv)
    assert out.transpose(1, 2).is_contiguous(), out.stride()
    # Strided last dim (a slice) and an expanded (stride-0) batch.
    xk2 = _x(_rand(g, 1, 4, 9, 32))[..., ::2].expand(2, 4, 9, 16)
    xv2 = _x(_rand(g, 2, 4, 9, 16))
    ref = F.scaled_dot_product_attention(xq.cpu(), xk2.cpu(), xv2.cpu())
    _check(F.scaled_dot_product_attention(xq, xk2, xv2), ref, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fully_masked_rows_and_zero_lengths_behave_as_on_cpu(dtype):
    g = torch.Generator().manual_seed(2)
    q, k, v, grad = _rand(g, 2, 2, 4, 8, dtype=dtype), _rand(g, 2, 2, 6, 8, dtype=dtype), \
        _rand(g, 2, 2, 6, 8, dtype=dtype), _rand(g, 2, 2, 4, 8, dtype=dtype)
    mask = torch.rand(2, 1, 4, 6, generator=g) > 0.5
    mask[:, :, 1] = False  # row 1 sees no key at all
    fmask = torch.zeros(2, 1, 4, 6, dtype=dtype).masked_fill(~mask, float("-inf"))
    for m in (mask, fmask):
        ref_out, ref_grads = _sdpa_with_grads(q, k, v, m, grad)
        out, grads = _sdpa_with_grads(_x(q), _x(k), _x(v), _x(m), _x(grad))
        assert (out[:, :, 1] == 0).all().item()
        _check(out, ref_out, dtype)
        for got, ref in zip(grads, ref_grads):
            got, ref = got.cpu().float(), ref.cpu().float()
            torch.testing.assert_close(got.nan_to_num(), ref.nan_to_num(), **TOL[dtype])
    # No keys (S = 0): zeros, as on the CPU; no queries (L = 0): an empty result.
    for qs, ks in [((2, 2, 3, 8), (2, 2, 0, 8)), ((2, 2, 0, 8), (2, 2, 5, 8))]:
        q0, k0 = _rand(g, *qs, dtype=dtype), _rand(g, *ks, dtype=dtype)
        ref = F.scaled_dot_product_attention(q0, k0, k0)
        out = F.scaled_dot_product_attention(_x(q0), _x(k0), _x(k0))
        assert out.shape == ref.shape
        _check(out, ref, dtype)
        xq0, xk0 = _x(q0).requires_grad_(), _x(k0).requires_grad_()
        F.scaled_dot_product_attention(xq0, xk0, xk0).sum().backward()
        assert xq0.grad.shape == q0.shape and xk0.grad.shape == k0.shape
        assert (xq0.grad == 0).all().item() and (xk0.grad == 0).all().item()


def test_scale_argument():
    """Against the CPU's math path: the CPU's flash kernel gives NaN rows for a negative
    scale with is_causal (torch 2.13)."""
    q, k, v, m, grad, kw = _inputs("causal", torch.float32)
    for scale in (0.05, 1.0, -0.3):
        with sdpa_kernel(SDPBackend.MATH):
            ref_out, ref_grads = _sdpa_with_grads(q, k, v, None, grad, scale=scale, **kw)
        out, grads = _sdpa_with_grads(_x(q), _x(k), _x(v), None, _x(grad), scale=scale, **kw)
        _check(out, ref_out, torch.float32)
        for got, ref in zip(grads, ref_grads):
            _check(got, ref, torch.float32)


def test_the_fused_kernels_ran_not_the_math_ops():
    from torch.profiler import ProfilerActivity, profile

    q, k, v, m, grad, kw = _inputs("gqa_mask", torch.float32)
    xq, xk, xv = (_x(t).requires_grad_() for t in (q, k, v))
    xm = _x(m).requires_grad_()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        F.scaled_dot_product_attention(xq, xk, xv, attn_mask=xm, **kw).backward(_x(grad))
        torch.xxnpu.synchronize()
    names = {e.name for e in prof.events()}
    for kernel in FUSED_KERNELS + ("aten::_scaled_dot_product_fused_attention_overrideable",
                                   "aten::_scaled_dot_product_fused_attention_overrideable_backward"):
        assert kernel in names, sorted(names)
    for unfused in ("aten::bmm", "aten::matmul", "aten::_softmax", "aten::_softmax_backward_data",
                    "aten::_scaled_dot_product_attention_math", "aten::repeat_interleave"):
        assert unfused not in names, sorted(names)
    # Forcing the math path really runs matmul + softmax, and none of our kernels.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof, \
            sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(xq, xk, xv, attn_mask=xm, **kw)
        torch.xxnpu.synchronize()
    names = {e.name for e in prof.events()}
    assert "aten::_softmax" in names and not names & set(FUSED_KERNELS), sorted(names)


def test_backend_choice():
    g = torch.Generator().manual_seed(4)
    q, k = _x(_rand(g, 1, 2, 3, 8)), _x(_rand(g, 1, 2, 5, 8))
    assert torch._fused_sdp_choice(q, k, k) == OVERRIDEABLE
    assert torch._fused_sdp_choice(q.half(), k.half(), k.half(), is_causal=True) == OVERRIDEABLE
    # What the fused kernels leave to the math path.
    assert torch._fused_sdp_choice(q, k, k, dropout_p=0.1) == MATH
    assert torch._fused_sdp_choice(q.double(), k.double(), k.double()) == MATH
    assert torch._fused_sdp_choice(q[0], k[0], k[0]) == MATH  # 3-D
    assert torch._fused_sdp_choice(q, k[:, :1], k[:, :1]) == MATH  # head counts differ, no enable_gqa
    assert torch._fused_sdp_choice(q, k[:, :1], k[:, :1], enable_gqa=True) == OVERRIDEABLE
    assert torch._fused_sdp_choice(q, k, k, attn_mask=_x(torch.zeros(3, 5, dtype=torch.float64))) == MATH
    with sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(q, k, k) == MATH
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        assert torch._fused_sdp_choice(q, k, k) == OVERRIDEABLE
        with pytest.raises(RuntimeError, match="No available kernel.*dropout"):
            F.scaled_dot_product_attention(q, k, k, dropout_p=0.5)
    # Dropout and float64 still work, through the math path.
    out = F.scaled_dot_product_attention(q.double(), k.double(), k.double())
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q.cpu().double(), k.cpu().double(),
                                                                         k.cpu().double()))
    assert F.scaled_dot_product_attention(q, k, k, dropout_p=0.5).shape == q.shape


def _raises_like_cpu(fn, cpu_args, xxnpu_args):
    with pytest.raises(RuntimeError) as cpu_err:
        fn(*cpu_args)
    with pytest.raises(RuntimeError) as x_err:
        fn(*xxnpu_args)
    return str(cpu_err.value), str(x_err.value)


def test_bad_input_raises_like_the_cpu():
    g = torch.Generator().manual_seed(5)
    q, k, v = _rand(g, 1, 4, 3, 8), _rand(g, 1, 4, 5, 8), _rand(g, 1, 4, 5, 8)
    sdpa = F.scaled_dot_product_attention
    # dtypes: the same message.
    c, x = _raises_like_cpu(sdpa, (q, k.half(), v), (_x(q), _x(k.half()), _x(v)))
    assert c == x and "same dtype" in x
    # devices
    with pytest.raises(RuntimeError, match="device"):
        sdpa(_x(q), k, _x(v))
    # head counts: 4 query heads on 3 key heads, without and with enable_gqa.
    k3, v3 = k[:, :3], v[:, :3]
    _raises_like_cpu(sdpa, (q, k3, v3), (_x(q), _x(k3), _x(v3)))
    _raises_like_cpu(lambda *a: sdpa(*a, enable_gqa=True), (q, k3, v3), (_x(q), _x(k3), _x(v3)))
    # a mask that does not broadcast
    bad = torch.zeros(4, 4)
    _raises_like_cpu(lambda a, b, c, m: sdpa(a, b, c, attn_mask=m), (q, k, v, bad), (_x(q), _x(k), _x(v), _x(bad)))


def test_the_op_called_directly_checks_its_arguments():
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    g = torch.Generator().manual_seed(6)
    q, k = _x(_rand(g, 1, 4, 3, 8)), _x(_rand(g, 1, 2, 5, 8))
    out, lse, _, _, max_q, max_k, seed, offset, _ = op(q, k, k)  # GQA inferred from the head counts
    assert out.shape == (1, 4, 3, 8) and lse.shape == (1, 4, 3) and lse.dtype == torch.float32
    assert (max_q, max_k) == (3, 5)
    # Philox seed and offset as the op's meta function has them (torch.compile checks them).
    assert seed.shape == offset.shape == () and seed.dtype == offset.dtype == torch.int64
    ref_lse = torch.logsumexp(q.cpu() @ k.cpu().repeat_interleave(2, 1).transpose(-1, -2) * 8 ** -0.5, -1)
    torch.testing.assert_close(lse.cpu(), ref_lse)
    with pytest.raises(RuntimeError, match="no dropout.*got dropout_p = 0.5"):
        op(q, k, k, dropout_p=0.5)
    with pytest.raises(RuntimeError, match="expected 4-D query"):
        op(q[0], k[0], k[0])
    with pytest.raises(RuntimeError, match="query's 4 heads must be a multiple of key's 3 heads"):
        op(q, _x(_rand(g, 1, 3, 5, 8)), _x(_rand(g, 1, 3, 5, 8)))
    with pytest.raises(RuntimeError, match="must be float32, float16 or bfloat16, got Double"):
        op(q.double(), k.double(), k.double())
    with pytest.raises(RuntimeError, match="does not broadcast"):
        op(q, k, k, _x(torch.zeros(2, 3, 5)))
    with pytest.raises(RuntimeError, match="same device"):
        op(q, k.cpu(), k)


def test_registered_natively():
    names = set(xops.native_ops())
    for op in ("aten::_scaled_dot_product_fused_attention_overrideable",
               "aten::_scaled_dot_product_fused_attention_overrideable_backward", "aten::_fused_sdp_choice"):
        assert op in names or op.split("::")[1] in names, op
