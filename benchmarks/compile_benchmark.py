"""torch.compile on xxnpu vs eager xxnpu and compiled CPU (docs/compile.md, "Cost").

Workloads, each run on the CPU then on xxnpu in one process, same thread count (the
CPU's intra-op threads = the device's compute threads):
- elementwise chain on 1M floats (one fused kernel);
- MLP forward + backward (256 -> 1024 -> 256, batch 64), no optimizer;
- MLP training step: Linear-GELU-Linear 1024, batch 256 x 1024, AdamW; compiled = the
  forward + loss (so AOTAutograd compiles the backward) and ``torch.compile(opt.step)``;
- the Llama-style model of examples/llama_decode.py (its default config and batch of 4
  prompts): prefill (74 tokens) and greedy decode, eager vs ``Model.forward`` compiled
  (``dynamic=False``: one graph for the prefill, one for the decode step, whose shapes do
  not change across positions since the KV cache is paged; the benchmark asserts that the
  timed decode compiled nothing more);
- flex attention (``--workloads flex``, not in the default set): causal block mask, 2 x 8
  heads x 512 x 64, compiled (Inductor's C++ template) vs the uncompiled reference path.

For each: the first call's time (compile included; a fresh Inductor cache per run,
Dynamo/Inductor imported and a throwaway graph compiled on each device beforehand, so no
row pays Inductor's one-off start-up), then medians of the eager and compiled times per
call. Compiled results are checked against eager before anything is timed (allclose;
the Llama tokens must be equal), so a wrong compile cannot produce a figure. The last
table gives the same-run ratios against the issue's goals.

    bazel run --config=opt //benchmarks:compile_benchmark -- [--reps 5] [--workloads chain,mlp,train,llama,flex]
        [--llama-configs 256x4x2048,128x2x512] [--devices xxnpu,cpu] [--profile] [--xxnpu-mode reduce-overhead]
    --xxnpu-mode reduce-overhead: xxnpu's compiled rows replay xxnpu graphs (the CPU's stay default)
    --profile: also profile compiled and eager Llama decode steps on xxnpu (where the time goes)
    --prefill-matmuls: only the prefill's linear layers against a 2048^3 sgemm (GFLOP/s)
"""
import argparse
import copy
import importlib.util
import os
import statistics
import tempfile
import time

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_compile_bench_")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._inductor.compile_fx  # noqa: E402,F401  (imports outside the timed first call)
import torch_xxnpu  # noqa: E402,F401

from benchlib import per_call  # noqa: E402

DEVICES = ("cpu", "xxnpu")
LLAMA_PROMPTS = [21, 9, 14, 30]
# torch.compile's mode for xxnpu (--xxnpu-mode); the CPU always compiles with the default
# (reduce-overhead does nothing there: Inductor graphs only CUDA and, with torch_xxnpu, xxnpu).
XXNPU_MODE = {"mode": None}


def _compile(fn, dev, **kw):
    return torch.compile(fn, mode=XXNPU_MODE["mode"] if dev == "xxnpu" else None, **kw)


def _graphed(dev):
    return dev == "xxnpu" and XXNPU_MODE["mode"] == "reduce-overhead"


def _sync(dev):
    return torch.xxnpu.synchronize if dev == "xxnpu" else (lambda: None)


def _first_call(fn, dev):
    t0 = time.perf_counter()
    out = fn()
    _sync(dev)()
    return time.perf_counter() - t0, out


def _check(name, got, want, rtol, atol):
    for g, w in zip(got, want):
        g, w = g.detach().cpu().float(), w.detach().cpu().float()
        if not torch.allclose(g, w, rtol=rtol, atol=atol):
            raise AssertionError(f"{name}: compiled differs from eager, max |diff| {(g - w).abs().max().item():.3e}")


def chain(x, y):
    return ((x + y) * 2).relu() - y.sigmoid()


def bench_chain(dev, reps):
    x, y = torch.randn(1_000_000, device=dev), torch.randn(1_000_000, device=dev)
    compiled = _compile(chain, dev)
    first, out = _first_call(lambda: compiled(x, y), dev)
    _check("chain", [out], [chain(x, y)], 1e-5, 1e-6)
    return dict(first=first, eager=per_call(lambda: chain(x, y), _sync(dev), 5, reps),
                compiled=per_call(lambda: compiled(x, y), _sync(dev), 5, reps))


