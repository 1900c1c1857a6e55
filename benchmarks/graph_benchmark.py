"""xxnpu graphs: what a replay saves, measured in one run (docs/pytorch-integration.md,
"Graphs").

    bazel run --config=opt //benchmarks:graph_benchmark -- [--reps 5] [--new-tokens 32]
    python benchmarks/graph_benchmark.py [--reps 5]   # with torch_xxnpu importable

Reports medians:
- replay cost per node: a graph of N adds of 64 floats (N = 10, 100, 1000), one replay +
  synchronize, divided by N; and the instantiate cost of the same graphs;
- the Llama decode step of examples/llama_decode.py (its default model and batch) captured
  once and replayed per token, against the same decode run eagerly on xxnpu: tokens/s,
  for the default model and a smaller, more host-bound one (--decode-configs).
  Eager and graphed runs alternate, so both see the same machine load.
"""
import argparse
import importlib.util
import os
import statistics
import time

import torch
import torch_xxnpu  # noqa: F401


def _median(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def replay_and_instantiate(reps):
    x = torch.zeros(64, device="xxnpu")
    for n in (10, 100, 1000):
        g = torch.xxnpu.XXNPUGraph(keep_graph=True)
        with torch.xxnpu.graph(g):
            for _ in range(n):
                x.add_(1)
        inst = _median(g.instantiate, reps)
        g.replay()
        torch.xxnpu.synchronize()

        def replay():
            g.replay()
            torch.xxnpu.synchronize()

        t = _median(replay, reps)
        print(f"graph of {n} nodes: replay + sync {t * 1e6:.0f} us ({t / n * 1e6:.2f} us/node), "
              f"instantiate {inst * 1e6:.0f} us ({inst / n * 1e6:.2f} us/node)")
        g.reset()


def _llama_decode():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "examples", "llama_decode.py")
    spec = importlib.util.spec_from_file_location("llama_decode", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def decode(reps, new_tokens, hidden, layers, vocab):
    ld = _llama_decode()
    cfg = ld.Config(hidden=hidden, layers=layers, vocab=vocab)
    prompt_lens = [21, 9, 14, 30]
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, cfg.vocab, (n,), generator=gen) for n in prompt_lens]
    sched = ld.Schedule(cfg, prompt_lens, new_tokens, 2)
    model = ld.Model(cfg, ld.make_weights(cfg, 0), torch.device("xxnpu"), torch.float32)
    for graphed in (False, True):  # warm-up
        ld.run(model, prompts, sched, 2, torch.float32, graphed=graphed)
    eager, graphed = [], []
    for _ in range(reps):
        e = ld.run(model, prompts, sched, new_tokens, torch.float32)
        g = ld.run(model, prompts, sched, new_tokens, torch.float32, graphed=True)
        assert torch.equal(e[0], g[0]), "the graphed decode's tokens differ from the eager decode's"
        eager.append(e[3])
        graphed.append(g[3])
    n = len(prompt_lens) * (new_tokens - 1)
    e_tps, g_tps = n / statistics.median(eager), n / statistics.median(graphed)
    print(f"llama decode (batch {len(prompt_lens)}, {new_tokens - 1} steps, {cfg.layers} layers, hidden "
          f"{cfg.hidden}, vocab {cfg.vocab}): eager xxnpu {e_tps:.1f} tokens/s, graphed {g_tps:.1f} tokens/s, "
          f"graphed/eager {g_tps / e_tps:.2f}x (tokens identical)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--decode-configs", default="256x4x2048,128x2x512",
                   help="Llama configs to decode, comma separated HIDDENxLAYERSxVOCAB (the first is "
                        "llama_decode.py's default; the second its test's, more host-bound)")
    args = p.parse_args()
    torch.set_num_threads(torch.xxnpu.get_device_properties(0).multi_processor_count)
    replay_and_instantiate(args.reps)
    for c in args.decode_configs.split(","):
        hidden, layers, vocab = (int(v) for v in c.split("x"))
        decode(args.reps, args.new_tokens, hidden, layers, vocab)


if __name__ == "__main__":
    main()
