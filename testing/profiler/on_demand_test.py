"""On-demand capture (python -m torch_xxnpu.profiler.capture) of a running program.

One target process, started with XXNPU_PROFILER_ON_DEMAND=1, trains a small model on
xxnpu (or runs a marker-delimited loop, or a loop without boundaries) as told on its
stdin; captures are requested from this process (the CLI as a subprocess once, then
``request()``), which is another process than the target. Every wait is on a message
(the target's stdout/stderr lines, the requester's events) with a deadline, never a sleep.
The target checks its trained model against the same training on the CPU when it exits.
"""
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

import pytest
import torch_xxnpu  # noqa: F401  (the package under test, for the requester)
from torch_xxnpu.profiler.capture import agent, cli
from torch_xxnpu.profiler.capture.protocol import ENV_VAR

WAIT_S = 90  # deadline for anything the target or a requester is expected to do

TARGET = r'''
import copy, os, select, sys
import torch, torch_xxnpu
from torch.profiler import ProfilerActivity, profile, schedule

torch.manual_seed(0)
cpu_model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
model = copy.deepcopy(cpu_model).to("xxnpu")
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data_x, data_y = torch.randn(16, 32), torch.randn(16, 4)
x, y = data_x.to("xxnpu"), data_y.to("xxnpu")
steps = 0
user_prof = None

def say(*args):
    print(*args, flush=True)

def told():  # a command is waiting on stdin
    return bool(select.select([0], [], [], 0)[0])

def read_line():  # unbuffered, so select() above sees what is not read yet
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(0, 1)
        if not c:
            return "exit"
        line += c
    return line.decode().strip()

def train_step():
    global steps
    opt.zero_grad()
    loss = (model(x) - y).square().mean()
    loss.backward()
    loss.item()  # like a loop that logs its loss: the iteration's kernels have run
    opt.step()
    steps += 1

say("ready", os.getpid())
while True:
    cmd = read_line().split()
    if cmd[0] == "train":  # until told otherwise
        while not told():
            train_step()
        say("trained", steps)
    elif cmd[0] == "steps":
        for _ in range(int(cmd[1])):
            train_step()
        say("stepped", steps)
    elif cmd[0] == "markers":  # no optimizer: explicit boundaries
        z = torch.ones(64, 64, device="xxnpu")
        while not told():
            (z @ z).relu_().sum().item()
            torch.xxnpu.markers.step()
        say("marked")
    elif cmd[0] == "ops":  # no boundary at all
        z = torch.ones(64, 64, device="xxnpu")
        while not told():
            (z @ z).relu_().sum().item()
        say("opsdone")
    elif cmd[0] == "fail":  # a kernel error the program meets at the capture's stop
        side = torch.optim.SGD([torch.zeros(1, device="xxnpu", requires_grad=True)], lr=0.0)
        side.step()  # a boundary: starts a 1-iteration capture (the model is not touched)
        torch.ops.xxnpu._debug_fail_kernel(x, "boom")
        try:
            side.step()  # a boundary: the capture's stop synchronizes and meets the error
            say("not raised")
        except torch.AcceleratorError as e:
            say("raised", e)
        torch.xxnpu.synchronize()  # reported once: the device works on
        say("failed")
    elif cmd[0] == "profiler":
        sched = schedule(wait=1000, warmup=1, active=1) if cmd[1] == "scheduled" else None
        user_prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], schedule=sched)
        user_prof.__enter__()
        say("in-profiler")
    elif cmd[0] == "leave":
        user_prof.__exit__(None, None, None)
        user_prof = None
        say("left")
    elif cmd[0] == "state":
        say("state", torch.autograd.profiler._is_profiler_enabled, torch.autograd._profiler_enabled())
    elif cmd[0] == "exit":
        break

# The captures must not have changed what the program computed: replay on the CPU.
cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.05)
for _ in range(steps):
    cpu_opt.zero_grad()
    (cpu_model(data_x) - data_y).square().mean().backward()
    cpu_opt.step()
diff = max((a.cpu() - b).abs().max().item() for a, b in zip(model.parameters(), cpu_model.parameters()))
say("result", "ok" if diff < 1e-3 else "WRONG", steps, diff)
'''


