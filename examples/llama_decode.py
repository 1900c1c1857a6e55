"""A small Llama-style decoder served vLLM-style on xxnpu, checked against the CPU.

Random weights from a fixed seed; grouped-query attention, rotary embeddings (NeoX
style), RMSNorm and a SwiGLU MLP. A batch of prompts of different lengths is prefilled,
then N tokens are decoded greedily, with the keys and values in a paged KV cache
(blocks handed out from a shuffled pool, as a serving engine would). Every LLM-specific
step is a torch.ops.xxnpu custom op (ops/llm_ops.cc):

    rms_norm, fused_add_rms_norm    the norms (the residual add fused into the next norm)
    rotary_embedding                RoPE on q and k
    reshape_and_cache               k, v of the new tokens into their cache slots
    paged_attention                 attention over the paged cache (the prefill is the
                                    same op with one query per prompt token: causal)
    silu_and_mul                    SwiGLU's gate

and the rest is plain torch (embedding, linear, argmax). The same model code runs on the
CPU (where the custom ops run their CPU reference kernels): the script compares the
logits and tokens of the two runs, times the decode of both in the same process with the
same thread count, and lists the aten ops of the decode step that still fell back to
the CPU (torch_xxnpu.ops.fallback_counts()).

    python examples/llama_decode.py [--new-tokens 32] [--dtype float32] [--require-native-decode]

Exit status: 0 when xxnpu matches the CPU (and, with --require-native-decode, the decode
step had no CPU fallback); 1 otherwise.
"""
import argparse
import dataclasses
import math
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F

import torch_xxnpu  # noqa: F401  (registers the xxnpu device and torch.ops.xxnpu)


@dataclasses.dataclass
class Config:
    vocab: int = 2048
    hidden: int = 256
    layers: int = 4
    heads: int = 8
    kv_heads: int = 2
    head_dim: int = 32
    ffn: int = 704
    max_positions: int = 1024
    rope_theta: float = 10000.0
    eps: float = 1e-5
    block_size: int = 16


def make_weights(cfg: Config, seed: int):
    """float32 CPU weights, N(0, 1/fan_in): activations stay O(1) through the layers."""
    g = torch.Generator().manual_seed(seed)

    def linear(out_f, in_f):
        return torch.randn(out_f, in_f, generator=g) / math.sqrt(in_f)

    def norm(n):
        return 1.0 + 0.1 * torch.randn(n, generator=g)

    qkv = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
    w = {"embed": torch.randn(cfg.vocab, cfg.hidden, generator=g), "final_norm": norm(cfg.hidden),
         "lm_head": linear(cfg.vocab, cfg.hidden)}
    for i in range(cfg.layers):
        w[f"{i}.attn_norm"] = norm(cfg.hidden)
        w[f"{i}.qkv"] = linear(qkv, cfg.hidden)
        w[f"{i}.o"] = linear(cfg.hidden, cfg.heads * cfg.head_dim)
        w[f"{i}.mlp_norm"] = norm(cfg.hidden)
        w[f"{i}.gate_up"] = linear(2 * cfg.ffn, cfg.hidden)
        w[f"{i}.down"] = linear(cfg.hidden, cfg.ffn)
    return w