def bench_flex(dev, reps):
    """flex_attention with a causal block mask, 2 x 8 heads x 512 tokens x 64, float32:
    compiled (Inductor's C++ template; on xxnpu one device kernel) against the uncompiled
    reference path (ATen ops, what torch runs without compile)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 8, 512, 64, generator=g).to(dev) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, kv: qi >= kv, 2, 1, 512, 512, device=dev)
    compiled = _compile(flex_attention, dev)
    first, out = _first_call(lambda: compiled(q, k, v, block_mask=mask), dev)
    _check("flex attention", [out], [flex_attention(q, k, v, block_mask=mask)], 1e-4, 1e-5)
    return dict(first=first, eager=per_call(lambda: flex_attention(q, k, v, block_mask=mask), _sync(dev), 2, reps),
                compiled=per_call(lambda: compiled(q, k, v, block_mask=mask), _sync(dev), 3, reps))


def bench_mlp(dev, reps):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).to(dev)
    batch = torch.randn(64, 256, device=dev)
    cmlp = _compile(mlp, dev)

    def grads(model):
        mlp.zero_grad(set_to_none=True)
        model(batch).square().mean().backward()
        return [p.grad.clone() for p in mlp.parameters()]

    first, got = _first_call(lambda: grads(cmlp), dev)
    _check("MLP fwd+bwd", got, grads(mlp), 1e-4, 1e-5)
    return dict(first=first, eager=per_call(lambda: mlp(batch).square().mean().backward(), _sync(dev), 3, reps),
                compiled=per_call(lambda: cmlp(batch).square().mean().backward(), _sync(dev), 3, reps))


def bench_train(dev, reps):
    """Linear-GELU-Linear 1024, batch 256, AdamW (kernels_benchmark.py's mlp_step)."""
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024))
    x = torch.randn(256, 1024).to(dev)

    def make():
        model = copy.deepcopy(base).to(dev)
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    eager_model, eager_opt = make()
    comp_model, comp_opt = make()
    loss = _compile(lambda inp: comp_model(inp).square().mean(), dev)
    opt_step = _compile(comp_opt.step, dev)

    def eager_step():
        eager_opt.zero_grad(set_to_none=True)
        eager_model(x).square().mean().backward()
        eager_opt.step()

    def compiled_step():
        comp_opt.zero_grad(set_to_none=True)
        loss(x).backward()
        opt_step()

    # Two steps each from the same weights: the second uses AdamW's state from the first.
    first, _ = _first_call(compiled_step, dev)
    compiled_step()
    eager_step()
    eager_step()
    _check("MLP training step", list(comp_model.parameters()), list(eager_model.parameters()), 1e-4, 1e-5)
    return dict(first=first, eager=per_call(eager_step, _sync(dev), 3, reps),
                compiled=per_call(compiled_step, _sync(dev), 3, reps))


