"""torch.ops.xxnpu LLM ops (ops/llm_ops.cc): the xxnpu kernels against the CPU reference
kernels (plain ATen), measured in the same run with the same number of threads.

    bazel run --config=opt //benchmarks:llm_ops_benchmark -- [--reps 5] [--dtype float32]
    python benchmarks/llm_ops_benchmark.py [--reps 5] [--dtype float32]   # torch_xxnpu importable

Shapes of a Llama-3-8B-like layer (hidden 4096, 32 query / 8 kv heads of 128, ffn 14336):
a decode step of 8 sequences with 1024 tokens of context, and a prefill of 2048 tokens.
Reports medians per call, the xxnpu/cpu throughput ratio, and the bytes the xxnpu kernel
moves per second (its LaunchConfig bytes / time).
"""
import argparse

import torch
import torch_xxnpu  # noqa: F401
from benchlib import per_call

xx = torch.ops.xxnpu


def cases(dtype):
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    H, KVH, D, hidden, ffn = 32, 8, 128, 4096, 14336
    esz = torch.empty(0, dtype=dtype).element_size()
    out = []
    for name, T in [("decode 8", 8), ("prefill 2048", 2048)]:
        x, w = r(T, hidden), r(hidden)
        out.append((f"rms_norm [{T}, {hidden}]", name, lambda x=x, w=w: (xx.rms_norm, (x, w, 1e-6)),
                    (2 * T * hidden + hidden) * esz))
        out.append((f"fused_add_rms_norm [{T}, {hidden}]", name,
                    lambda x=x, w=w: (xx.fused_add_rms_norm, (x.clone(), x.clone(), w, 1e-6)),
                    (5 * T * hidden + hidden) * esz))
        pos = torch.randint(0, 4096, (T,), generator=g)
        cache = torch.randn(4096, D, generator=g)
        q, k = r(T, H * D), r(T, KVH * D)
        out.append((f"rotary_embedding_ q [{T}, {H}x{D}]", name,
                    lambda pos=pos, q=q, k=k, cache=cache: (xx.rotary_embedding_, (pos, q.clone(), k.clone(), D, cache,
                                                                                   True)),
                    2 * T * (H + KVH) * D * esz + T * D * 4))
        Tm = min(T, 512)
        a = r(Tm, 2 * ffn)
        out.append((f"silu_and_mul [{Tm}, 2x{ffn}]", name, lambda a=a: (xx.silu_and_mul, (a,)), 3 * Tm * ffn * esz))
        kv = r(T, KVH, D)
        nb = (T + 15) // 16 + 4
        slots = torch.randperm(nb * 16, generator=g)[:T]
        kc = torch.zeros(nb, 16, KVH, D, dtype=dtype)
        out.append((f"reshape_and_cache {T} tokens", name,
                    lambda kv=kv, kc=kc, slots=slots: (xx.reshape_and_cache, (kv, kv, kc, kc.clone(), slots)),
                    4 * T * KVH * D * esz))
    S, ctx, BS = 8, 1024, 16
    M = ctx // BS
    kc, vc = r(S * M, BS, KVH, D), r(S * M, BS, KVH, D)
    tables = torch.randperm(S * M, generator=g).reshape(S, M).int()
    lens = torch.full((S,), ctx, dtype=torch.int32)
    q = r(S, H, D)
    out.append((f"paged_attention {S} seqs x {ctx} ctx, {H}/{KVH} heads", "decode 8",
                lambda: (xx.paged_attention, (q, kc, vc, tables, lens, D ** -0.5)),
                (2 * S * H * D + 2 * S * KVH * ctx * D) * esz))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    torch.set_num_threads(threads)
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {threads}; {args.dtype}; medians of {args.reps}")
    print(f"{'op':<52} {'cpu ref':>10} {'xxnpu':>10} {'xxnpu/cpu':>9} {'xxnpu GB/s':>10}")
    for label, phase, make, nbytes in cases(dtype):
        op, cpu_args = make()
        dev_args = tuple(a.to("xxnpu") if isinstance(a, torch.Tensor) else a for a in cpu_args)
        calls = 20 if phase.startswith("decode") else 3
        t_cpu = per_call(lambda: op(*cpu_args), lambda: None, calls, args.reps)
        t_x = per_call(lambda: op(*dev_args), torch.xxnpu.synchronize, calls, args.reps)
        print(f"{label + ' (' + phase + ')':<52} {t_cpu * 1e6:>8.0f}us {t_x * 1e6:>8.0f}us {t_cpu / t_x:>8.2f}x "
              f"{nbytes / t_x / 1e9:>10.2f}")


if __name__ == "__main__":
    main()
