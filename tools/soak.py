#!/usr/bin/env python3
"""Soak: the backend under a long mixed load, watched for leaks and hangs (not in CI).

Two ranks (one process each, an xxccl process group over the shared-memory transport)
repeat a cycle until the time is up:

    Llama decode     examples/llama_decode.py's model, a small config: prefill + decode,
                     tokens compared with the first cycle's (seeded weights: must not drift)
    training step    Linear-GELU-Linear under DistributedDataParallel, AdamW
    collectives      all_reduce (async, its input dropped before the wait), all_gather,
                     broadcast, values checked
    empty_cache      right after the async all_reduce (the hang issue 21 reported)
    profiler         every --profile-every cycles, a torch.profiler capture with the device
                     timeline and a marker named per cycle; the device kernels must be in it
                     (not every cycle: torch's profiler itself keeps ~14 KB of host memory per
                     capture, CPU-only captures included, which would swamp the comparison)
    OOM              an allocation past the device's capacity: torch.OutOfMemoryError,
                     then the device is used again
    kernel fault     torch.ops.xxnpu._debug_fail_kernel: the error surfaces at the next
                     synchronize, then the device is used again

After each cycle a rank reports host RSS, threads, open file descriptors, its /dev/shm
segments and the device's allocated and reserved bytes. The parent is the watchdog: a
rank silent for --hang-seconds is a hang (both ranks are killed, exit 1). At the end each
figure's median over the first and the last tenth of the samples (after --warmup-minutes)
is compared: RSS may grow by at most --rss-slack-mb, threads, fds, shm segments and
allocated bytes not at all.

    python tools/soak.py [--minutes 30] [--json soak.json]

Exit status 0 when every cycle passed its checks, nothing hung and nothing grew.
"""
import argparse
import json
import multiprocessing
import os
import queue as queue_lib
import statistics
import sys
import tempfile
import time
import traceback
from datetime import timedelta

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORLD = 2
METRICS = ["rss_mb", "threads", "fds", "shm_segments", "allocated", "reserved"]


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _shm_segments():
    try:
        return sum(1 for n in os.listdir("/dev/shm") if "xxccl" in n or "xxnpu" in n)
    except OSError:
        return 0


def _sample(torch):
    return dict(rss_mb=_rss_mb(), threads=len(os.listdir("/proc/self/task")), fds=len(os.listdir("/proc/self/fd")),
                shm_segments=_shm_segments(), allocated=torch.xxnpu.memory_allocated(),
                reserved=torch.xxnpu.memory_reserved())


