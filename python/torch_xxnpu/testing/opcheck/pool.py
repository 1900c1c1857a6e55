"""The main process's worker pool: schedules (op, dtype) tasks on worker subprocesses,
reports crashed or hung ones and replaces them; progress output."""
import json
import math
import os
import selectors
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

import torch_xxnpu
from torch_xxnpu.testing.report import BAD, STATUSES


def worker_env() -> Dict[str, str]:
    """The environment of a worker subprocess (opcheck's and the fuzzer's): it imports the
    same torch_xxnpu as this process, wherever that came from, and only through it."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(torch_xxnpu.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    return env


class _Worker:
    def __init__(self, idx, cmd, env, start_timeout):
        self.idx = idx
        self.cmd = cmd
        self.env = env
        self.start_timeout = start_timeout
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, text=True, bufsize=1)
        self.ready = False
        self.task = None
        self.deadline = time.monotonic() + start_timeout

    def send(self, task, timeout):
        self.task = task
        self.log.seek(0)
        self.log.truncate()
        self.deadline = time.monotonic() + timeout
        self.proc.stdin.write(json.dumps(task) + "\n")
        self.proc.stdin.flush()

    def log_tail(self, n=1500):
        try:
            self.log.seek(0)
            data = self.log.read().decode("utf-8", "replace")
        except Exception:
            return ""
        return data[-n:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self.proc.stdin.close()
            self.proc.stdout.close()
        except Exception:
            pass
        self.log.close()


class _Progress:
    """tqdm when installed, else a plain stderr line (rewritten on a terminal)."""

    def __init__(self, total, enabled):
        self.total, self.done, self.enabled = total, 0, enabled
        self.counts = {s: 0 for s in STATUSES}
        self.start = time.monotonic()
        self.last = 0.0
        self.bar = None
        self.tty = sys.stderr.isatty()
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="op", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                self.bar = None

    def update(self, row):
        self.done += 1
        self.counts[row.get("status", "error")] = self.counts.get(row.get("status", "error"), 0) + 1
        if not self.enabled:
            return
        tail = f"{row['op']} {row['dtype']} {row.get('status')}"
        if self.bar is not None:
            self.bar.set_postfix_str(tail[:40], refresh=False)
            self.bar.update(1)
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 10 and self.done != self.total:
            return
        self.last = now
        el = now - self.start
        eta = el / self.done * (self.total - self.done) if self.done else 0
        bad = sum(self.counts[s] for s in BAD)
        line = (f"[{self.done}/{self.total}] {100 * self.done // max(self.total, 1)}% "
                f"pass {self.counts['pass']} bad {bad} skip {self.counts['skipped']} "
                f"{el:.0f}s eta {eta:.0f}s  {tail}")
        if self.tty:
            sys.stderr.write("\r" + line[:120].ljust(120))
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()


class WorkerPool:
    """Worker subprocesses that run (op, dtype) tasks, replaced when they crash or hang.

    Started before the main process loads the OpInfo database, so that the workers'
    imports (the slow part of a small run) overlap with it.
    """

    def __init__(self, jobs: int, timeout: float, worker_args: List[str]):
        self.cmd = [sys.executable, "-m", "torch_xxnpu.testing.opcheck", "--worker", *worker_args]
        self.env = worker_env()
        self.timeout = timeout
        self.start_timeout = max(300.0, timeout)
        self.sel = selectors.DefaultSelector()
        self.workers: List[_Worker] = [self._spawn(i) for i in range(max(1, jobs))]

    def _spawn(self, idx):
        w = _Worker(idx, self.cmd, self.env, self.start_timeout)
        self.sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        return w

    def _replace(self, w):
        self.sel.unregister(w.proc.stdout)
        w.kill()
        self.workers[w.idx] = self._spawn(w.idx)

    def close(self):
        for w in self.workers:
            try:
                self.sel.unregister(w.proc.stdout)
            except Exception:
                pass
            w.kill()
        self.workers = []

    def run(self, tasks: List[Dict[str, Any]], progress: bool = True) -> List[Dict[str, Any]]:
        pending = list(reversed(tasks))
        results: Dict[int, Dict[str, Any]] = {}
        bar = _Progress(len(tasks), progress)

        def finish(w, row):
            task = w.task
            w.task = None
            results[task["id"]] = row
            bar.update(row)

        def dispatch(w):
            if pending and w.ready and w.task is None:
                w.send(pending.pop(), self.timeout)
            elif w.ready and w.task is None:
                w.deadline = math.inf  # idle: nothing left to give it

        for w in self.workers:
            dispatch(w)
        try:
            while len(results) < len(tasks):
                now = time.monotonic()
                wait = max(0.05, min(w.deadline for w in self.workers) - now)
                for key, _ in self.sel.select(timeout=min(wait, 1.0)):
                    w = key.data
                    line = w.proc.stdout.readline()
                    if not line:
                        # EOF: the worker died (segfault, abort, os._exit): the op it ran crashed.
                        code = w.proc.wait()
                        if w.task is not None:
                            sig = f"signal {-code}" if code < 0 else f"exit code {code}"
                            finish(w, {"op": w.task["op"], "dtype": w.task["dtype"], "status": "crashed",
                                       "execution": "unknown",
                                       "reason": f"worker died ({sig}) while running the op",
                                       "log_tail": w.log_tail()})
                        elif not w.ready:
                            raise RuntimeError(f"opcheck worker failed to start (exit {code}):\n{w.log_tail(4000)}")
                        self._replace(w)
                        continue
                    msg = json.loads(line)
                    if msg.get("ready"):
                        w.ready = True
                    else:
                        finish(w, msg["row"])
                    dispatch(w)
                now = time.monotonic()
                for w in list(self.workers):
                    if now <= w.deadline:
                        continue
                    if w.task is None:
                        raise RuntimeError(f"opcheck worker did not start within {self.start_timeout:.0f}s:\n"
                                           f"{w.log_tail(4000)}")
                    task = w.task
                    finish(w, {"op": task["op"], "dtype": task["dtype"], "status": "timeout",
                               "execution": "unknown",
                               "reason": f"no result within {self.timeout:g}s; the worker was killed",
                               "log_tail": w.log_tail()})
                    self._replace(w)
                for w in self.workers:
                    dispatch(w)
        finally:
            bar.close()
        return [results[t["id"]] for t in tasks]
