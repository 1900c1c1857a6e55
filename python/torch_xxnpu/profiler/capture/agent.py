"""The program's side of on-demand capture, installed by ``import torch_xxnpu`` when
XXNPU_PROFILER_ON_DEMAND=1 (nothing of it exists otherwise).

The mechanism, and why:

- **Requests arrive on a Unix socket** (protocol.address) accepted by one daemon
  thread blocked in accept(): it costs nothing while idle (no wake-ups, no polling), and
  a connection gives what a signal or a request file cannot: the agent answers at once
  (armed, busy, refused), reports progress and the trace's path on the same channel, and
  notices when the requester goes away (its timeout, Ctrl-C), which cancels the request
  so a later step cannot start a stale capture. A process that did not opt in has no
  socket, so a request cannot harm it; a signal's default action would kill it, and a
  signal handler would take a signal (SIGUSR1/2) away from programs and job schedulers
  that use it.
- **Captures start and stop on the thread that runs the loop.** torch.profiler's
  RecordFunction callbacks are thread-local: enableProfiler (profiler_kineto.cpp,
  pushProfilingCallbacks) registers them with at::addThreadLocalCallback on the thread
  that starts the profiler, and disableProfiler pops that thread's state. So the socket
  thread never touches the profiler; it only arms a request, and
  - with --iterations, the loop's own thread starts the capture at its next iteration
    boundary: torch.optim's global optimizer-step post hook, or an explicit
    torch.xxnpu.markers.step() for loops without an optimizer. Each later boundary is a
    torch.profiler step() (the trace's ProfilerStep#N ranges), the N-th one stops it.
  - with --duration-ms (loops without boundaries), the start and the stop are run on the
    main thread through Py_AddPendingCall, the mechanism behind Python's signal handlers
    (the main thread runs it between two bytecodes) without installing a handler.
- **A boundary inside Optimizer.step waits for step() to return.** The post hook runs
  inside step()'s record_function("Optimizer.step#...") range: a transition there would
  leave that range straddling two ProfilerStep ranges and, at the stop, unfinished (the
  last iteration's optimizer range lost). A one-shot trace function on step()'s frame
  runs the transition when that frame returns, after the range has closed. (A trace
  function, not a profile function: torch.profiler's with_stack tracer is a profile
  function.) Under a debugger or coverage tool (a trace function already set) the
  transition happens in the hook.

Idle cost per boundary: the hook reads one module global (None) and returns.
"""
import atexit
import collections
import ctypes
import json
import os
import socket
import struct
import sys
import threading
import time

import torch
from torch.autograd import profiler as _autograd_profiler
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import ProfilerAction, ProfilerActivity, profile

from torch_xxnpu.profiler.capture import protocol

_PREFIX = "[torch_xxnpu on-demand]"

# The armed or running capture; None when idle. The hooks' whole idle cost is reading it.
_current = None
# Guards _current and state changes of a capture (socket threads vs the loop's thread).
# Reentrant: a pending call may run on the main thread between two bytecodes of our own
# code; _frames_busy keeps it from doing work there, the RLock from deadlocking.
_lock = threading.RLock()
_listener = None
_connections = set()
_installed = False
_owner_pid = None
# One request is served at a time; a few more connections get their answer ("busy").
_MAX_CONNECTIONS = 8


# --------------------------------------------------------------------------- boundaries


class _Boundaries:
    """Turns boundary events from several sources into iterations.

    A loop with two optimizers (or an optimizer and markers.step()) reports two events
    per iteration. Like torch's KinetoStepTracker, each source counts its own steps and an
    iteration ends when the highest count rises. Unlike it, a source first seen after the
    first boundary joins at the current iteration (KinetoStepTracker counts its first step
    as one more), so a second optimizer does not double the count in the request's first
    iteration. Counting starts at the request: nothing is tracked while idle.
    """

    def __init__(self):
        self._counts = {}
        self._current = 0

    def advance(self, source):
        count = self._counts.get(source)
        if count is None:
            count = self._current - 1 if self._counts else self._current
        count += 1
        self._counts[source] = count
        if count > self._current:
            self._current = count
            return True
        return False


def _on_optimizer_step(optimizer, args, kwargs):
    """torch.optim's global post hook: an iteration boundary."""
    if _current is None:
        return
    _boundary(("optimizer", id(optimizer)), sys._getframe(1))