def _env(on_demand):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop(ENV_VAR, None)
    if on_demand is not None:
        env[ENV_VAR] = on_demand
    return env


class _Lines:
    """A pipe's lines, read by a thread, waited for with a deadline."""

    def __init__(self, pipe):
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe):
        for line in iter(pipe.readline, ""):
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, pattern, timeout=WAIT_S):
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} within {timeout} s; saw {self.seen[-20:]}")
            if line is None:
                raise AssertionError(f"stream ended before a line matching {pattern!r}; saw {self.seen[-20:]}")
            self.seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m


class Target:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", TARGET], env=_env("1"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = _Lines(self.proc.stdout)
        self.err = _Lines(self.proc.stderr)  # the agent's log lines
        self.pid = int(self.out.expect(r"^ready (\d+)").group(1))

    def send(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def state(self):
        self.send("state")
        m = self.out.expect(r"^state (\w+) (\w+)")
        return m.group(1) == "True", m.group(2) == "True"


@pytest.fixture(scope="module")
def target():
    t = Target()
    yield t
    if t.proc.poll() is None:
        t.proc.kill()
        t.proc.wait()


def _request(target, command, *, ack, abort_after=None, on_event_hook=None, before_stop=None, **kwargs):
    """request() from a thread; once armed, the target runs `command` until the request
    ends, then is told to stop (and acknowledges with `ack`). Returns (result, error, events).
    abort_after=N leaves request() at the N-th "iteration" event (closing the connection,
    which cancels); before_stop runs between the request's end and the "stop"."""
    events, box = [], {}
    armed_or_ended = threading.Event()

    def on_event(message):
        events.append(message)
        if message["event"] == "armed":
            armed_or_ended.set()
        if on_event_hook is not None:
            on_event_hook(message)
        if abort_after is not None and sum(e["event"] == "iteration" for e in events) == abort_after:
            raise _Abort()

    def run():
        try:
            box["result"] = cli.request(target.pid, on_event=on_event, **kwargs)
        except (cli.CaptureError, _Abort) as e:
            box["error"] = e
        finally:
            armed_or_ended.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert armed_or_ended.wait(WAIT_S)
    if not any(e["event"] == "armed" for e in events):
        thread.join(WAIT_S)
        return box.get("result"), box.get("error"), events
    target.send(command)
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the request did not end"
    if before_stop is not None:
        before_stop()
    target.send("stop")
    target.out.expect(ack)
    return box.get("result"), box.get("error"), events


class _Abort(Exception):
    pass


def _load(path):
    with open(path) as f:
        return json.load(f)


def _steps(trace):
    steps = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"
             and e.get("name", "").startswith("ProfilerStep#")]
    return sorted(steps, key=lambda e: e["ts"])


def _inside(event, outer):
    return outer["ts"] <= event["ts"] and event["ts"] + event.get("dur", 0) <= outer["ts"] + outer["dur"]


def _check_iterations(trace, n, optimizer=True):
    steps = _steps(trace)
    assert [s["name"] for s in steps] == [f"ProfilerStep#{i}" for i in range(n)]
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    for s in steps:
        assert any(s["ts"] <= k["ts"] <= s["ts"] + s["dur"] for k in kernels), f"no xxnpu kernel in {s['name']}"
    if optimizer:
        # One optimizer range per iteration, each inside its ProfilerStep: the boundary waits
        # for Optimizer.step to return (in the hook it would straddle two steps, and the
        # last one would be left unfinished).
        opt = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"
               and e.get("name") == "Optimizer.step#SGD.step"]
        assert len(opt) == n
        for o in opt:
            assert sum(_inside(o, s) for s in steps) == 1, o


# --------------------------------------------------------------------------- captures