def _llama_decode():
    # examples/llama_decode.py, a data dependency of this target (graph_benchmark does the same).
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("llama_decode", os.path.join(here, "..", "examples",
                                                                               "llama_decode.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _graphs_compiled():
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def bench_llama(dev, reps, new_tokens, size, profile=False):
    """Returns (prefill row, decode row, graphs compiled, first prefill + decode seconds):
    rows in seconds per prefill and per decode step (all sequences of the batch). size:
    (hidden, layers, vocab)."""
    ld = _llama_decode()
    hidden, layers, vocab = size
    cfg = ld.Config(hidden=hidden, layers=layers, vocab=vocab)
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, cfg.vocab, (n,), generator=gen) for n in LLAMA_PROMPTS]
    sched = ld.Schedule(cfg, LLAMA_PROMPTS, new_tokens, 2)
    weights = ld.make_weights(cfg, 0)
    f32 = torch.float32
    eager = ld.Model(cfg, weights, torch.device(dev), f32)
    compiled = ld.Model(cfg, weights, torch.device(dev), f32)
    # The model's step function compiled: run() calls model.forward for the prefill and for
    # every decode step. Shapes are fixed per phase (the paged cache and the block tables do
    # not grow with the position): dynamic=False gives one static graph for each phase.
    compiled.forward = _compile(compiled.forward, dev, dynamic=False)
    if _graphed(dev):
        # As with CUDA graphs: tensors that are not parameters or buffers of an nn.Module
        # are copied into the graph's buffers at every call unless marked static. The
        # weights are the model's for good, and the KV cache is allocated once and reused
        # (zeroed) by every run, as a serving engine does; the graph writes into it.
        for t in list(compiled.w.values()) + [compiled.cos_sin_cache]:
            torch._dynamo.mark_static_address(t)
        new_kv_cache, kept = compiled.new_kv_cache, {}

        def static_kv_cache(num_blocks, dtype):
            if (num_blocks, dtype) not in kept:
                kept[num_blocks, dtype] = new_kv_cache(num_blocks, dtype)
                for k, v in kept[num_blocks, dtype]:
                    torch._dynamo.mark_static_address(k)
                    torch._dynamo.mark_static_address(v)
            for k, v in kept[num_blocks, dtype]:
                k.zero_()
                v.zero_()
            return kept[num_blocks, dtype]

        compiled.new_kv_cache = static_kv_cache

    graphs0 = _graphs_compiled()
    t0 = time.perf_counter()
    _, _, first_prefill, first_decode, _ = ld.run(compiled, prompts, sched, 2, f32)  # prefill + 1 decode step
    first_total = time.perf_counter() - t0
    graphs_first = _graphs_compiled() - graphs0

    ld.run(eager, prompts, sched, 2, f32)  # warm-up
    want_tokens, want_logits, *_ = ld.run(eager, prompts, sched, new_tokens, f32)
    got_tokens, got_logits, *_ = ld.run(compiled, prompts, sched, new_tokens, f32)
    if not torch.equal(got_tokens, want_tokens):
        raise AssertionError(f"Llama on {dev}: the compiled model's tokens differ from the eager model's")
    _check(f"Llama logits on {dev}", got_logits, want_logits, 1e-3, 1e-3)

    e_pre, e_dec, c_pre, c_dec = [], [], [], []
    for _ in range(reps):  # eager and compiled alternate: both see the same machine load
        r = ld.run(eager, prompts, sched, new_tokens, f32)
        e_pre.append(r[2])
        e_dec.append(r[3])
        r = ld.run(compiled, prompts, sched, new_tokens, f32)
        c_pre.append(r[2])
        c_dec.append(r[3])
    graphs = _graphs_compiled() - graphs0
    if graphs != graphs_first:
        raise AssertionError(f"Llama on {dev}: {graphs - graphs_first} recompiles during the timed decode")
    steps = new_tokens - 1
    prefill = dict(first=first_prefill, eager=statistics.median(e_pre), compiled=statistics.median(c_pre))
    decode = dict(first=first_decode, eager=statistics.median(e_dec) / steps, compiled=statistics.median(c_dec) / steps)
    if profile and dev == "xxnpu":
        for name, model in (("compiled", compiled), ("eager", eager)):
            profile_decode_step(ld, model, prompts, sched, name, f"{hidden}x{layers}x{vocab}")
    return prefill, decode, graphs, first_total