def _on_marker_step():
    """torch.xxnpu.markers.step(): an explicit iteration boundary."""
    if _current is None:
        return
    _boundary(("marker",), None)


def _boundary(source, caller):
    cap = _current
    if cap is None:
        return
    try:
        with _lock:  # two threads may step while the request waits for its first boundary
            if cap.owner is not None and cap.owner != threading.get_ident():
                return  # the capture belongs to the thread that started it
            if not cap.tracker.advance(source):
                return
            if cap.state == "armed" and cap.duration_ms is not None:
                return  # a time-bounded capture starts on the main thread, not at a boundary
        _after_return(caller, lambda: _transition(cap, source[0]))
    except torch.AcceleratorError:
        raise  # the program's own device error, met by the capture's stop (see _stop)
    except Exception as e:  # never into the program
        _abort(cap, f"internal error at an iteration boundary: {e!r}")


def _is_optimizer_step_frame(frame):
    code = frame.f_code
    return code.co_name == "wrapper" and code.co_filename == sys.modules["torch.optim.optimizer"].__file__


def _ignore_calls(frame, event, arg):
    return None


def _after_return(frame, action):
    """Runs ``action`` when ``frame`` (Optimizer.step's wrapper) returns, else now."""
    if frame is None or sys.gettrace() is not None or not _is_optimizer_step_frame(frame):
        action()
        return

    def on_frame_event(f, event, arg):
        if event == "return":
            sys.settrace(None)
            action()
            return None
        return on_frame_event

    # A global trace function is what makes CPython call the frame's f_trace; it declines
    # every new frame, so only step()'s own return (and exception) events reach us.
    sys.settrace(_ignore_calls)
    frame.f_trace_lines = False
    frame.f_trace = on_frame_event


# --------------------------------------------------------------------------- the capture


