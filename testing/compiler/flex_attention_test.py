"""FlexAttention on xxnpu (python/torch_xxnpu/compiler/flex_attention.py, docs/compile.md,
"FlexAttention"): torch.compile(flex_attention) becomes one xxnpu device kernel from
Inductor's C++ template, its at::parallel_for on the device's compute threads, against the
CPU's compiled result; the uncompiled reference path; what is refused and how.

Runs with XXNPU_STRICT_MEMORY=1 (BUILD): a kernel that touched device memory from the host
thread would fault. Before torch_xxnpu's changes every call here raised "FlexAttention is
only supported on CUDA, CPU, HPU, or MPS devices".
"""
import os
import re
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_flex_attention_test_")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_xxnpu  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch._dynamo  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    torch_xxnpu.ops.reset_fallback_counts()
    yield
    torch.xxnpu.synchronize()


def _relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.01


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _qkv(shape_q, shape_kv, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(shape_q, generator=g).to(dtype), torch.randn(shape_kv, generator=g).to(dtype),
            torch.randn(shape_kv, generator=g).to(dtype))


def _on_xxnpu(*tensors):
    return [t.to("xxnpu") for t in tensors]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_score_mod_is_one_device_kernel_matching_the_cpu(dtype):
    # 2 x 4 heads x 256 queries: 8 work items, more than the compute threads (while the
    # device has fewer than 8), so every thread's scratch slot is used.
    q, k, v = _qkv((2, 4, 256, 64), (2, 4, 256, 64), dtype)
    want = torch.compile(flex_attention)(q, k, v, score_mod=_relative_bias)
    compiled = torch.compile(flex_attention)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        got, (code,) = run_and_get_code(compiled, *_on_xxnpu(q, k, v), score_mod=_relative_bias)
        torch.xxnpu.synchronize()
    assert got.device.type == "xxnpu" and got.dtype == dtype
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert sum("flex_attention" in k for k in kernels) == 1, kernels
    # The template's parallel loops are the device's, sized for its thread count.
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    assert f"xxnpu_device::aten_parallel_for<{threads}>(" in code
    assert f"int64_t num_thread = {threads};" in code  # the scratch is sized for the same count
    assert "at::parallel_for(" not in code and "at::get_thread_num()" not in code
    assert torch_xxnpu.ops.fallback_counts() == {}


def test_compiled_block_mask_made_on_xxnpu_matches_the_cpu():
    q, k, v = _qkv((2, 4, 256, 32), (2, 4, 256, 32))
    want = torch.compile(flex_attention)(q, k, v, block_mask=create_block_mask(_causal, 2, 1, 256, 256, device="cpu"))
    mask = create_block_mask(_causal, 2, 1, 256, 256, device="xxnpu")
    got = torch.compile(flex_attention)(*_on_xxnpu(q, k, v), block_mask=mask)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_compiled_decode_with_grouped_query_heads_matches_the_cpu():
    # One query against 1024 cached keys under a block mask, 8 query heads over 2 kv heads:
    # the template's decode variant (its own scratch and two parallel loops), which it picks
    # only with a kv block size dividing its partition and >= 512 keys per batch item.
    q, k, v = _qkv((1, 8, 1, 64), (1, 2, 1024, 64))

    def first_1000(b, h, q_idx, kv_idx):
        return kv_idx < 1000

    want = torch.compile(flex_attention)(q, k, v, block_mask=create_block_mask(first_1000, 1, 1, 1, 1024, device="cpu"),
                                         enable_gqa=True)
    mask = create_block_mask(first_1000, 1, 1, 1, 1024, device="xxnpu")
    got, (code,) = run_and_get_code(torch.compile(flex_attention), *_on_xxnpu(q, k, v), block_mask=mask,
                                    enable_gqa=True)
    assert "PARTITION_SIZE" in code  # the decode template
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_generated_kernels_keep_mkl_on_one_thread():
    # The bfloat16 template calls MKL's bf16 GEMM (brgemm's fallback without AMX) from the
    # device's threads; left alone MKL starts an OpenMP team per call on cores the device does
    # not own (NThr:2 in MKL's log before the launcher kept it single-threaded).
    import subprocess
    import sys

    code = (
        "import torch, torch_xxnpu\n"
        "from torch.nn.attention.flex_attention import flex_attention\n"
        "q = torch.randn(2, 4, 256, 64, dtype=torch.bfloat16, device='xxnpu')\n"
        "torch.compile(flex_attention)(q, q, q); torch.xxnpu.synchronize()\n"
    )
    env = dict(os.environ, MKL_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    threads = re.findall(r"NThr:(\d+)", out.stdout)
    # No MKL call at all is fine (another BLAS, or AMX's brgemm); every call made is 1 thread.
    assert set(threads) <= {"1"}, sorted(set(threads))


def test_cpp_wrapper_matches_the_cpu():
    q, k, v = _qkv((1, 2, 64, 32), (1, 2, 64, 32))
    want = torch.compile(flex_attention)(q, k, v, score_mod=_relative_bias)
    got = torch.compile(flex_attention, options={"cpp_wrapper": True})(*_on_xxnpu(q, k, v), score_mod=_relative_bias)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_uncompiled_flex_attention_runs_on_xxnpu_as_on_the_cpu():
    q, k, v = _qkv((1, 2, 64, 32), (1, 2, 64, 32))
    got = flex_attention(*_on_xxnpu(q, k, v), score_mod=_relative_bias)
    assert got.device.type == "xxnpu"
    torch.testing.assert_close(got.cpu(), flex_attention(q, k, v, score_mod=_relative_bias), rtol=1e-5, atol=1e-5)


def test_backward_and_return_lse_are_refused_naming_the_limit():
    q, k, v = _on_xxnpu(*_qkv((1, 2, 64, 32), (1, 2, 64, 32)))
    with pytest.raises(NotImplementedError, match="does not support backward on xxnpu"):
        flex_attention(q.clone().requires_grad_(), k, v)
    with pytest.raises(Exception, match="inference only"):
        torch.compile(flex_attention)(q, k, v, return_lse=True)


def test_template_threading_the_device_cannot_map_is_refused():
    # _DeviceAtenParallel maps at::parallel_for and at::get_thread_num; anything else of
    # ATen's or OpenMP's threading in a template would run outside the device: refused at
    # code generation, naming it.
    from torch_xxnpu.compiler.inductor import _DeviceAtenParallel

    class Rendering:
        _xxnpu_aten_threads = 2

    src = "at::parallel_for(0, n, 1, [&](int64_t b, int64_t e) { f(at::get_thread_num()); });"
    assert _DeviceAtenParallel.rewrite(Rendering(), src) == (
        "xxnpu_device::aten_parallel_for<2>(0, n, 1, [&](int64_t b, int64_t e) { f(xxnpu_device::aten_thread_num()); });"
    )
    with pytest.raises(NotImplementedError, match="omp_get_num_threads"):
        _DeviceAtenParallel.rewrite(Rendering(), src + " int t = omp_get_num_threads();")
