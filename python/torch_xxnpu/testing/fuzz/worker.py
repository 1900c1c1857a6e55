"""The worker process that runs cases (JSON lines in, phase markers and results out), and
the main process's handle on it: a case that kills or hangs its worker is reported as a
crash or a hang, and a warm spare takes over at once (starting one costs 10-20 s: torch
and the OpInfo database)."""
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, Optional


def worker_main(argv) -> int:
    # Protocol on the original stdout; whatever the ops print goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # A fatal signal is written to the log at once: a worker that segfaults but takes long
    # to die (its exit can stall behind the device's threads) is still reported as a crash,
    # with the Python stack of the kernel call.
    import faulthandler

    faulthandler.enable(file=sys.stderr)
    from torch_xxnpu.testing.opcheck.worker import setup_process

    imports = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--import"]
    setup_process(imports)
    from torch_xxnpu.testing.fuzz.execute import Executor, run_case
    from torch_xxnpu.testing.fuzz.targets import find_targets, load_all_cases

    executor = Executor(load_all_cases(with_opinfo="--no-opinfo" not in argv))
    proto.write(json.dumps({"ready": True}) + "\n")

    def phase(name):
        proto.write(json.dumps({"phase": name}) + "\n")

    for line in sys.stdin:
        spec = json.loads(line)
        if "targets" in spec:  # the main process asks which ops to fuzz (only a worker loads op_db)
            q = spec["targets"]
            ts = find_targets(executor.cases, q.get("ops"), q.get("probes"), q.get("dtypes"))
            proto.write(json.dumps({"result": [t.to_json() for t in ts]}) + "\n")
            continue
        try:
            row = run_case(executor, spec, phase)
        except Exception as e:  # noqa: BLE001 - a bug of the fuzzer, reported as such
            row = {"kind": "n/a", "detail": f"fuzzer internal error: {type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-2000:]}
        proto.write(json.dumps({"result": row}, default=str) + "\n")
    return 0


class _Proc:
    def __init__(self, cmd, env):
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, text=True, bufsize=1)
        self.ready = False
        # Lines are split here, not by a buffered reader: the worker writes several lines per
        # case (phases, result), and a line sitting in a reader's buffer is invisible to select().
        self.pending = b""

    def log_tail(self, n=1500) -> str:
        try:
            self.log.seek(0)
            return self.log.read().decode("utf-8", "replace")[-n:]
        except Exception:  # noqa: BLE001
            return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass
        self.log.close()


class CaseRunner:
    """Runs one case at a time in a worker subprocess, with a per-case timeout."""

    def __init__(self, timeout: float, start_timeout: float = 300.0, opinfo: bool = True, spare: bool = True,
                 imports=()):
        from torch_xxnpu.testing.opcheck.pool import worker_env

        self.cmd = [sys.executable, "-m", "torch_xxnpu.testing.fuzz", "--worker"] + ([] if opinfo else ["--no-opinfo"])
        for m in imports:
            self.cmd += ["--import", m]
        self.env = worker_env()
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.use_spare = spare
        self.restarts = 0
        self.cur: Optional[_Proc] = _Proc(self.cmd, self.env)
        self.spare: Optional[_Proc] = None

    def _wait_ready(self, p: _Proc):
        deadline = time.monotonic() + self.start_timeout
        while not p.ready:
            line = self._readline(p, deadline)
            if not line:
                raise RuntimeError(f"fuzz worker did not start (exit {p.proc.poll()}):\n{p.log_tail(4000)}")
            if json.loads(line).get("ready"):
                p.ready = True
        if self.use_spare and self.spare is None and self.restarts:
            # A warm spare from the first crash on: a run without crashes does not pay for a
            # second start-up, one with crashes does not wait for each.
            self.spare = _Proc(self.cmd, self.env)

    @staticmethod
    def _readline(p: _Proc, deadline) -> Optional[str]:
        """A line from the worker; "" if it closed its end (it died); None if the deadline passed."""
        fd = p.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in p.pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if sel.select(timeout=min(left, 1.0)):
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        return ""
                    p.pending += chunk
            line, _, p.pending = p.pending.partition(b"\n")
            return line.decode("utf-8", "replace")
        finally:
            sel.close()

    def _replace(self):
        self.cur.kill()
        self.restarts += 1
        self.cur, self.spare = (self.spare, None) if self.spare is not None else (_Proc(self.cmd, self.env), None)

    def targets(self, ops, probes, dtypes):
        """The ops to fuzz, as the worker (which loads the OpInfo database) finds them."""
        self._wait_ready(self.cur)
        p = self.cur
        p.proc.stdin.write(json.dumps({"targets": {"ops": ops, "probes": probes, "dtypes": dtypes}}) + "\n")
        p.proc.stdin.flush()
        line = self._readline(p, time.monotonic() + self.start_timeout)
        if not line:
            raise RuntimeError(f"fuzz worker died listing the ops:\n{p.log_tail(4000)}")
        return json.loads(line)["result"]

    def run(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        self._wait_ready(self.cur)
        p = self.cur
        p.log.seek(0)
        p.log.truncate()
        p.proc.stdin.write(json.dumps(spec) + "\n")
        p.proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        phase = "build"
        while True:
            line = self._readline(p, deadline)
            if not line:
                code = p.proc.poll()
                if line == "" and code is None:
                    # Its end of the pipe closed: it is dying. Exiting can take a while (the
                    # device's threads), and is not a hang.
                    try:
                        code = p.proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        code = None
                dead = code is not None
                full = p.log_tail(200000)
                tail = full[-1500:]
                self._replace()
                if dead:
                    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    kind = "crash" if phase == "xxnpu" else "reference-crash"
                    return {"kind": kind, "detail": f"the worker died ({how}) while running the {phase} side",
                            "log_tail": tail, "cpu": "?", "xxnpu": "?"}
                fatal = re.search(r"Fatal Python error: (\w[\w ]*)", full)
                if fatal:  # it was dying, not hanging
                    kind = "crash" if phase == "xxnpu" else "reference-crash"
                    return {"kind": kind, "detail": f"the worker died ({fatal.group(1).strip()}) while running the "
                            f"{phase} side", "log_tail": tail, "cpu": "?", "xxnpu": "?"}
                kind = "hang" if phase == "xxnpu" else "reference-crash"
                return {"kind": kind, "detail": f"no result within {self.timeout:g}s on the {phase} side; "
                        "the worker was killed", "log_tail": tail, "cpu": "?", "xxnpu": "?"}
            msg = json.loads(line)
            if "phase" in msg:
                phase = msg["phase"]
                continue
            return msg["result"]

    def close(self):
        for p in (self.cur, self.spare):
            if p is not None:
                p.kill()
        self.cur = self.spare = None