class _Capture:
    def __init__(self, request, conn, peer_pid):
        self.iterations = request.get("iterations")
        self.duration_ms = request.get("duration_ms")
        self.out = request["out"]
        self.record_shapes = bool(request.get("record_shapes"))
        self.profile_memory = bool(request.get("profile_memory"))
        self.with_stack = bool(request.get("with_stack"))
        self.conn = conn
        self.peer_pid = peer_pid
        self.state = "armed"  # -> running -> finished
        self.cancelled = False
        self.owner = None  # ident of the thread running the capture
        self.owner_thread = None
        self.prof = None
        self.tracker = _Boundaries()
        self.done = 0  # iterations completed
        self.source = None
        self.requested_at = time.monotonic()
        self.started_at = None

    def requester(self):
        # SO_PEERCRED gives 0 for a peer outside our pid namespace (a CLI on the host).
        return f"pid {self.peer_pid}" if self.peer_pid else "a process outside this pid namespace"

    def what(self):
        if self.iterations is not None:
            return f"{self.iterations} iteration{'s' if self.iterations != 1 else ''}"
        return f"{self.duration_ms:g} ms"

    def send(self, **message):
        """To the requester, never blocking the program: a full or closed socket drops it."""
        conn = self.conn
        if conn is None:
            return
        try:
            conn.sendall(protocol.encode(message), socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:
            pass


def _log(message):
    try:
        sys.stderr.write(f"{_PREFIX} {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


def _program_profiler(thread_local):
    """Why the program's own profiler forbids a capture now, or None.

    torch has one profiler session per process: starting one while the program's runs
    would end or corrupt the program's capture, so we refuse instead.
    """
    if _autograd_profiler._is_profiler_enabled:
        return "the program is inside a torch.profiler capture of its own"
    # torch.profiler.profile registers itself with KinetoStepTracker from __init__ until
    # __exit__: a profile waiting in its schedule (not recording yet) would start its own
    # session during ours. We unregister our own profile objects right after creating them.
    if "ProfilerStep" in getattr(_autograd_profiler.KinetoStepTracker, "_step_dict", {}):
        return ("the program has a torch.profiler.profile of its own that has not been exited "
                "(waiting in its schedule, or started with start() and not exited)")
    if thread_local and torch.autograd._profiler_enabled():
        return "the program's thread is under a profiler of its own (e.g. emit_xxnpu, emit_nvtx)"
    return None


def _forget_our_profile_object():
    _autograd_profiler.KinetoStepTracker.erase_step_count("ProfilerStep")


def _transition(cap, source_kind):
    """An iteration boundary on the capture's thread (after Optimizer.step returned)."""
    try:
        with _lock:
            if _current is not cap or cap.state == "finished":
                return
            starting = cap.state == "armed"
            if starting:
                cap.state = "running"
                cap.owner = threading.get_ident()
                cap.owner_thread = threading.current_thread()
            elif cap.owner != threading.get_ident():
                return  # another thread's boundary, deferred before this one started it
        if starting:
            cap.source = source_kind
            _start(cap)
            return
        if cap.cancelled:
            _stop(cap, export=False)
            return
        lost = _lost()
        if lost:
            _finish(cap, error=("lost", lost))
            return
        cap.done += 1
        if cap.iterations is not None and cap.done >= cap.iterations:
            _stop(cap, export=True)
        else:
            cap.prof.step()
            _forget_our_profile_object()  # step() re-registers it under KINETO_USE_DAEMON
            cap.send(event="iteration", done=cap.done)
    except torch.AcceleratorError:
        raise  # the program's own device error, met by the capture's stop (see _stop)
    except Exception as e:
        _abort(cap, f"internal error at an iteration boundary: {e!r}")


def _abort(cap, message):
    """Ends a capture after an error of ours, without leaving the profiler on."""
    if cap.prof is not None and cap.state == "running" and cap.owner == threading.get_ident():
        try:
            cap.prof.stop()
        except Exception:
            pass
    _finish(cap, error=("internal", message))


def _lost():
    """Why our running capture is no longer torch's session, or None (checked on its thread)."""
    if not torch.autograd._profiler_enabled():
        return ("the program started a torch.profiler of its own during the capture, which "
                "took over torch's profiler session; the on-demand capture is lost")
    if "ProfilerStep" in getattr(_autograd_profiler.KinetoStepTracker, "_step_dict", {}):
        return ("the program created a torch.profiler.profile of its own during the capture; "
                "the on-demand capture is abandoned to it")
    return None


def _schedule(cap):
    if cap.iterations is None:
        return lambda step: ProfilerAction.RECORD
    last = cap.iterations - 1
    return lambda step: ProfilerAction.RECORD_AND_SAVE if step >= last else ProfilerAction.RECORD


def _start(cap):
    conflict = _program_profiler(thread_local=True)
    if conflict:
        _finish(cap, error=("profiler", conflict))
        return
    prof = profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        # A schedule makes torch.profiler record ProfilerStep#N ranges (HTA's iterations).
        schedule=_schedule(cap),
        record_shapes=cap.record_shapes,
        profile_memory=cap.profile_memory,
        with_stack=cap.with_stack,
    )
    _forget_our_profile_object()
    try:
        prof.start()
    except Exception as e:
        try:
            prof.stop()
        except Exception:
            pass
        _finish(cap, error=("start", f"torch.profiler failed to start: {e}"))
        return
    cap.prof = prof
    cap.started_at = time.monotonic()
    prof.add_metadata_json("xxnpu_on_demand", json.dumps({
        "iterations": cap.iterations, "duration_ms": cap.duration_ms, "boundary": cap.source,
        "requested_by_pid": cap.peer_pid}))
    where = {"optimizer": "at an optimizer step", "marker": "at a torch.xxnpu.markers.step()"}.get(
        cap.source, "on the main thread")
    cap.send(event="started", at=where)
    _log(f"capturing {cap.what()}, started {where} (requested by {cap.requester()})")


def _stop(cap, export, partial=None):
    """Stops the capture on its thread; writes the trace unless it was cancelled."""
    t0 = time.perf_counter()
    program_error = None
    try:
        cap.prof.stop()
    except Exception as e:
        # torch.profiler's exit synchronizes the device: a kernel error the program has not
        # met yet surfaces here, and torch leaves the capture running. The error is the
        # program's (it would have met it at its next synchronizing call), so it gets it
        # back below; the capture is completed first (docs/profiler.md, "A kernel that fails").
        if isinstance(e, torch.AcceleratorError):
            program_error = e
        try:
            cap.prof.stop()
        except Exception as again:
            _finish(cap, error=("stop", f"torch.profiler failed to stop: {again}"))
            _raise_program_error(program_error)
            return
    captured_ms = (time.monotonic() - cap.started_at) * 1e3
    if not export:
        _finish(cap, error=("cancelled", "cancelled by the requester"))
        _log(f"capture cancelled by its requester after {cap.done} iteration(s); nothing written")
        _raise_program_error(program_error)
        return
    path = protocol.trace_name(cap.out, socket.gethostname(), os.getpid(), time.time_ns())
    try:
        cap.prof.export_chrome_trace(path)
    except Exception as e:
        _finish(cap, error=("write", f"writing the trace to {path} failed: {e}"))
        _raise_program_error(program_error)
        return
    paused_ms = (time.perf_counter() - t0) * 1e3
    # steps: boundaries passed (= iterations for an iteration capture); captured_ms: first
    # boundary to stop; paused_ms: what ending the capture cost the program's loop.
    result = dict(path=path, steps=cap.done, captured_ms=round(captured_ms, 1), paused_ms=round(paused_ms, 1))
    if partial:
        result["partial"] = partial
    if program_error is not None:
        result["program_error"] = str(program_error)
    _finish(cap, result=result)
    _log(f"trace written to {path}" + (f" ({partial})" if partial else ""))
    _raise_program_error(program_error)


def _raise_program_error(error):
    if error is not None:
        raise error


def _finish(cap, result=None, error=None):
    """Ends a request (once) and tells its requester."""
    global _current
    with _lock:
        if cap.state == "finished":
            return
        cap.state = "finished"
        if _current is cap:
            _current = None
        if result is not None:
            cap.send(event="done", **result)
        elif error is not None:
            reason, message = error
            cap.send(event="error", reason=reason, message=message)
            if reason not in ("cancelled",):
                _log(message)
        cap.conn = None  # the connection's thread closes it


def _cancel(cap):
    """The requester went away (timeout, Ctrl-C) or asked to cancel."""
    global _current
    with _lock:
        if cap.state == "armed":
            cap.state = "finished"
            cap.cancelled = True
            cap.conn = None
            if _current is cap:
                _current = None
            return
        if cap.state != "running":
            return
        cap.cancelled = True
        cap.conn = None
    # Only the capture's own thread can stop it: at its next boundary for an iteration
    # capture, at once (between two bytecodes) on the main thread for a timed one.
    if cap.duration_ms is not None:
        _call_on_main_thread(lambda: _stop_on_main(cap))


# --------------------------------------------------------------------------- main thread


_PENDING_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_main_queue = collections.deque()
_main_callback = None
_add_pending_call = None


def _run_main_queue(_arg):
    while _main_queue:
        try:
            fn = _main_queue.popleft()
        except IndexError:
            break
        try:
            fn()
        except BaseException as e:  # a pending call must not raise into the program
            _log(f"internal error on the main thread: {e!r}")
    return 0


def _call_on_main_thread(fn):
    """Runs fn on the main thread at its next bytecode boundary (Py_AddPendingCall)."""
    global _main_callback, _add_pending_call
    if _main_callback is None:
        _add_pending_call = ctypes.pythonapi.Py_AddPendingCall
        _add_pending_call.argtypes = [_PENDING_FN, ctypes.c_void_p]
        _add_pending_call.restype = ctypes.c_int
        _main_callback = _PENDING_FN(_run_main_queue)  # kept for the process's life
    _main_queue.append(fn)
    _schedule_main_queue()


def _schedule_main_queue():
    if _add_pending_call(_main_callback, None) != 0:  # the interpreter's queue is full
        _later(0.01, _schedule_main_queue)


def _later(seconds, fn):
    timer = threading.Timer(seconds, fn)
    timer.daemon = True
    timer.start()


def _frames_busy():
    """Whether the main thread was interrupted inside the profiler's code or ours.

    A pending call runs between any two bytecodes: starting or stopping a capture in the
    middle of torch.profiler's own code (or of our transition) would break its state, and
    inside Optimizer.step it would cut its range (as a boundary there would, see
    _after_return). The frames below _run_main_queue's are the interrupted ones.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not _run_main_queue.__code__:
        frame = frame.f_back
    frame = frame.f_back if frame is not None else None
    while frame is not None:
        name = frame.f_code.co_filename
        if (name == __file__ or name.startswith(_TORCH_PROFILER_DIR) or name == _AUTOGRAD_PROFILER_FILE
                or _is_optimizer_step_frame(frame)):
            return True
        frame = frame.f_back
    return False


_TORCH_PROFILER_DIR = os.path.dirname(torch.profiler.__file__) + os.sep
_AUTOGRAD_PROFILER_FILE = _autograd_profiler.__file__


def _start_on_main(cap):
    if _current is not cap or cap.state != "armed":
        return
    if _frames_busy():
        _later(0.002, lambda: _call_on_main_thread(lambda: _start_on_main(cap)))
        return
    with _lock:
        if _current is not cap or cap.state != "armed":
            return
        cap.state = "running"
        cap.owner = threading.get_ident()
        cap.owner_thread = threading.current_thread()
    _start(cap)
    if cap.state == "running":
        _later(cap.duration_ms / 1e3, lambda: _call_on_main_thread(lambda: _stop_on_main(cap)))


def _stop_on_main(cap):
    if cap.state != "running":
        return
    if _frames_busy():
        _later(0.002, lambda: _call_on_main_thread(lambda: _stop_on_main(cap)))
        return
    lost = _lost()
    if lost:
        _finish(cap, error=("lost", lost))
        return
    try:
        _stop(cap, export=not cap.cancelled)
    except torch.AcceleratorError as e:
        # A pending call cannot raise into the program: say so where the program logs.
        _log(f"the program's device error surfaced at the capture's stop: {e}")


# --------------------------------------------------------------------------- requests


def _peer_credentials(conn):
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def _validate(request):
    """The request's problem as (reason, message), or None."""
    if request.get("protocol") != protocol.PROTOCOL:
        return ("protocol", f"unsupported request protocol {request.get('protocol')!r} "
                            f"(this torch_xxnpu speaks {protocol.PROTOCOL})")
    if request.get("op") != "capture":
        return ("invalid", f"unknown request {request.get('op')!r}")
    iterations, duration_ms = request.get("iterations"), request.get("duration_ms")
    if (iterations is None) == (duration_ms is None):
        return ("invalid", "give exactly one of iterations and duration_ms")
    if iterations is not None and (not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1):
        return ("invalid", f"iterations must be an integer >= 1 (got {iterations!r})")
    if duration_ms is not None and (not isinstance(duration_ms, (int, float)) or not duration_ms > 0):
        return ("invalid", f"duration_ms must be > 0 (got {duration_ms!r})")
    out = request.get("out")
    if not isinstance(out, str) or not os.path.isabs(out):
        return ("invalid", f"out must be an absolute directory (got {out!r})")
    if not os.path.isdir(out) or not os.access(out, os.W_OK | os.X_OK):
        return ("out", f"the program (pid {os.getpid()}) cannot write to {out}")
    return None


def _arm(request, conn, peer_pid):
    """Arms a capture, or returns why not as (None, (reason, message))."""
    global _current
    problem = _validate(request)
    if problem:
        return None, problem
    with _lock:
        cap = _current
        if cap is not None and cap.owner_thread is not None and not cap.owner_thread.is_alive():
            # Its thread ended mid-capture (and its profiler state with it): forget it.
            _finish(cap, error=("lost", "the capture's thread ended during the capture"))
            cap = None
        if cap is not None:
            age = time.monotonic() - cap.requested_at
            doing = "running" if cap.state == "running" else "waiting for its start"
            return None, ("busy", f"a capture is already {doing} in this process ({cap.what()} to "
                                  f"{cap.out}, requested {age:.1f} s ago by {cap.requester()}); one at a time")
        conflict = _program_profiler(thread_local=False)
        if conflict:
            return None, ("profiler", conflict)
        if request.get("duration_ms") is not None and not threading.main_thread().is_alive():
            return None, ("main", "a timed capture runs on the main thread, which has ended")
        cap = _Capture(request, conn, peer_pid)
        # Published, then "armed" sent, both under the lock a boundary takes: every boundary
        # after the requester hears "armed" sees the capture, and "started" comes after it.
        _current = cap
        how = ("from the next iteration boundary (optimizer step or torch.xxnpu.markers.step())"
               if cap.iterations is not None else "on the main thread")
        cap.send(event="armed", pid=os.getpid(), what=cap.what(), how=how)
    if cap.duration_ms is not None:
        _call_on_main_thread(lambda: _start_on_main(cap))
    return cap, None


def _serve_connection(conn):
    cap = None
    try:
        conn.settimeout(10.0)  # a requester that connects and says nothing
        peer_pid, peer_uid = _peer_credentials(conn)
        reader = protocol.LineReader(conn)
        if peer_uid not in (os.geteuid(), 0):
            conn.sendall(protocol.encode({"event": "error", "reason": "permission", "message":
                                          f"user {peer_uid} may not profile this process (owned by user {os.geteuid()})"}))
            return
        try:
            request = reader.read()
        except (ValueError, OSError) as e:
            conn.sendall(protocol.encode({"event": "error", "reason": "invalid", "message": f"bad request: {e}"}))
            return
        if request is None:
            return
        cap, problem = _arm(request, conn, peer_pid)
        if problem:
            reason, message = problem
            conn.sendall(protocol.encode({"event": "error", "reason": reason, "message": message}))
            return
        conn.settimeout(None)
        # Wait for the requester to cancel or go away; after "done"/"error" it closes.
        while True:
            try:
                message = reader.read()
            except (ValueError, OSError):
                break
            if message is None or message.get("op") == "cancel":
                break
    except Exception as e:
        _log(f"internal error serving a request: {e!r}")
    finally:
        if cap is not None:
            _cancel(cap)
        with _lock:
            _connections.discard(conn)
        try:
            conn.close()
        except OSError:
            pass


def _serve(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            if _listener is not listener:
                return  # closed (fork child, shutdown)
            time.sleep(0.1)  # EMFILE and the like: do not spin
            continue
        with _lock:
            if len(_connections) >= _MAX_CONNECTIONS:  # a flood of clients: no thread each
                conn.close()
                continue
            _connections.add(conn)
        threading.Thread(target=_serve_connection, args=(conn,), name="xxnpu-on-demand-request", daemon=True).start()


# --------------------------------------------------------------------------- lifecycle


def _at_exit():
    """The program is exiting with a request open: finish it rather than leave the
    requester waiting (atexit runs on the main thread, before daemon threads stop)."""
    cap = _current
    if cap is None or os.getpid() != _owner_pid:
        return
    try:
        if cap.state == "armed":
            _finish(cap, error=("exit", "the program exited before the capture started"))
        elif cap.state == "running":
            if cap.owner == threading.get_ident() and not cap.cancelled:
                note = f"partial: the program exited after {cap.done} iteration(s)"
                if cap.iterations is not None:
                    note = f"partial: the program exited after {cap.done} of {cap.iterations} iterations"
                _stop(cap, export=True, partial=note)
            elif cap.owner == threading.get_ident():
                _stop(cap, export=False)
            else:
                _finish(cap, error=("exit", f"the program exited during the capture ({cap.done} iteration(s) done "
                                            "on a thread other than the main thread: the trace is lost)"))
    except BaseException as e:
        _log(f"could not finish the capture at exit: {e!r}")


def _after_fork_in_child():
    """A forked child (a DataLoader worker, ...) inherits our state but not our threads:
    it does not listen (the parent does, under the parent's pid) and has no request."""
    global _current, _listener
    _current = None
    for sock in [_listener, *_connections]:
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
    _listener = None
    _connections.clear()


def install():
    """Listens for capture requests and hooks the iteration boundaries (idempotent)."""
    global _installed, _listener, _owner_pid
    if _installed:
        return
    _installed = True
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        listener.bind(protocol.own_address())
        listener.listen(4)
    except OSError as e:
        listener.close()
        _log(f"{protocol.ENV_VAR} is set but on-demand capture is off: cannot listen ({e})")
        return
    _listener = listener
    _owner_pid = os.getpid()
    register_optimizer_step_post_hook(_on_optimizer_step)
    from torch_xxnpu.xxnpu import markers

    markers._step_hook = _on_marker_step
    os.register_at_fork(after_in_child=_after_fork_in_child)
    atexit.register(_at_exit)
    threading.Thread(target=_serve, args=(listener,), name="xxnpu-on-demand", daemon=True).start()
