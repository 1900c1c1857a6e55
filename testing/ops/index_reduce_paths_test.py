"""The fast paths of the data-movement and reduction kernels against the CPU backend:
gather/scatter walked as rows along the index's last dim (ops/index_ops.cc), scatter_add's
deterministic split, embedding backward by weight-row ranges (ops/nn_ops.cc), reductions
over outer dims as SIMD row accumulation and the SIMD 2-norm (ops/reduce_ops.cc), and the
tiled transposed copy (ops/copy.cc). Each covers odd sizes (vector tails, partial tiles,
sizes crossing the launch blocks), strided inputs that take the general path, dim 0 and
dim -1, bfloat16, empty tensors and bad indices raising the CPU's error."""
import pytest
import torch
import torch.nn.functional as F

import testlib
import torch_xxnpu  # noqa: F401

DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _no_fallback():
    with testlib.no_fallback():
        yield


def _rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def _idx(high, shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g)


def _x(t):
    return t.to("xxnpu")


def _close(got, want, exact=False):
    assert got.device.type == "xxnpu"
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if exact:
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
        return
    tol = dict(rtol=1.6e-2, atol=1e-2) if want.dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


# Shapes with odd last dims (tails), rows that cross the 16384-element blocks, and 3-D.
SHAPES = [(1,), (37,), (5, 33), (70, 301), (3, 7, 129)]