def test_cli_captures_five_iterations_of_a_running_training_loop(target, tmp_path):
    out = tmp_path / "traces"
    proc = subprocess.Popen([sys.executable, "-m", "torch_xxnpu.profiler.capture", "--pid", str(target.pid),
                             "--iterations", "5", "--out", str(out)],
                            env=_env(None), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err, stdout = _Lines(proc.stderr), _Lines(proc.stdout)
    err.expect(rf"^capture: process {target.pid} will capture 5 iterations from the next iteration boundary")
    target.send("train")
    assert proc.wait(WAIT_S) == 0
    target.send("stop")
    target.out.expect(r"^trained \d+")
    err.expect(r"^capture: started at an optimizer step")
    err.expect(r"^capture: 5 iterations in [\d.]+ ms; the program paused [\d.]+ ms")
    path = stdout.expect(r"\.pt\.trace\.json$").string
    assert os.path.dirname(path) == str(out)
    assert re.fullmatch(rf".+_{target.pid}\.\d+\.pt\.trace\.json", os.path.basename(path))
    trace = _load(path)
    _check_iterations(trace, 5)
    assert trace["xxnpu_on_demand"]["boundary"] == "optimizer"
    assert any(e.get("cat") == "kernel" and e.get("pid") == 0 for e in trace["traceEvents"])  # the xxnpu:0 row
    target.err.expect(rf"trace written to {re.escape(path)}")
    assert target.state() == (False, False)  # the profiler is off again


def test_second_capture_in_the_same_process_with_options(target, tmp_path):
    result, error, events = _request(target, "train", ack=r"^trained", out=str(tmp_path), iterations=3,
                                     record_shapes=True, profile_memory=True, with_stack=True)
    assert error is None, error
    assert [e["event"] for e in events] == ["armed", "started", "iteration", "iteration", "done"]
    trace = _load(result["path"])
    _check_iterations(trace, 3)  # with_stack's tracer is a profile function; our boundary hook coexists
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    assert any("Input Dims" in e["args"] for e in ops)  # --record-shapes
    assert any(e.get("cat") == "python_function" for e in trace["traceEvents"])  # --with-stack
    assert any(e.get("name") == "[memory]" for e in trace["traceEvents"])  # --profile-memory
    assert target.state() == (False, False)


def test_marker_delimited_loop(target, tmp_path):
    result, error, _ = _request(target, "markers", ack=r"^marked", out=str(tmp_path), iterations=3)
    assert error is None, error
    trace = _load(result["path"])
    _check_iterations(trace, 3, optimizer=False)
    assert trace["xxnpu_on_demand"]["boundary"] == "marker"
    for s in _steps(trace):
        assert any(e.get("name") == "aten::mm" and _inside(e, s) for e in trace["traceEvents"])


def test_duration_capture_of_a_loop_without_boundaries(target, tmp_path):
    result, error, _ = _request(target, "ops", ack=r"^opsdone", out=str(tmp_path), duration_ms=300)
    assert error is None, error
    assert result["captured_ms"] >= 300
    trace = _load(result["path"])
    steps = _steps(trace)
    assert [s["name"] for s in steps] == ["ProfilerStep#0"]  # the whole window: no boundaries
    assert steps[0]["dur"] >= 300e3
    assert sum(e.get("cat") == "kernel" for e in trace["traceEvents"]) > 0
    assert target.state() == (False, False)


def test_programs_device_error_met_by_the_stop_is_handed_back_to_it(target, tmp_path):
    # torch.profiler's exit synchronizes: a kernel error the program has not met yet
    # surfaces there. It is the program's: it gets it back (from optimizer.step(), where
    # its own next synchronizing call would have raised it), and the trace is written.
    events, box = [], {}
    armed = threading.Event()

    def on_event(message):
        events.append(message)
        armed.set()

    def run():
        try:
            box["result"] = cli.request(target.pid, str(tmp_path), iterations=1, timeout=WAIT_S, on_event=on_event)
        except cli.CaptureError as e:
            box["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    assert armed.wait(WAIT_S)
    target.send("fail")
    target.out.expect(r"^raised torch.xxnpu.synchronize: kernel 'xxnpu::debug_fail' failed on xxnpu:0 stream 0: boom")
    target.out.expect(r"^failed")
    thread.join(WAIT_S)
    assert "error" not in box, (box, events, target.err.seen)
    result = box["result"]
    assert "kernel 'xxnpu::debug_fail' failed" in result["program_error"]
    trace = _load(result["path"])
    assert [s["name"] for s in _steps(trace)] == ["ProfilerStep#0"]
    assert any(e.get("cat") == "kernel" and e["name"] == "xxnpu::debug_fail" for e in trace["traceEvents"])
    assert target.state() == (False, False)


# --------------------------------------------------------------------------- errors


def test_second_request_is_refused_while_a_capture_runs_then_cancel_discards_it(target, tmp_path):
    busy = {}

    def second_request(message):
        if message["event"] == "started" and not busy:
            try:
                cli.request(target.pid, str(tmp_path / "b"), iterations=1, timeout=WAIT_S)
            except cli.CaptureError as e:
                busy["error"] = str(e)

    # The requester goes away (like a Ctrl-C'd CLI): the program stops the capture at its
    # next boundary and writes nothing.
    cancelled = r"capture cancelled by its requester after \d+ iteration\(s\); nothing written"
    _, error, events = _request(target, "train", ack=r"^trained", out=str(tmp_path / "a"), iterations=10**6,
                                on_event_hook=second_request, abort_after=2,
                                before_stop=lambda: target.err.expect(cancelled))
    assert isinstance(error, _Abort)
    assert re.search(rf"process {target.pid} refused the capture: a capture is already running in this process "
                     r"\(1000000 iterations to .+/a, requested [\d.]+ s ago by pid \d+\); one at a time",
                     busy["error"]), busy
    assert target.state() == (False, False)
    assert os.listdir(tmp_path / "a") == []


def test_timeout_without_steps_cancels_the_request(target, tmp_path, capsys):
    rc = cli.main(["--pid", str(target.pid), "--iterations", "2", "--out", str(tmp_path), "--timeout", "2.5"])
    assert rc == 1
    err = capsys.readouterr().err
    assert (f"error: timed out after 2.5 s: process {target.pid} reached no iteration boundary (no torch.optim "
            "optimizer step, no torch.xxnpu.markers.step() call) since the request. The request is cancelled: "
            "no capture will start. For a loop without either, use --duration-ms") in err
    # Steps after the timeout do not start the stale request.
    target.send("steps 4")
    target.out.expect(r"^stepped")
    assert target.state() == (False, False)
    assert os.listdir(tmp_path) == []  # a stale capture of 2 iterations would be written by now


@pytest.mark.parametrize("kind,why", [
    ("plain", "the program is inside a torch.profiler capture of its own"),
    ("scheduled", "the program has a torch.profiler.profile of its own that has not been exited "
                  r"\(waiting in its schedule, or started with start\(\) and not exited\)"),
])
def test_refused_inside_the_programs_own_profiler(target, tmp_path, kind, why):
    target.send(f"profiler {kind}")
    target.out.expect(r"^in-profiler")
    with pytest.raises(cli.CaptureError, match=rf"process {target.pid} refused the capture: {why}. An on-demand "
                                               "capture cannot share torch's profiler with the program's own"):
        cli.request(target.pid, str(tmp_path), iterations=1, timeout=WAIT_S)
    target.send("leave")
    target.out.expect(r"^left")
    assert os.listdir(tmp_path) == []


def test_no_such_process(tmp_path, capsys):
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert cli.main(["--pid", str(gone.pid), "--out", str(tmp_path)]) == 1
    assert f"error: no process with pid {gone.pid}\n" in capsys.readouterr().err


@pytest.mark.parametrize("value,message", [
    (None, "did not opt in to on-demand capture (XXNPU_PROFILER_ON_DEMAND is not set): start it with "
           "XXNPU_PROFILER_ON_DEMAND=1 in its environment (read when the program imports torch_xxnpu)"),
    ("1", "has XXNPU_PROFILER_ON_DEMAND=1 but is not listening: it has not imported torch_xxnpu (yet), or it "
          "is a forked child of the process that did (only that process listens)"),
])
def test_process_that_did_not_opt_in(tmp_path, capsys, value, message):
    # A plain Python process (no torch_xxnpu import): nothing listens at its address.
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], env=_env(value),
                             stdin=subprocess.PIPE)
    try:
        assert cli.main(["--pid", str(other.pid), "--out", str(tmp_path)]) == 1
        assert f"error: process {other.pid} {message}" in capsys.readouterr().err
    finally:
        other.communicate("")


