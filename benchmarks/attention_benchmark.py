"""F.scaled_dot_product_attention on xxnpu: the fused kernels (ops/attention_ops.cc) against
xxnpu's math path (matmul + softmax + matmul, forced with sdpa_kernel(SDPBackend.MATH)) and
against the CPU backend's SDPA, measured in the same run with the same number of threads.

    bazel run --config=opt //benchmarks:attention_benchmark -- [--reps 7] [--dtype float32]
    python benchmarks/attention_benchmark.py [--reps 7] [--dtype float32]   # torch_xxnpu importable

Shapes: the prefill of examples/llama_decode.py (4 prompts padded to its longest, 30 tokens;
8 query heads on 2 kv heads of 32; causal, GQA), and one longer sequence (1 x 2048 tokens,
same heads). Forward (under no_grad) and forward + backward; medians per call.
"""
import argparse

import torch
import torch.nn.functional as F
import torch_xxnpu  # noqa: F401
from benchlib import per_call
from torch.nn.attention import SDPBackend, sdpa_kernel


def make(device, B, H, Hk, L, D, dtype, grad):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, L, D, generator=g).to(dtype)
    k = torch.randn(B, Hk, L, D, generator=g).to(dtype)
    v = torch.randn(B, Hk, L, D, generator=g).to(dtype)
    dout = torch.randn(B, H, L, D, generator=g).to(dtype).to(device)
    ins = [t.to(device).requires_grad_(grad) for t in (q, k, v)]
    return ins, dout


def run(ins, dout, backward):
    if backward:
        out = F.scaled_dot_product_attention(*ins, is_causal=True, enable_gqa=True)
        out.backward(dout)
    else:
        with torch.no_grad():
            F.scaled_dot_product_attention(*ins, is_causal=True, enable_gqa=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    torch.set_num_threads(threads)
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {threads}; {args.dtype}; causal, GQA; "
          f"medians of {args.reps}")
    print(f"{'shape [B, H/Hk, L, D]':<34} {'pass':<9} {'cpu sdpa':>10} {'xx math':>10} {'xx fused':>10} "
          f"{'fused/math':>10} {'fused/cpu':>9}")
    sync = torch.xxnpu.synchronize
    for label, (B, H, Hk, L, D), calls in [("llama_decode prefill", (4, 8, 2, 30, 32), 50),
                                           ("long sequence", (1, 8, 2, 2048, 32), 1)]:
        for backward in (False, True):
            cpu_ins, cpu_dout = make("cpu", B, H, Hk, L, D, dtype, backward)
            x_ins, x_dout = make("xxnpu", B, H, Hk, L, D, dtype, backward)
            t_cpu = per_call(lambda: run(cpu_ins, cpu_dout, backward), lambda: None, calls, args.reps)
            with sdpa_kernel(SDPBackend.MATH):
                t_math = per_call(lambda: run(x_ins, x_dout, backward), sync, calls, args.reps)
            t_fused = per_call(lambda: run(x_ins, x_dout, backward), sync, calls, args.reps)
            shape = f"{label} [{B}, {H}/{Hk}, {L}, {D}]"
            print(f"{shape:<34} {'fwd+bwd' if backward else 'fwd':<9} {t_cpu * 1e6:>8.0f}us {t_math * 1e6:>8.0f}us "
                  f"{t_fused * 1e6:>8.0f}us {t_math / t_fused:>9.2f}x {t_cpu / t_fused:>8.2f}x")


if __name__ == "__main__":
    main()