@pytest.mark.parametrize("dtype", DTYPES + [torch.int64], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gather_every_dim_matches_cpu(shape, dtype):
    x = _rand(shape, torch.float32, 1).to(dtype) if dtype != torch.int64 else _idx(1000, shape, 1)
    for dim in range(-len(shape), len(shape)):
        isize = list(shape)
        isize[dim] = shape[dim] + 3  # the index may be longer than self along dim
        idx = _idx(shape[dim], isize, 2)
        _close(torch.gather(_x(x), dim, _x(idx)), torch.gather(x, dim, idx), exact=True)
        # A smaller index along the other dims, and an int32 index.
        small = [max(1, s - 1) for s in isize]
        i2 = idx[tuple(slice(0, s) for s in small)].contiguous().int()
        _close(torch.gather(_x(x), dim, _x(i2)), torch.gather(x, dim, i2), exact=True)


def test_gather_strided_operands_match_cpu():
    base = _rand((40, 66), torch.float32, 3)
    idx_base = _idx(20, (66, 40), 4)
    for view in [lambda t: t.t(), lambda t: t[:, ::3], lambda t: t[::2]]:
        x = view(base)
        for dim in (0, 1):
            idx = idx_base.t()[: x.shape[0], : x.shape[1]] % x.shape[dim]  # a transposed (strided) index
            want = torch.gather(x, dim, idx)
            _close(torch.gather(view(_x(base)), dim, _x(idx)), want, exact=True)
            out = torch.empty(want.t().shape).to("xxnpu").t()  # a strided out
            torch.gather(_x(x), dim, _x(idx), out=out)
            _close(out, want, exact=True)


def test_gather_scalar_and_empty():
    x = torch.tensor(3.5)
    _close(torch.gather(_x(x), 0, _x(torch.tensor(0))), torch.gather(x, 0, torch.tensor(0)), exact=True)
    e = torch.empty(4, 0, dtype=torch.long)
    _close(torch.gather(_x(_rand((4, 5), torch.float32, 0)), 1, _x(e)),
           torch.gather(_rand((4, 5), torch.float32, 0), 1, e), exact=True)


@pytest.mark.parametrize("bad", [-1, 5])
def test_gather_and_scatter_out_of_range_raise(bad):
    x = _x(_rand((3, 5), torch.float32, 0))
    idx = torch.zeros(3, 5, dtype=torch.long)
    idx[2, 4] = bad
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(x, 1, _x(idx)).cpu()
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter(1, _x(idx), 1.0).cpu()
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_add(1, _x(idx), x).cpu()
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_add(0, _x(idx), x).cpu()  # by columns


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_scatter_and_scatter_add_every_dim_match_cpu(shape, dtype):
    x = _rand(shape, torch.float32, 5).to(dtype)
    for dim in range(-len(shape), len(shape)):
        isize = [max(1, s - 1) if d != dim % len(shape) else s + 4 for d, s in enumerate(shape)]
        src = _rand(isize, torch.float32, 6).to(dtype)
        # scatter: a permutation along dim so that no position is written twice (the
        # winner of a repeated index is unspecified).
        perm = torch.stack([torch.randperm(shape[dim], generator=torch.Generator().manual_seed(k))
                            for k in range(max(1, src.numel() // isize[dim]))])
        n = min(shape[dim], isize[dim])
        idx = torch.movedim(perm[:, :n].reshape([s for d, s in enumerate(isize) if d != dim % len(shape)] + [n]),
                            -1, dim).contiguous()
        s2 = src.narrow(dim, 0, n)
        _close(_x(x).scatter(dim, _x(idx), _x(s2)), x.scatter(dim, idx, s2), exact=True)
        _close(_x(x).scatter(dim, _x(idx), 2.5), x.scatter(dim, idx, 2.5), exact=True)
        # scatter_add with repeated indices: every addend lands, in index order.
        rep = _idx(shape[dim], isize, 7)
        got, want = _x(x).scatter_add(dim, _x(rep), _x(src)), x.scatter_add(dim, rep, src)
        if dtype == torch.bfloat16:
            # Each addition rounds to bfloat16, and the CPU adds in its own order: compare
            # with a few roundings' slack (float32 and float64 tests check the values).
            torch.testing.assert_close(got.cpu().float(), want.float(), rtol=3e-2, atol=3e-2)
        else:
            _close(got, want)


def test_scatter_add_is_deterministic_and_exact_in_float64():
    # Many repeated indices along dim 0 and dim 1, in float64 with integer values: exact.
    x = torch.zeros(50, 700, dtype=torch.float64)
    src = torch.randint(-100, 100, (300, 700)).double()
    idx = _idx(50, (300, 700), 8)
    _close(_x(x).scatter_add(0, _x(idx), _x(src)), x.scatter_add(0, idx, src), exact=True)
    x1 = torch.zeros(700, 50, dtype=torch.float64)
    _close(_x(x1).scatter_add(1, _x(idx.t().contiguous()), _x(src.t().contiguous())),
           x1.scatter_add(1, idx.t().contiguous(), src.t().contiguous()), exact=True)
    # float32, run twice: the same bits (no race between blocks).
    xf, sf = _rand((64, 300), torch.float32, 9), _rand((4000, 300), torch.float32, 10)
    i = _idx(64, (4000, 300), 11)
    a = _x(xf).scatter_add(0, _x(i), _x(sf)).cpu()
    b = _x(xf).scatter_add(0, _x(i), _x(sf)).cpu()
    assert torch.equal(a, b)
    torch.testing.assert_close(a, xf.scatter_add(0, i, sf), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize("num_weights,dim,n", [(1, 1, 1), (7, 33, 50), (300, 129, 2000), (5000, 16, 3)])
def test_embedding_backward_matches_cpu(num_weights, dim, n, dtype):
    grad = _rand((n, dim), torch.float32, 12).to(dtype)
    idx = _idx(num_weights, (n,), 13)
    for pad in (-1, 0):
        # xxnpu accumulates bfloat16 in float (rounding once), the CPU in bfloat16: the
        # reference for bfloat16 is the float32 result, rounded.
        want = torch.ops.aten.embedding_dense_backward(grad.float(), idx, num_weights, pad, False).to(dtype)
        got = torch.ops.aten.embedding_dense_backward(_x(grad), _x(idx), num_weights, pad, False)
        _close(got, want)
    # A 2-D index and a strided grad.
    g2 = _rand((dim, 4, n), torch.float32, 14).to(dtype).permute(1, 2, 0)
    i2 = _idx(num_weights, (4, n), 15)
    _close(torch.ops.aten.embedding_dense_backward(_x(g2), _x(i2), num_weights, -1, False),
           torch.ops.aten.embedding_dense_backward(g2.float(), i2, num_weights, -1, False).to(dtype))


def test_embedding_backward_sums_in_index_order_exactly():
    # float32 addends whose sum depends on the order: must equal the CPU's bit for bit.
    grad = torch.tensor([[1e8], [1.0], [-1e8], [1.0]] * 64).repeat(1, 17)
    idx = torch.zeros(grad.shape[0], dtype=torch.long)
    idx[::5] = 3
    _close(torch.ops.aten.embedding_dense_backward(_x(grad), _x(idx), 4, -1, False),
           torch.ops.aten.embedding_dense_backward(grad, idx, 4, -1, False), exact=True)
    # bfloat16: the float sums rounded once to nearest even (ties, NaN and inf included).
    gb = _rand((600, 45), torch.float32, 60).to(torch.bfloat16)
    gb[3, 4], gb[5, 6], gb[7, 8] = float("nan"), float("inf"), 1.0 + 2.0 ** -8  # a tie above 1
    ib = _idx(9, (600,), 61)
    ib[7] = 8
    _close(torch.ops.aten.embedding_dense_backward(_x(gb), _x(ib), 9, -1, False),
           torch.ops.aten.embedding_dense_backward(gb.float(), ib, 9, -1, False).to(torch.bfloat16), exact=True)


def test_embedding_backward_empty_and_bad_index():
    grad = torch.zeros(0, 8)
    got = torch.ops.aten.embedding_dense_backward(_x(grad), _x(torch.zeros(0, dtype=torch.long)), 5, -1, False)
    _close(got, torch.zeros(5, 8), exact=True)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.aten.embedding_dense_backward(_x(torch.ones(3, 8)), _x(torch.tensor([0, 9, 1])), 5, -1,
                                                False).cpu()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.aten.embedding_dense_backward(_x(torch.ones(3, 8)), _x(torch.tensor([0, -1, 1])), 5, -1,
                                                False).cpu()
    w = _x(torch.randn(5, 8)).requires_grad_()
    F.embedding(_x(torch.tensor([1, 1, 4])), w).sum().backward()
    want = torch.zeros(5, 8)
    want[1] = 2
    want[4] = 1
    _close(w.grad, want, exact=True)


OUTER = {"sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d), "amax": lambda x, d: x.amax(d),
         "sum_keep": lambda x, d: x.sum(d, keepdim=True)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(OUTER))
@pytest.mark.parametrize("shape,dims", [((3, 5), 0), ((70, 301), 0), ((1000, 17), 0), ((600, 300), 0),
                                        ((4, 9, 261), 1), ((4, 9, 261), (0, 1)), ((6, 5, 33), (0,)),
                                        ((300, 1), 0), ((2, 3), -1)], ids=str)
def test_outer_dim_reductions_match_cpu(shape, dims, name, dtype):
    x = _rand(shape, torch.float32, 16).to(dtype)
    fn = OUTER[name]
    _close(fn(_x(x), dims), fn(x, dims))
    # The strided form (a transposed input) takes the general path.
    xt = _rand(shape[::-1], torch.float32, 17).to(dtype)
    _close(fn(_x(xt).t() if len(shape) == 2 else _x(xt).permute(2, 1, 0), dims),
           fn(xt.t() if len(shape) == 2 else xt.permute(2, 1, 0), dims))


def test_outer_dim_reductions_nan_inf_and_empty():
    x = torch.randn(40, 300)
    x[7, 3] = float("nan")
    x[9, 5] = float("inf")
    x[11, 299] = float("-inf")
    for fn in OUTER.values():
        _close(fn(_x(x), 0), fn(x, 0))
    x = torch.full((50, 20), -float("inf"))
    _close(_x(x).amax(0), x.amax(0))
    e = torch.zeros(0, 17)
    _close(_x(e).sum(0), e.sum(0), exact=True)
    _close(_x(e).mean(0), e.mean(0))
    with pytest.raises(IndexError, match="amax"):  # as the CPU
        e.amax(0)
    with pytest.raises(IndexError, match="amax"):
        _x(e).amax(0)


def test_outer_sum_keeps_accuracy_over_many_rows():
    # 1e5 rows of 0.1: a plain float running sum drifts by ~1e-3 relative; the chunked sum
    # stays close to the float64 result.
    x = torch.full((100000, 24), 0.1)  # more than 8 columns: not the split reduction
    got = _x(x).sum(0).cpu().double()
    torch.testing.assert_close(got, x.double().sum(0), rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (70, 1030), (2, 40000)], ids=str)
def test_vector_norm_last_dim_matches_cpu(shape, dtype):
    x = _rand(shape, torch.float32, 18).to(dtype)
    for ord in (2, 1, 3, float("inf")):
        _close(torch.linalg.vector_norm(_x(x), ord, dim=-1), torch.linalg.vector_norm(x, ord, dim=-1))
    xt = _rand(shape[::-1], torch.float32, 19).to(dtype).t()
    _close(torch.linalg.vector_norm(_x(xt.t()).t(), dim=-1), torch.linalg.vector_norm(xt, dim=-1))
    x[0, 0] = float("nan")
    _close(torch.linalg.vector_norm(_x(x), dim=-1), torch.linalg.vector_norm(x, dim=-1))


@pytest.mark.parametrize("dtype", DTYPES + [torch.int8, torch.int64, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(2, 2), (31, 33), (64, 512), (100, 3), (3, 1000), (5, 40, 70)], ids=str)
def test_transposed_copy_matches_cpu(shape, dtype):
    x = _rand(shape, torch.float32, 20).mul(50).to(dtype)
    d = _x(x)
    _close(d.transpose(-2, -1).contiguous(), x.transpose(-2, -1).contiguous(), exact=True)
    if len(shape) == 3:
        # Batches not in order (a permuted batch dim) and a non-contiguous batch: general path.
        _close(d.permute(2, 0, 1).contiguous(), x.permute(2, 0, 1).contiguous(), exact=True)
        _close(d[::2].transpose(1, 2).contiguous(), x[::2].transpose(1, 2).contiguous(), exact=True)
    # A transposed view of a sliced tensor (storage offset, row stride > cols).
    wide = _rand((shape[-2], shape[-1] + 5), torch.float32, 21).to(dtype)
    _close(_x(wide)[:, 2:-3].t().contiguous(), wide[:, 2:-3].t().contiguous(), exact=True)
    _close(_x(wide)[:, 2:].t().contiguous(), wide[:, 2:].t().contiguous(), exact=True)
    tall = _rand((shape[-2] + 1, shape[-1]), torch.float32, 22).to(dtype)  # the fast path from an offset
    _close(_x(tall)[1:].t().contiguous(), tall[1:].t().contiguous(), exact=True)


@pytest.mark.parametrize("dtype", DTYPES + [torch.int8], ids=str)
def test_cat_matches_cpu(dtype):
    # Inputs of odd byte lengths, one crossing the 64 KB blocks, along dim 0 (one copy
    # per input chunk) and dim 1 / -1 (row by row); a legacy empty 1-D input is skipped.
    parts = [_rand(s, torch.float32, 30 + i).mul(20).to(dtype) for i, s in enumerate([(37, 129), (5, 129), (300, 129)])]
    _close(torch.cat([_x(p) for p in parts]), torch.cat(parts), exact=True)
    _close(torch.cat([_x(p) for p in parts] + [_x(torch.empty(0, dtype=dtype))]),
           torch.cat(parts + [torch.empty(0, dtype=dtype)]), exact=True)
    cols = [_rand((6, 3, c), torch.float32, 40 + c).mul(20).to(dtype) for c in (1, 17, 2000)]
    for dim in (1, -1):
        src = cols if dim == -1 else [c.transpose(1, 2).contiguous() for c in cols]
        _close(torch.cat([_x(c) for c in src], dim), torch.cat(src, dim), exact=True)
    # A strided input and a zero-size one: the input-by-input copies.
    _close(torch.cat([_x(parts[0]).t(), _x(parts[1]).t()], 1), torch.cat([parts[0].t(), parts[1].t()], 1), exact=True)
    _close(torch.cat([_x(parts[0]), _x(parts[1])[:0]]), torch.cat([parts[0], parts[1][:0]]), exact=True)


def test_cat_mixed_dtypes_and_out_match_cpu():
    a, b = _rand((7, 33), torch.float32, 50), _rand((3, 33), torch.float32, 51).to(torch.bfloat16)
    _close(torch.cat([_x(a), _x(b)]), torch.cat([a, b]), exact=True)
    out = torch.empty(20, 33).to("xxnpu")[::2]  # a strided out
    torch.cat([_x(a), _x(a[:3])], out=out)
    _close(out, torch.cat([a, a[:3]]), exact=True)


# ------------------------------------------------------------ the dense-row fast paths
# gather/scatter whose index and src/out are dense along the last dim take a per-row loop
# (indices checked first, then a stride-free copy); index_select copies whole rows.


@pytest.mark.parametrize("dtype", DTYPES + [torch.int64], ids=str)
def test_gather_and_scatter_dense_rows_with_a_strided_data_dim_match_cpu(dtype):
    # The data's last dim has stride 2 (a view), the index and src are contiguous: the
    # dense-row path with a stride, for gather and for scatter / scatter_add into the view.
    base = _rand((9, 2 * 131), torch.float32, 20).to(dtype) if dtype != torch.int64 else _idx(99, (9, 262), 20)
    idx = _idx(131, (9, 140), 21)
    src = _rand((9, 140), torch.float32, 22).to(dtype) if dtype != torch.int64 else _idx(99, (9, 140), 22)
    want = torch.gather(base[:, ::2], 1, idx)
    _close(torch.gather(_x(base)[:, ::2], 1, _x(idx)), want, exact=True)
    perm = torch.stack([torch.randperm(131, generator=torch.Generator().manual_seed(k))[:100] for k in range(9)])
    for op in ("scatter", "scatter_value", "scatter_add"):
        got, ref = _x(base), base.clone()
        if op == "scatter":
            got[:, ::2].scatter_(1, _x(perm), _x(src[:, :100]))
            ref[:, ::2].scatter_(1, perm, src[:, :100])
        elif op == "scatter_value":
            got[:, ::2].scatter_(1, _x(perm), 3)
            ref[:, ::2].scatter_(1, perm, 3)
        else:
            got[:, ::2].scatter_add_(1, _x(idx), _x(src))
            ref[:, ::2].scatter_add_(1, idx, src)
        if op == "scatter_add" and dtype == torch.bfloat16:
            # Each addition rounds to bfloat16 (see above): a few roundings' slack.
            torch.testing.assert_close(got.cpu().float(), ref.float(), rtol=3e-2, atol=3e-2)
        else:
            _close(got, ref, exact=op != "scatter_add")


@pytest.mark.parametrize("bad", [-1, -700, 131, 1 << 40])
def test_dense_rows_bad_index_in_a_late_row_raises_and_writes_nothing_out_of_bounds(bad):
    # Rows crossing several launch blocks; the bad index is the last element of the last
    # row, so every block but one succeeds first. The CPU's class and text: RuntimeError,
    # "index ... is out of bounds".
    x = _rand((300, 131), torch.float32, 23)
    idx = _idx(131, (300, 131), 24)
    idx[-1, -1] = bad
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(x, 1, idx)
    with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds"):
        torch.gather(_x(x), 1, _x(idx)).cpu()
    with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds"):
        _x(x).scatter(1, _x(idx), _x(x)).cpu()
    with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds"):
        _x(x).scatter_add(1, _x(idx), _x(x)).cpu()
    # The device still works, and the tensors are intact.
    ok = idx.clamp(0, 130)
    _close(torch.gather(_x(x), 1, _x(ok)), torch.gather(x, 1, ok), exact=True)


def test_gather_and_scatter_dense_rows_empty_and_single_column():
    x = _rand((4, 7), torch.float32, 25)
    for idx in (torch.empty(4, 0, dtype=torch.long), torch.empty(0, 7, dtype=torch.long), _idx(7, (4, 1), 26)):
        _close(torch.gather(_x(x), 1, _x(idx)), torch.gather(x, 1, idx), exact=True)
        src = torch.ones(idx.shape)
        _close(_x(x).scatter(1, _x(idx), _x(src)), x.scatter(1, idx, src), exact=True)
        _close(_x(x).scatter_add(1, _x(idx), _x(src)), x.scatter_add(1, idx, src), exact=True)


# Row widths with tails and rows crossing the 64 KB launch blocks; 3-D for dim 1.
SELECT_SHAPES = [(1, 1), (37, 5), (300, 129), (40, 3000), (6, 11, 17)]


@pytest.mark.parametrize("dtype", DTYPES + [torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("shape", SELECT_SHAPES, ids=str)
def test_index_select_and_embedding_match_cpu(shape, dtype):
    x = (_rand(shape, torch.float32, 27) > 0) if dtype == torch.bool else _rand(shape, torch.float32, 27).to(dtype)
    for dim in range(-len(shape), len(shape)):
        idx = _idx(shape[dim], (2 * shape[dim] + 3,), 28)  # repeats, longer than the dim
        for i in (idx, idx.int(), idx[:0]):
            _close(torch.index_select(_x(x), dim, _x(i)), torch.index_select(x, dim, i), exact=True)
    if len(shape) == 2:
        idx = _idx(shape[0], (3, 5), 29)
        _close(F.embedding(_x(idx), _x(x)), F.embedding(idx, x), exact=True)


def test_index_select_strided_inputs_and_out_match_cpu():
    base = _rand((50, 70), torch.float32, 30)
    idx = _idx(50, (80,), 31)
    for view in (lambda t: t.t(), lambda t: t[::2], lambda t: t[:, 1::3]):
        x = view(base)
        i = idx % x.shape[0]
        _close(torch.index_select(view(_x(base)), 0, _x(i)), torch.index_select(x, 0, i), exact=True)
        # A strided out, and a strided index.
        want = torch.index_select(x, 0, i[::2])
        out = torch.empty(want.t().shape).to("xxnpu").t()
        torch.index_select(view(_x(base)), 0, _x(i)[::2], out=out)
        _close(out, want, exact=True)


@pytest.mark.parametrize("bad", [-1, 50, 1 << 33])
def test_index_select_and_embedding_bad_index_is_an_index_error(bad):
    x = _rand((50, 70), torch.float32, 32)
    idx = _idx(50, (200,), 33)
    idx[-1] = bad  # in the last block
    with pytest.raises(IndexError):
        torch.index_select(x, 0, idx)
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        torch.index_select(_x(x), 0, _x(idx)).cpu()
    with pytest.raises(IndexError):
        F.embedding(idx, x)
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        F.embedding(_x(idx), _x(x)).cpu()
    ok = idx.clamp(0, 49)
    _close(F.embedding(_x(ok), _x(x)), F.embedding(ok, x), exact=True)