def profile_decode_step(ld, model, prompts, sched, label, size, steps=4):
    """torch.profiler over `steps` decode steps on xxnpu (after a prefill, outside the
    profile): per step, the wall time, device time by kind of kernel, and host time."""
    from torch.profiler import ProfilerActivity, profile

    dev = model.device
    kv = model.new_kv_cache(sched.num_blocks, torch.float32)
    inputs, last = sched.prefill()
    with torch.no_grad():
        args = {k: v.to(dev) for k, v in inputs.items()}
        tok = model.forward(torch.cat(prompts).to(dev), **args, kv_cache=kv, last=last.to(dev)).argmax(-1)
        step_args = [{k: v.to(dev) for k, v in sched.decode(i).items()} for i in range(steps)]
        torch.xxnpu.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            t0 = time.perf_counter()
            for a in step_args:
                tok = model.forward(tok, **a, kv_cache=kv).argmax(-1)
            torch.xxnpu.synchronize()
            wall = time.perf_counter() - t0
    kinds = {"generated (cpp_*)": 0.0, "matmul (xxnpu::mm/addmm)": 0.0, "LLM ops (xxnpu custom ops)": 0.0,
             "other native": 0.0}
    llm = ("rms_norm", "rotary", "reshape_and_cache", "paged_attention", "silu_and_mul")
    per_kernel = {}  # name -> [device us, count]
    host_region = 0.0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            # The host's time in the model's step: the compiled region, or every top-level
            # op of the eager step.
            if e.name.startswith("Torch-Compiled Region") or (label == "eager" and e.cpu_parent is None):
                host_region += e.cpu_time_total
            continue
        # A device kernel (its row on an xxnpu stream).
        t = e.device_time_total
        acc = per_kernel.setdefault(e.name, [0.0, 0])
        acc[0] += t
        acc[1] += 1
        if e.name.startswith("cpp_"):
            kinds["generated (cpp_*)"] += t
        elif e.name in ("xxnpu::mm", "xxnpu::addmm", "xxnpu::bmm"):
            kinds["matmul (xxnpu::mm/addmm)"] += t
        elif any(w in e.name for w in llm):
            kinds["LLM ops (xxnpu custom ops)"] += t
        else:
            kinds["other native"] += t
    per_kernel = [(t, name, count) for name, (t, count) in per_kernel.items()]
    device = sum(kinds.values())
    print(f"\nprofile, {label} Llama {size} decode step on xxnpu (mean of {steps} steps, under torch.profiler):")
    print(f"  wall {wall / steps * 1e3:.3f} ms per step; device busy {device / steps / 1e3:.3f} ms "
          f"({device / 1e3 / (wall * 1e3) * 100:.0f}% of wall); host in the step's ops "
          f"{host_region / steps / 1e3:.3f} ms")
    for k, t in kinds.items():
        print(f"    {k:30s} {t / steps / 1e3:8.3f} ms")
    print(f"  kernels per step: {sum(c for _, _, c in per_kernel) / steps:.0f}; top by device time:")
    for t, key, count in sorted(per_kernel, reverse=True)[:8]:
        print(f"    {key[:48]:48s} x{count / steps:<4g} {t / steps / 1e3:8.3f} ms")


def prefill_matmul_limit(reps):
    """What bounds the compiled Llama prefill: its linear layers' speed on xxnpu and on the
    CPU backend against a 2048^3 sgemm (the machine's matmul limit), GFLOP/s. Compiled and
    eager prefill run the same xxnpu::mm kernels, so these are the same either way."""
    import torch.nn.functional as F

    ld = _llama_decode()
    cfg = ld.Config()
    tokens = sum(LLAMA_PROMPTS)
    qkv = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
    shapes = [(tokens, cfg.hidden, qkv), (tokens, cfg.hidden, cfg.hidden), (tokens, cfg.hidden, 2 * cfg.ffn),
              (tokens, cfg.ffn, cfg.hidden), (2048, 2048, 2048)]
    print(f"\nprefill matmuls (x @ W^T, float32), GFLOP/s, medians of {reps}:")
    print(f"{'M x K x N':>18s} {'xxnpu':>8s} {'cpu':>8s}")
    for m, k, n in shapes:
        row = []
        for dev in ("xxnpu", "cpu"):
            x, w = torch.randn(m, k, device=dev), torch.randn(n, k, device=dev)
            calls = 3 if m * k * n >= 2048 ** 3 else 50
            row.append(2 * m * k * n / per_call(lambda: F.linear(x, w), _sync(dev), calls, reps) / 1e9)
        print(f"{m:6d} x {k:4d} x {n:4d} {row[0]:8.1f} {row[1]:8.1f}")