def rope_cache(cfg: Config):
    """[max_positions, head_dim] = [cos | sin] of position * inverse frequency (float32)."""
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim))
    angles = torch.arange(cfg.max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float()


class Model:
    def __init__(self, cfg: Config, weights, device, dtype):
        self.cfg = cfg
        self.device = device
        self.w = {k: v.to(device=device, dtype=dtype) for k, v in weights.items()}
        self.cos_sin_cache = rope_cache(cfg).to(device)
        self.scale = cfg.head_dim ** -0.5

    def new_kv_cache(self, num_blocks, dtype):
        shape = (num_blocks, self.cfg.block_size, self.cfg.kv_heads, self.cfg.head_dim)
        return [(torch.zeros(shape, device=self.device, dtype=dtype), torch.zeros(shape, device=self.device,
                                                                                  dtype=dtype))
                for _ in range(self.cfg.layers)]

    def forward(self, tokens, positions, slot_mapping, block_tables, seq_lens, kv_cache, last=None):
        """One step over T flat tokens (all prompts' tokens in a prefill, one per sequence in
        a decode). Query token i attends to the first seq_lens[i] tokens of the sequence whose
        block table is block_tables[i]. Returns the logits of the tokens `last` (all if None)."""
        cfg, w = self.cfg, self.w
        xx = torch.ops.xxnpu
        T = tokens.shape[0]
        q_size, kv_size = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        h = F.embedding(tokens, w["embed"])
        residual = None
        for i in range(cfg.layers):
            if residual is None:
                residual = h
                h = xx.rms_norm(h, w[f"{i}.attn_norm"], cfg.eps)
            else:
                xx.fused_add_rms_norm(h, residual, w[f"{i}.attn_norm"], cfg.eps)
            q, k, v = F.linear(h, w[f"{i}.qkv"]).split([q_size, kv_size, kv_size], dim=-1)
            q, k = xx.rotary_embedding(positions, q, k, cfg.head_dim, self.cos_sin_cache, True)
            key_cache, value_cache = kv_cache[i]
            xx.reshape_and_cache(k.view(T, cfg.kv_heads, cfg.head_dim), v.view(T, cfg.kv_heads, cfg.head_dim),
                                 key_cache, value_cache, slot_mapping)
            attn = xx.paged_attention(q.view(T, cfg.heads, cfg.head_dim), key_cache, value_cache, block_tables,
                                      seq_lens, self.scale)
            h = F.linear(attn.view(T, q_size), w[f"{i}.o"])
            xx.fused_add_rms_norm(h, residual, w[f"{i}.mlp_norm"], cfg.eps)
            h = F.linear(xx.silu_and_mul(F.linear(h, w[f"{i}.gate_up"])), w[f"{i}.down"])
        xx.fused_add_rms_norm(h, residual, w["final_norm"], cfg.eps)
        if last is not None:
            h = h.index_select(0, last)
        return F.linear(h, w["lm_head"])


class Schedule:
    """Host-side bookkeeping (a serving engine's scheduler): block tables, and for each
    step the positions, cache slots and attention lengths, prepared on the CPU as int32
    tensors and copied to the device at each step (as vLLM prepares its inputs)."""

    def __init__(self, cfg: Config, prompt_lens, new_tokens, seed):
        self.cfg = cfg
        self.prompt_lens = list(prompt_lens)
        bs = cfg.block_size
        need = [(n + new_tokens + bs - 1) // bs for n in prompt_lens]
        self.max_blocks = max(need)
        # A pool with spare blocks, handed out in a shuffled order: the sequences' blocks are
        # scattered through the cache, as after a while of serving.
        self.num_blocks = sum(need) + 3
        order = torch.randperm(self.num_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
        self.tables = torch.zeros(len(prompt_lens), self.max_blocks, dtype=torch.int32)
        for s, n in enumerate(need):
            self.tables[s, :n] = torch.tensor(order[:n], dtype=torch.int32)
            order = order[n:]

    def _slots(self, seq, pos):
        return self.tables[seq, pos // self.cfg.block_size].long() * self.cfg.block_size + pos % self.cfg.block_size

    def prefill(self):
        seq = torch.cat([torch.full((n,), s) for s, n in enumerate(self.prompt_lens)])
        pos = torch.cat([torch.arange(n) for n in self.prompt_lens])
        last = torch.tensor(self.prompt_lens).cumsum(0) - 1
        return dict(positions=pos.int(), slot_mapping=self._slots(seq, pos).int(), block_tables=self.tables[seq],
                    seq_lens=(pos + 1).int()), last

    def decode(self, step):
        seq = torch.arange(len(self.prompt_lens))
        pos = torch.tensor(self.prompt_lens) + step
        return dict(positions=pos.int(), slot_mapping=self._slots(seq, pos).int(), block_tables=self.tables,
                    seq_lens=(pos + 1).int())


class GraphedDecode:
    """The decode step captured once into an xxnpu graph and replayed at every step (what
    serving engines do with CUDA graphs): the step's inputs live in static device tensors
    that each step overwrites in place, and the KV cache is the one the capture saw, so a
    replay writes the new keys/values into it and attends over it like the eager step."""

    def __init__(self, model: Model, kv_cache, example_args, batch):
        dev = model.device
        self.static = {k: v.to(dev) for k, v in example_args.items()}
        self.tok = torch.zeros(batch, dtype=torch.long, device=dev)
        self.graph = torch.xxnpu.XXNPUGraph()
        with torch.xxnpu.graph(self.graph):
            self.logits = model.forward(self.tok, **self.static, kv_cache=kv_cache)
            self.next_tok = self.logits.argmax(-1)

    def step(self, tok, args):
        """One decode step: host-prepared `args` and the device tokens `tok` into the static
        inputs, one replay; returns (logits, next tokens), copied out of the static outputs.
        Pinned `args` are copied without waiting (see run)."""
        for k, v in args.items():
            self.static[k].copy_(v, non_blocking=v.is_pinned())
        self.tok.copy_(tok)
        self.graph.replay()
        return self.logits.clone(), self.next_tok.clone()


def synchronize(device):
    if device.type == "xxnpu":
        torch.xxnpu.synchronize()


def run(model: Model, prompts, sched: Schedule, new_tokens, dtype, forced=None, graphed=False):
    """Prefill + greedy decode. Returns (tokens [batch, new_tokens], logits per step on the
    CPU, prefill seconds, decode seconds, (fallback counts of the prefill, of the decode
    steps)).

    graphed: decode with a GraphedDecode (xxnpu only), captured after the prefill; the
    capture is not part of the decode time (a server captures once, at start-up).

    forced: tokens [batch, new_tokens] to feed instead of the model's own choices (teacher
    forcing), so that two runs' logits can be compared step by step even where a near-tie
    in low precision makes their greedy choices differ."""
    dev = model.device
    kv = model.new_kv_cache(sched.num_blocks, dtype)
    inputs, last = sched.prefill()
    steps = [sched.decode(i) for i in range(new_tokens - 1)]
    xxnpu = dev.type == "xxnpu"
    if xxnpu:
        # The step inputs in pinned memory, copied with non_blocking=True, as serving engines
        # prepare them: a copy from pageable memory waits for the stream to drain first (as
        # on CUDA), which would stop the host from queueing step i+1 while the device runs
        # step i. Each step's tensors are its own, so no copy reads a buffer being refilled.
        steps = [{k: v.pin_memory() for k, v in step.items()} for step in steps]
    with torch.no_grad():
        synchronize(dev)
        if xxnpu:
            torch_xxnpu.ops.reset_fallback_counts()
        t0 = time.perf_counter()
        args = {k: v.to(dev) for k, v in inputs.items()}
        logits = model.forward(torch.cat(prompts).to(dev), **args, kv_cache=kv, last=last.to(dev))
        tok = logits.argmax(-1)
        synchronize(dev)
        t1 = time.perf_counter()
        all_logits, all_tokens = [logits], [tok]
        prefill_fallbacks = torch_xxnpu.ops.fallback_counts() if xxnpu else {}
        if xxnpu:
            torch_xxnpu.ops.reset_fallback_counts()
        graph = None
        if graphed and steps:
            graph = GraphedDecode(model, kv, steps[0], len(sched.prompt_lens))
            synchronize(dev)
            t1 = time.perf_counter()
        # The decode loop queues work without waiting for the device: the next step's
        # tokens stay on the device, and the host-prepared inputs are copied in stream order.
        for i, step in enumerate(steps):
            if forced is not None:
                tok = forced[:, i].to(dev)
            if graph is not None:
                logits, tok = graph.step(tok, step)
            else:
                args = {k: v.to(dev, non_blocking=v.is_pinned()) for k, v in step.items()}
                logits = model.forward(tok, **args, kv_cache=kv)
                tok = logits.argmax(-1)
            all_logits.append(logits)
            all_tokens.append(tok)
        synchronize(dev)
        t2 = time.perf_counter()
        decode_fallbacks = torch_xxnpu.ops.fallback_counts() if xxnpu else {}
    tokens = torch.stack([t.cpu() for t in all_tokens], dim=1)
    return tokens, [l.cpu().float() for l in all_logits], t1 - t0, t2 - t1, (prefill_fallbacks, decode_fallbacks)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--new-tokens", type=int, default=32, help="tokens decoded per sequence (prefill's included)")
    p.add_argument("--prompt-lens", type=str, default="21,9,14,30", help="prompt lengths, comma separated (batch)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--layers", type=int, default=Config.layers)
    p.add_argument("--hidden", type=int, default=Config.hidden)
    p.add_argument("--vocab", type=int, default=Config.vocab)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reps", type=int, default=3, help="timed runs per backend (the median is reported)")
    p.add_argument("--trace", metavar="PATH",
                   help="also profile a short xxnpu prefill + decode with torch.profiler: print the device "
                        "kernels' table and write a chrome trace to PATH")
    p.add_argument("--graphed", action="store_true",
                   help="also decode with the step captured in an xxnpu graph and replayed: check it against "
                        "the eager xxnpu decode and report its tokens/s")
    p.add_argument("--require-native-decode", action="store_true",
                   help="fail if any op of the decode step fell back to the CPU")
    args = p.parse_args(argv)
    if args.new_tokens < 2:
        p.error("--new-tokens must be at least 2 (the prefill's token and one decode step)")
    dtype = getattr(torch, args.dtype)
    cfg = Config(layers=args.layers, hidden=args.hidden, vocab=args.vocab)
    prompt_lens = [int(n) for n in args.prompt_lens.split(",")]
    g = torch.Generator().manual_seed(args.seed + 1)
    prompts = [torch.randint(0, cfg.vocab, (n,), generator=g) for n in prompt_lens]
    sched = Schedule(cfg, prompt_lens, args.new_tokens, args.seed + 2)
    weights = make_weights(cfg, args.seed)

    # Same thread count for both: the CPU's intra-op threads = the device's compute threads.
    xxnpu_threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    torch.set_num_threads(xxnpu_threads)
    print(f"llama_decode: vocab {cfg.vocab}, hidden {cfg.hidden}, {cfg.layers} layers, {cfg.heads} heads / "
          f"{cfg.kv_heads} kv heads (GQA), head_dim {cfg.head_dim}, ffn {cfg.ffn}, {args.dtype}")
    print(f"batch {len(prompt_lens)}, prompts {prompt_lens} tokens, {args.new_tokens} new tokens each; paged KV "
          f"cache: {sched.num_blocks} blocks of {cfg.block_size} tokens per layer")
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {xxnpu_threads}")

    # Fallback warnings are summarised below instead.
    warnings.filterwarnings("ignore", message=".*has no xxnpu kernel.*")
    results = {}
    for name in ["cpu", "xxnpu"]:
        model = Model(cfg, weights, torch.device(name), dtype)
        run(model, prompts, sched, 2, dtype)  # warm-up (allocator, first-use paths)
        reps = [run(model, prompts, sched, args.new_tokens, dtype) for _ in range(max(1, args.reps))]
        # The first run's results, the median prefill and decode times.
        tokens, logits, _, _, fallbacks = reps[0]
        results[name] = (tokens, logits, statistics.median(r[2] for r in reps), statistics.median(r[3] for r in reps),
                         fallbacks)
    cpu_tokens, cpu_logits, cpu_pre, cpu_dec, _ = results["cpu"]
    x_tokens, _, x_pre, x_dec, (prefill_fallbacks, fallbacks) = results["xxnpu"]
    # The step-by-step comparison: xxnpu fed the CPU's tokens.
    forced_tokens, x_logits, _, _, _ = run(model, prompts, sched, args.new_tokens, dtype, forced=cpu_tokens)

    n_dec = len(prompt_lens) * (args.new_tokens - 1)
    cpu_tps, x_tps = n_dec / cpu_dec, n_dec / x_dec
    print(f"medians of {max(1, args.reps)} runs")
    print(f"prefill ({sum(prompt_lens)} tokens): cpu {cpu_pre * 1e3:.1f} ms, xxnpu {x_pre * 1e3:.1f} ms")
    print(f"decode ({args.new_tokens - 1} steps x batch {len(prompt_lens)}): cpu {cpu_tps:.1f} tokens/s, "
          f"xxnpu {x_tps:.1f} tokens/s, xxnpu/cpu {x_tps / cpu_tps:.2f}x")

    # Logits: every step within `tol` of the CPU's. Greedy choices: equal wherever the CPU's
    # best token leads its runner-up by more than the logits' error (a closer race may go
    # either way in low precision; in float32 all are equal).
    tol = {torch.float32: 1e-3, torch.bfloat16: 0.1, torch.float16: 0.02}[dtype]
    diffs = [(a - b).abs().max().item() for a, b in zip(x_logits, cpu_logits)]
    max_diff = max(diffs)
    top2 = torch.stack([l.topk(2, dim=-1).values for l in cpu_logits], dim=1)  # [batch, steps, 2]
    margin = top2[..., 0] - top2[..., 1]
    differ = forced_tokens != cpu_tokens
    unexplained = differ & (margin > 2 * max_diff)
    ok = max_diff <= tol and not unexplained.any()
    print(f"logits (xxnpu fed the cpu's tokens): max |diff| {max_diff:.2e} over prefill + {args.new_tokens - 1} "
          f"decode steps (tolerance {tol:g}); greedy choices equal {int((~differ).sum())}/{differ.numel()}"
          + (f" ({int(differ.sum())} differ, at near-ties: top-2 margin < 2x the logit error)"
             if differ.any() and not unexplained.any() else ""))
    if torch.equal(x_tokens, cpu_tokens):
        print(f"match: tokens identical ({x_tokens.shape[0]} x {x_tokens.shape[1]}) decoding on its own")
    else:
        bad = (x_tokens != cpu_tokens).nonzero()[0].tolist()
        print(f"tokens decoding on its own: first differ at sequence {bad[0]}, step {bad[1]} (xxnpu "
              f"{x_tokens[bad[0], bad[1]].item()}, cpu {cpu_tokens[bad[0], bad[1]].item()}, cpu top-2 margin "
              f"{margin[bad[0], bad[1]].item():.2e})")
    if not ok:
        print(f"MISMATCH: " + (f"logits differ by {max_diff:.2e} > {tol:g}" if max_diff > tol else
                               f"{int(unexplained.sum())} greedy choices differ with a clear margin"))
    print("generated tokens (xxnpu), sequence 0:", x_tokens[0].tolist())

    if args.graphed:
        run(model, prompts, sched, 2, dtype, graphed=True)  # warm-up
        g_reps = [run(model, prompts, sched, args.new_tokens, dtype, graphed=True) for _ in range(max(1, args.reps))]
        g_tokens, g_logits, _, _, _ = g_reps[0]
        g_tps = n_dec / statistics.median(r[3] for r in g_reps)
        _, x_eager_logits, _, _, _ = reps[0]
        g_diff = max((a - b).abs().max().item() for a, b in zip(g_logits, x_eager_logits))
        same = torch.equal(g_tokens, x_tokens)
        print(f"graphed decode: xxnpu graph {g_tps:.1f} tokens/s, eager xxnpu {x_tps:.1f} tokens/s, "
              f"graph/eager {g_tps / x_tps:.2f}x, graph/cpu {g_tps / cpu_tps:.2f}x")
        print(f"graphed decode vs eager xxnpu: logits max |diff| {g_diff:.2e}, tokens "
              + ("identical" if same else "DIFFER"))
        if not same or g_diff > 0:
            print("MISMATCH: the graphed decode differs from the eager xxnpu decode")
            ok = False

    if args.trace:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            run(model, prompts, sched, min(args.new_tokens, 4), dtype)
        prof.export_chrome_trace(args.trace)
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12))
        print(f"trace: {args.trace}")

    steps = args.new_tokens - 1
    print("prefill CPU fallbacks: " + (", ".join(f"{op} {n}" for op, n in sorted(prefill_fallbacks.items(),
                                                                                key=lambda kv: -kv[1]))
                                       or "none"))
    if fallbacks:
        per_step = ", ".join(f"{op} {n / steps:g}" for op, n in sorted(fallbacks.items(), key=lambda kv: -kv[1]))
        print(f"decode-step CPU fallbacks: {sum(fallbacks.values()) / steps:g} per step ({per_step})")
        if args.require_native_decode:
            print("FAILED: --require-native-decode, but the decode step fell back to the CPU")
            ok = False
    else:
        print("decode-step CPU fallbacks: none")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