class Workload:
    """One rank's cycle. Everything it checks raises AssertionError on a wrong answer."""

    def __init__(self, rank, torch, dist, profile_every):
        import torch.nn as nn

        sys.path.insert(0, os.path.join(REPO, "examples"))
        import llama_decode as llama

        self.rank, self.torch, self.dist, self.llama = rank, torch, dist, llama
        self.dev = torch.device("xxnpu", 0)
        cfg = llama.Config(layers=2, hidden=128, heads=4, kv_heads=2, head_dim=32, ffn=352, vocab=512)
        g = torch.Generator().manual_seed(1)
        self.prompts = [torch.randint(0, cfg.vocab, (n,), generator=g) for n in (7, 12)]
        self.sched = llama.Schedule(cfg, [7, 12], 8, 2)
        self.model = llama.Model(cfg, llama.make_weights(cfg, 0), self.dev, torch.float32)
        self.reference_tokens = None
        self.profile_every = profile_every

        torch.manual_seed(0)
        mlp = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)).to(self.dev)
        self.ddp = nn.parallel.DistributedDataParallel(mlp)
        self.opt = torch.optim.AdamW(self.ddp.parameters(), lr=1e-3)
        self.capacity = torch.xxnpu.mem_get_info()[1]

    def decode(self):
        tokens = self.llama.run(self.model, self.prompts, self.sched, 8, self.torch.float32)[0]
        if self.reference_tokens is None:
            self.reference_tokens = tokens
        assert self.torch.equal(tokens, self.reference_tokens), "llama decode drifted from the first cycle"

    def train(self):
        torch = self.torch
        x = torch.randn(64, 256, device=self.dev)
        loss = self.ddp(x).square().mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        assert torch.isfinite(loss).item(), "training loss is not finite"

    def collectives(self):
        torch, dist = self.torch, self.dist
        t = torch.full((1 << 16,), float(self.rank + 1), device=self.dev)
        work = dist.all_reduce(t, async_op=True)
        keep = t
        del t
        torch.xxnpu.empty_cache()  # with the input's last Python reference gone
        work.wait()
        expected = sum(r + 1 for r in range(WORLD))
        assert torch.equal(keep[:4].cpu(), torch.full((4,), float(expected))), "all_reduce result"
        parts = [torch.empty(8, device=self.dev) for _ in range(WORLD)]
        dist.all_gather(parts, torch.full((8,), float(self.rank), device=self.dev))
        for r, p in enumerate(parts):
            assert torch.equal(p.cpu(), torch.full((8,), float(r))), "all_gather result"
        b = torch.full((8,), float(self.rank), device=self.dev)
        dist.broadcast(b, src=0)
        assert torch.equal(b.cpu(), torch.zeros(8)), "broadcast result"
        del keep, parts, b
        # Issue 21's hang, as reported: no reference left to the collective's tensor but
        # the one its queued kernel holds, empty_cache, and the work handle is replaced by
        # the next cycle's without a wait.
        t = torch.ones(1 << 16, device=self.dev)
        self.pending = dist.all_reduce(t, async_op=True)
        del t
        torch.xxnpu.empty_cache()

    def profile(self, cycle):
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            with torch.xxnpu.markers.range(f"soak cycle {cycle}"):  # a new name every cycle
                y = torch.randn(256, 256, device=self.dev)
                (y @ y).relu_().sum().item()
        names = {e.name for e in prof.events()}
        assert any("mm" in n for n in names), "the profile lost the device kernels"

    def oom(self):
        torch = self.torch
        try:
            torch.empty(self.capacity + (1 << 20), dtype=torch.uint8, device=self.dev)
        except torch.OutOfMemoryError:
            pass
        else:
            raise AssertionError("an allocation past the device's capacity succeeded")
        assert torch.equal((torch.ones(4, device=self.dev) * 2).cpu(), torch.full((4,), 2.0))

    def fault(self):
        torch = self.torch
        x = torch.ones(4, device=self.dev)
        torch.ops.xxnpu._debug_fail_kernel(x, "soak fault")
        try:
            torch.xxnpu.synchronize()
        except RuntimeError as e:
            assert "soak fault" in str(e), str(e)
        else:
            raise AssertionError("a failed kernel was not reported")
        assert torch.equal((x + 1).cpu(), torch.full((4,), 2.0))

    def cycle(self, i):
        self.decode()
        self.train()
        self.collectives()
        if i % self.profile_every == 0:
            self.profile(i)
        if i % 10 == 0:
            self.oom()
            self.fault()
        self.torch.xxnpu.synchronize()