def test_launchers_pid_points_to_its_listening_child(target):
    # --pid of a launcher (a shell, torchrun): here this process, the target's parent.
    message = cli._not_listening(os.getpid())
    assert message.startswith(f"process {os.getpid()} ")
    assert message.endswith(f"Its child process {target.pid} is listening: give --pid {target.pid}")


def test_iterations_below_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--pid", "1", "--iterations", "0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert ("argument --iterations: must be >= 1 (got 0): the number of iterations to capture"
            in capsys.readouterr().err)


# --------------------------------------------------------------------------- the agent's parts, in this process


def test_boundaries_count_iterations_not_events():
    a, b, m = ("optimizer", 1), ("optimizer", 2), ("marker",)
    # Two optimizers step in every iteration: one boundary per iteration.
    bounds = agent._Boundaries()
    assert [bounds.advance(s) for s in [a, b, a, b, a, b]] == [True, False, True, False, True, False]
    # Requested between the two steps of an iteration: the boundaries are b's from then on.
    bounds = agent._Boundaries()
    assert [bounds.advance(s) for s in [b, a, b, a, b]] == [True, False, True, False, True]
    # An optimizer and markers.step() in the same loop.
    bounds = agent._Boundaries()
    assert [bounds.advance(s) for s in [a, m, a, m]] == [True, False, True, False]