def warm_up_inductor():
    """One throwaway compile per device: Inductor's one-off start-up (its C++ toolchain
    probe, headers) is then not in the first row's first-call time."""
    for dev in DEVICES:
        torch._dynamo.reset()
        x = torch.randn(8, device=dev)
        torch.compile(lambda t: t.cos() + 1)(x)
        _sync(dev)()
    torch._dynamo.reset()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5, help="timed repetitions (medians are reported)")
    p.add_argument("--new-tokens", type=int, default=32, help="Llama: tokens per sequence (prefill's included)")
    p.add_argument("--workloads", default="chain,mlp,train,llama")
    p.add_argument("--devices", default="cpu,xxnpu",
                   help="the order the devices run in (the second may reuse what the first's compiles "
                        "warmed up: swap it to see the first-call ratio from the other side, or give one "
                        "device per process)")
    p.add_argument("--llama-configs", default="256x4x2048",
                   help="Llama sizes, comma separated HIDDENxLAYERSxVOCAB (default: llama_decode.py's; "
                        "128x2x512 is its test's, more host-bound)")
    p.add_argument("--xxnpu-mode", choices=["default", "reduce-overhead"], default="default",
                   help="torch.compile's mode on xxnpu (reduce-overhead: compiled graphs replayed as xxnpu "
                        "graphs); the CPU compiles with the default")
    p.add_argument("--prefill-matmuls", action="store_true",
                   help="only measure the Llama prefill's matmuls against a 2048^3 sgemm (what bounds a "
                        "compiled prefill), and exit")
    p.add_argument("--profile", action="store_true",
                   help="profile a compiled and an eager Llama decode step on xxnpu (where the time goes)")
    args = p.parse_args()
    XXNPU_MODE["mode"] = None if args.xxnpu_mode == "default" else args.xxnpu_mode
    work = args.workloads.split(",")
    unknown = set(work) - {"chain", "mlp", "train", "llama", "flex"}
    if unknown:
        p.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    torch.set_num_threads(threads)
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {threads}; load average {os.getloadavg()[0]:.2f} at start; "
          f"xxnpu compiles with mode={args.xxnpu_mode}")
    if args.prefill_matmuls:
        prefill_matmul_limit(args.reps)
        return
    warm_up_inductor()

    rows = {}  # workload -> device -> dict(first, eager, compiled)
    notes = []
    devices = args.devices.split(",")
    if not devices or not set(devices) <= set(DEVICES) or len(set(devices)) != len(devices):
        p.error("--devices: cpu and/or xxnpu, in some order")
    for dev in devices:
        for w in work:
            torch._dynamo.reset()
            if w == "chain":
                rows.setdefault("elementwise chain 1M", {})[dev] = bench_chain(dev, args.reps)
            elif w == "mlp":
                rows.setdefault("MLP fwd+bwd 64x256", {})[dev] = bench_mlp(dev, args.reps)
            elif w == "train":
                rows.setdefault("MLP train step AdamW 256x1024", {})[dev] = bench_train(dev, args.reps)
            elif w == "flex":
                rows.setdefault("flex attention causal 2x8x512x64", {})[dev] = bench_flex(dev, args.reps)
            else:
                for c in args.llama_configs.split(","):
                    size = tuple(int(v) for v in c.split("x"))
                    torch._dynamo.reset()
                    prefill, decode, graphs, first = bench_llama(dev, args.reps, args.new_tokens, size,
                                                                 args.profile)
                    n_pre = sum(LLAMA_PROMPTS)
                    rows.setdefault(f"Llama {c} prefill ({n_pre} tok)", {})[dev] = dict(prefill, tokens=n_pre)
                    rows.setdefault(f"Llama {c} decode (x{len(LLAMA_PROMPTS)})", {})[dev] = dict(
                        decode, tokens=len(LLAMA_PROMPTS))
                    notes.append(f"Llama {c} {dev}: {graphs} graphs compiled (prefill, decode step), no recompile "
                                 f"over {args.new_tokens - 1} decode positions x {args.reps + 2} runs; first "
                                 f"prefill + decode step {first:.1f} s")

    print(f"\nmedians of {args.reps}; load average {os.getloadavg()[0]:.2f} at end")
    print(f"{'workload':32s} {'device':6s} {'first s':>8s} {'eager ms':>10s} {'compiled ms':>12s} "
          f"{'comp/eager':>10s} {'eager tok/s':>12s} {'comp tok/s':>11s}")
    for name, by_dev in rows.items():
        for dev, r in by_dev.items():
            tps = (f"{r['tokens'] / r['eager']:12.0f} {r['tokens'] / r['compiled']:11.0f}" if "tokens" in r else "")
            print(f"{name:32s} {dev:6s} {r['first']:8.2f} {r['eager'] * 1e3:10.3f} {r['compiled'] * 1e3:12.3f} "
                  f"{r['eager'] / r['compiled']:10.2f} {tps}")
    print("\nsame-run ratios (goals: compiled xxnpu >= 1.5x eager xxnpu, >= 0.9x compiled CPU; "
          "first call <= 1.2x the CPU's)")
    print(f"{'workload':32s} {'vs eager xxnpu':>15s} {'vs compiled CPU':>16s} {'first call / CPU':>17s}")
    for name, by_dev in rows.items():
        c, x = by_dev.get("cpu"), by_dev.get("xxnpu")
        if c is None or x is None:
            continue
        print(f"{name:32s} {x['eager'] / x['compiled']:14.2f}x {c['compiled'] / x['compiled']:15.2f}x "
              f"{x['first'] / c['first']:16.2f}x")
    for n in notes:
        print(n)


if __name__ == "__main__":
    main()
