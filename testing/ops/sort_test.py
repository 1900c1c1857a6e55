"""sort and topk (ops/index_ops.cc SortRows) against the CPU backend. The kernel turns each
row into (integer key, index) words and sorts those (by radix for full rows, by heap or
selection for topk), so these cases aim at what that encoding could get wrong: NaN (the
largest value, first when descending) among duplicates, -0.0 tying with 0.0, ties in index
order on every path (the CPU's stable order), integer extremes and bool, 8-byte keys (int64,
float64, the (key, index) pair path), rows on both sides of the radix threshold (64),
constant rows (every radix pass skipped), a strided dim (inner > 1), and empty tensors."""
import pytest
import torch

import testlib
import torch_xxnpu  # noqa: F401


@pytest.fixture(autouse=True)
def _no_fallback():
    with testlib.no_fallback():
        yield


def _x(t):
    return t.to("xxnpu")


def _same(got, want, signs=True):
    """Exact values (NaN where NaN), dtypes and shapes; with `signs`, the sign bits too (of
    zeros and NaNs: the sort returns the original elements, so -0.0 stays -0.0)."""
    assert got.device.type == "xxnpu"
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    if signs and want.is_floating_point():
        assert torch.equal(torch.signbit(got), torch.signbit(want)), "the sign of a zero (or NaN) differs"


def _tricky(shape, dtype, seed):
    """Few distinct values (many ties), NaNs, -0.0 and 0.0, infinities."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g).float() * 0.5
    if dtype.is_floating_point:
        pick = torch.randint(0, 10, shape, generator=g)
        x = torch.where(pick == 0, torch.nan, x)
        x = torch.where(pick == 1, -0.0, x)
        x = torch.where(pick == 2, 0.0, x)
        x = torch.where(pick == 3, torch.inf, x)
        x = torch.where(pick == 4, -torch.inf, x)
    return x.to(dtype)


def _ints(shape, dtype, seed):
    """Integers with ties and the type's extremes."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    info = torch.iinfo(dtype)
    x = torch.randint(max(info.min, -6), min(info.max, 6) + 1, shape, generator=g).to(dtype)
    pick = torch.randint(0, 8, shape, generator=g)
    x = torch.where(pick == 0, torch.tensor(info.min, dtype=dtype), x)
    return torch.where(pick == 1, torch.tensor(info.max, dtype=dtype), x)


FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
# Row lengths: 1, under, at and over the radix threshold (64), the benchmark's 1024, a long row.
LENGTHS = [1, 7, 63, 64, 65, 1024, 5000]


def _data(shape, dtype, seed):
    return _tricky(shape, dtype, seed) if dtype.is_floating_point else _ints(shape, dtype, seed)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("n", LENGTHS)