def test_main_thread_work_waits_until_it_is_outside_the_profilers_code():
    """A timed capture starts and stops in pending calls, which land between any two
    bytecodes of the main thread: not inside torch.profiler's own code (or the agent's)."""
    seen, ran = [], threading.Event()

    def probe():
        seen.append(agent._frames_busy())
        ran.set()

    def request_probe():  # from the spinning code: the probe lands inside it
        threading.Thread(target=agent._call_on_main_thread, args=(probe,)).start()

    deadline = time.monotonic() + WAIT_S
    spin = "request_probe()\nwhile not ran.is_set() and time.monotonic() < deadline: pass"
    names = {"request_probe": request_probe, "ran": ran, "time": time, "deadline": deadline}
    exec(compile(spin, agent._TORCH_PROFILER_DIR + "code_of_the_profiler.py", "exec"), names)
    ran.clear()
    exec(compile(spin, __file__, "exec"), names)
    assert seen == [True, False]


# --------------------------------------------------------------------------- last: exit


def test_program_exit_during_a_capture_writes_a_partial_trace(target, tmp_path):
    """Last (it ends the target): the program finishes while a capture runs; its exit
    completes the capture, and the program's results are those of an unprofiled run."""
    events, box, armed = [], {}, threading.Event()

    def on_event(message):
        events.append(message)
        armed.set()
        if message["event"] == "iteration" and sum(e["event"] == "iteration" for e in events) == 2:
            target.send("exit")  # the training loop ends, the program exits

    def run():
        box["result"] = cli.request(target.pid, str(tmp_path), iterations=10**6, timeout=WAIT_S, on_event=on_event)

    thread = threading.Thread(target=run)
    thread.start()
    assert armed.wait(WAIT_S)
    target.send("train")
    thread.join(WAIT_S)
    result = box["result"]
    assert re.fullmatch(r"partial: the program exited after \d+ of 1000000 iterations", result["partial"])
    trace = _load(result["path"])
    assert len(_steps(trace)) >= 2
    target.out.expect(r"^result ok \d+")
    assert target.proc.wait(WAIT_S) == 0