def _rank_main(rank, store_path, seconds, profile_every, results):
    os.environ.update({"XXNPU_COMPUTE_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    try:
        import warnings

        warnings.filterwarnings("ignore")
        import torch
        import torch.distributed as dist

        import torch_xxnpu  # noqa: F401

        torch.xxnpu.set_device(0)
        store = dist.FileStore(store_path, WORLD)
        dist.init_process_group("xxccl", store=store, rank=rank, world_size=WORLD, timeout=timedelta(seconds=120))
        work = Workload(rank, torch, dist, profile_every)
        results.put(("transport", rank, dist.group.WORLD._get_backend(work.dev)._transport))
        deadline = time.monotonic() + seconds
        parent = os.getppid()
        i = 0
        while True:
            if os.getppid() != parent:  # the watchdog is gone (killed): do not run on orphaned
                os._exit(1)
            t0 = time.monotonic()
            work.cycle(i)
            # Both ranks run the same number of cycles (collectives must pair up).
            flag = torch.tensor([1.0 if time.monotonic() < deadline else 0.0], device=work.dev)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            results.put(("sample", rank, dict(cycle=i, t=time.time(), seconds=time.monotonic() - t0,
                                              **_sample(torch))))
            i += 1
            if flag.item() == 0.0:
                break
        dist.destroy_process_group()
        results.put(("done", rank, i))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        results.put(("error", rank, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def _growth(samples, warmup_s):
    """Median of the first and the last tenth of the samples taken after the warm-up."""
    if not samples:
        return {}
    t0 = samples[0]["t"]
    steady = [s for s in samples if s["t"] - t0 >= warmup_s] or samples
    k = max(1, len(steady) // 10)
    out = {}
    for m in METRICS:
        first = statistics.median(s[m] for s in steady[:k])
        last = statistics.median(s[m] for s in steady[-k:])
        out[m] = dict(first=first, last=last, growth=last - first)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--warmup-minutes", type=float, default=2.0)
    p.add_argument("--profile-every", type=int, default=50, help="cycles between profiler captures")
    p.add_argument("--hang-seconds", type=float, default=180.0, help="a rank silent this long is a hang")
    p.add_argument("--rss-slack-mb", type=float, default=32.0, help="allowed RSS growth per rank")
    p.add_argument("--json", metavar="PATH", help="write every sample and the verdict here")
    args = p.parse_args(argv)

    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    store_dir = tempfile.mkdtemp(prefix="xxnpu-soak-")
    procs = [ctx.Process(target=_rank_main, args=(r, os.path.join(store_dir, "store"), args.minutes * 60,
                                                        args.profile_every, results))
             for r in range(WORLD)]
    for proc in procs:
        proc.start()
    samples = {r: [] for r in range(WORLD)}
    done, errors, hang, transport = set(), [], None, None
    last_heard = {r: time.monotonic() for r in range(WORLD)}
    started = time.monotonic()
    while len(done) + len(errors) < WORLD and hang is None:
        try:
            kind, rank, payload = results.get(timeout=5)
        except queue_lib.Empty:
            now = time.monotonic()
            for r in range(WORLD):
                if r not in done and now - last_heard[r] > args.hang_seconds:
                    hang = f"rank {r} silent for {now - last_heard[r]:.0f} s"
            if any(not proc.is_alive() and proc.exitcode not in (0, None) for proc in procs) and not errors:
                errors.append("a rank died: exit codes " + str([proc.exitcode for proc in procs]))
            continue
        last_heard[rank] = time.monotonic()
        if kind == "sample":
            samples[rank].append(payload)
            if payload["cycle"] % 20 == 0:
                print(f"[soak] {time.monotonic() - started:7.0f} s rank {rank} cycle {payload['cycle']:5d}: "
                      f"{payload['seconds'] * 1e3:6.0f} ms, rss {payload['rss_mb']:.0f} MB, "
                      f"threads {payload['threads']}, fds {payload['fds']}, device allocated "
                      f"{payload['allocated'] / 2**20:.1f} MB reserved {payload['reserved'] / 2**20:.1f} MB",
                      flush=True)
        elif kind == "transport":
            transport = payload
            print(f"[soak] rank {rank}: xxccl transport {payload}", flush=True)
        elif kind == "done":
            done.add(rank)
        else:
            errors.append(f"rank {rank}: {payload}")
    for proc in procs:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()

    verdict = dict(minutes=args.minutes, transport=transport, cycles={r: len(s) for r, s in samples.items()}, hang=hang, errors=errors,
                   growth={r: _growth(s, args.warmup_minutes * 60) for r, s in samples.items()})
    grew = []
    for r, g in verdict["growth"].items():
        for m, v in g.items():
            limit = args.rss_slack_mb if m == "rss_mb" else 0
            if v["growth"] > limit:
                grew.append(f"rank {r} {m}: {v['first']:.1f} -> {v['last']:.1f}")
    verdict["grew"] = grew
    cycle_ms = [s["seconds"] * 1e3 for ss in samples.values() for s in ss]
    print(f"[soak] {args.minutes:g} min, cycles per rank {verdict['cycles']}, cycle median "
          f"{statistics.median(cycle_ms) if cycle_ms else float('nan'):.0f} ms")
    for r, g in verdict["growth"].items():
        print(f"[soak] rank {r}: " + ", ".join(f"{m} {v['first']:.1f} -> {v['last']:.1f}" for m, v in g.items()))
    for line in ([hang] if hang else []) + errors + grew:
        print("[soak] FAIL: " + line.splitlines()[0] if line else "", file=sys.stderr)
        if "\n" in line:
            print(line, file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(verdict, samples=samples), f, indent=1)
    ok = not hang and not errors and not grew
    print("[soak] " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