def test_sort_last_dim_matches_cpu_stable_sort_exactly(n, dtype):
    x = _data((3, n), dtype, n)
    for descending in (False, True):
        want_v, want_i = torch.sort(x, dim=-1, descending=descending, stable=True)
        # Our unstable sort orders ties by index too (the CPU's unstable tie order is unspecified).
        for stable in (True, False):
            v, i = torch.sort(_x(x), dim=-1, descending=descending, stable=stable)
            _same(v, want_v)
            _same(i, want_i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_sort_strided_dim_matches_cpu(dtype):
    # inner > 1: dim 0 of a 2-D tensor, the middle dim of a 3-D one (rows gathered with a stride).
    x = _data((300, 5), dtype, 1)
    for descending in (False, True):
        v, i = torch.sort(_x(x), dim=0, descending=descending)
        want_v, want_i = torch.sort(x, dim=0, descending=descending, stable=True)
        _same(v, want_v)
        _same(i, want_i)
    y = _data((4, 70, 3), dtype, 2)
    v, i = torch.sort(_x(y), dim=1, stable=True)
    want_v, want_i = torch.sort(y, dim=1, stable=True)
    _same(v, want_v)
    _same(i, want_i)
    _same(torch.argsort(_x(y), dim=1, descending=True, stable=True), torch.argsort(y, dim=1, descending=True, stable=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sort_random_rows_match_cpu(dtype):
    # Distinct random values: every byte of the float keys differs, so no radix pass is skipped.
    x = torch.randn(64, 1024, generator=torch.Generator().manual_seed(3)).to(dtype)
    v, i = torch.sort(_x(x), -1)
    want_v, want_i = torch.sort(x, dim=-1, stable=True)
    _same(v, want_v)
    _same(i, want_i)


def test_sort_constant_rows_keep_index_order():
    # Every key equal: all radix passes are skipped and the output is the row unchanged.
    for dtype in (torch.float32, torch.int32, torch.bool):
        x = torch.ones(2, 300, dtype=dtype)
        for descending in (False, True):
            v, i = torch.sort(_x(x), dim=-1, descending=descending)
            _same(v, x)
            _same(i, torch.arange(300).expand(2, 300).contiguous())


def test_sort_negative_zero_and_nan_order():
    x = torch.tensor([0.0, -0.0, torch.nan, 1.0, -0.0, -torch.nan, 0.0, -1.0])
    v, i = torch.sort(_x(x))
    assert i.cpu().tolist() == [7, 0, 1, 4, 6, 3, 2, 5]  # zeros tie (index order), NaNs last
    v, i = torch.sort(_x(x), descending=True)
    assert i.cpu().tolist() == [2, 5, 3, 0, 1, 4, 6, 7]  # NaNs first, zeros still in index order
    assert torch.signbit(v.cpu()).tolist() == torch.signbit(x[[2, 5, 3, 0, 1, 4, 6, 7]]).tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.int8], ids=str)
@pytest.mark.parametrize("n", [1, 9, 200, 1000])
def test_topk_matches_cpu_with_ties_in_index_order(n, dtype):
    # k up to the number of 16-key blocks (n = 9: 1, 200: 13, 1000: 63) takes the block-minimum
    # selection (blocks of 64, 32 or 16 keys: n = 200 with k = 1, 3, 8; n = 1000 with k = 8,
    # 14, 63), a larger k < n selection over all words, k = n a full sort.
    x = _data((4, n), dtype, 10 + n)
    for k in sorted({1, min(3, n), min(8, n), min(13, n), min(14, n), min(63, n), min(64, n), min(100, n),
                     max(1, n - 1), n}):
        for largest in (True, False):
            v, i = torch.topk(_x(x), k, -1, largest=largest)
            # The CPU's values are determined up to the sign of tied zeros (its tie order is
            # unspecified; ours is the stable sort's).
            want_v, want_i = torch.sort(x, dim=-1, descending=largest, stable=True)
            _same(v, torch.topk(x, k, -1, largest=largest).values, signs=False)
            _same(v, want_v[:, :k])
            _same(i, want_i[:, :k])
            v, i = torch.topk(_x(x), k, -1, largest=largest, sorted=False)  # sorted anyway
            _same(i, want_i[:, :k])


def test_topk_strided_dim_matches_cpu():
    x = _tricky((120, 6), torch.float32, 4)
    for k in (5, 20):  # block-minimum selection (8 blocks), selection over all words
        v, i = torch.topk(_x(x), k, 0)
        want_v, want_i = torch.sort(x, dim=0, descending=True, stable=True)
        _same(v, want_v[:k])
        _same(i, want_i[:k])


def test_topk_random_rows_match_cpu():
    # Distinct values (few candidates under the block bound), the benchmark's shape.
    x = torch.randn(64, 1024, generator=torch.Generator().manual_seed(5))
    for k in (1, 8, 63):
        for largest in (True, False):
            v, i = torch.topk(_x(x), k, -1, largest=largest)
            want_v, want_i = torch.topk(x, k, -1, largest=largest)
            _same(v, want_v)
            _same(i, want_i)


def test_sort_and_topk_empty_and_scalar():
    for shape in [(0,), (0, 5), (3, 0)]:
        x = torch.empty(shape)
        v, i = torch.sort(_x(x), -1)
        _same(v, x)
        _same(i, torch.empty(shape, dtype=torch.long))
    v, i = torch.topk(_x(torch.randn(3, 5)), 0, -1)
    assert v.shape == (3, 0) and i.shape == (3, 0)
    s = torch.tensor(2.5)
    v, i = torch.sort(_x(s))
    _same(v, s)
    _same(i, torch.tensor(0))
    v, i = torch.topk(_x(s), 1)
    _same(v, s)
    _same(i, torch.tensor(0))


def test_topk_k_out_of_range_raises():
    x = _x(torch.randn(3, 5))
    with pytest.raises(RuntimeError, match="k"):
        torch.topk(x, 6, -1)
    with pytest.raises(RuntimeError, match="k"):
        torch.topk(x, -1, -1)
    with pytest.raises(RuntimeError, match="bool"):  # as on the CPU
        torch.topk(_x(torch.ones(3, dtype=torch.bool)), 1)
