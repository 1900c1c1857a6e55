"""The requester: ``python -m torch_xxnpu.profiler.capture --pid N --iterations K --out DIR``.

Connects to the program's agent (protocol.address), sends the request, prints progress on
stderr and the trace's path on stdout. Waiting ends with the trace, an error from the
program, or --timeout, which cancels the request (closing the connection cancels it too,
so Ctrl-C does). ``request()`` is the same for Python callers.
"""
import argparse
import os
import socket
import sys
import time

from torch_xxnpu.profiler.capture import protocol

DEFAULT_ITERATIONS = 5
DEFAULT_TIMEOUT_S = 60.0


class CaptureError(Exception):
    """A capture that could not be taken; the message says why and what was expected."""


def _address_of(pid):
    """The address of the program with pid ``pid`` (as this process sees it): named after
    its pid as it sees itself (the last NSpid in /proc/PID/status) and its pid namespace."""
    own_pid = pid
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    own_pid = int(line.split()[-1])
                    break
    except (OSError, ValueError, IndexError):
        pass
    namespace = protocol.namespace_inode(pid, "pid") or protocol.namespace_inode("self", "pid") or 0
    return protocol.address(own_pid, namespace)


def _other_network_namespace(pid):
    theirs, ours = protocol.namespace_inode(pid, "net"), protocol.namespace_inode("self", "net")
    return theirs is not None and ours is not None and theirs != ours


def _listening_children(pid):
    """Child processes of pid that do listen: --pid was a launcher's (a shell, torchrun)."""
    found = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return found
    for child in children:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            probe.settimeout(1.0)
            probe.connect(_address_of(child))
            found.append(child)
        except OSError:
            pass
        finally:
            probe.close()
    return found


def _not_listening(pid):
    message = _why_not_listening(pid)
    children = _listening_children(pid)
    if children:
        listed = ", ".join(str(c) for c in children)
        message += (f". Its child process{'es' if len(children) > 1 else ''} {listed} "
                    f"{'are' if len(children) > 1 else 'is'} listening: give --pid {children[0]}")
    return message


def _why_not_listening(pid):
    """Why nothing answers at pid's address: the program's environment tells opt-in apart
    from not-yet-imported (/proc/PID/environ is the environment it was started with)."""
    how = (f"start it with {protocol.ENV_VAR}=1 in its environment (read when the program "
           "imports torch_xxnpu)")
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except OSError:
        return f"process {pid} is not listening for on-demand capture requests: {how}"
    value = env.get(protocol.ENV_VAR.encode())
    if not protocol.enabled(value.decode(errors="replace") if value is not None else None):
        shown = "is not set" if value is None else f"is {value.decode(errors='replace')!r}"
        return f"process {pid} did not opt in to on-demand capture ({protocol.ENV_VAR} {shown}): {how}"
    return (f"process {pid} has {protocol.ENV_VAR}={value.decode(errors='replace')} but is not listening: "
            "it has not imported torch_xxnpu (yet), or it is a forked child of the process that did "
            "(only that process listens)")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a process that exited but was not reaped yet is a zombie: gone for us
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _refusal(pid, message):
    reason = message.get("reason")
    text = message.get("message", "")
    if reason == "profiler":
        return (f"process {pid} refused the capture: {text}. An on-demand capture cannot share torch's "
                "profiler with the program's own; retry when the program's capture has ended")
    if reason == "busy":
        return f"process {pid} refused the capture: {text}"
    if reason == "cancelled":
        return f"process {pid}: the capture was cancelled"
    return f"process {pid}: {text}"


def _timeout_message(pid, timeout, iterations, duration_ms, armed, started, done):
    if not armed:
        return (f"process {pid} did not answer within {timeout:g} s (its listener thread needs the GIL: "
                "is the program inside a long call that holds it?)")
    if not started and iterations is not None:
        return (f"timed out after {timeout:g} s: process {pid} reached no iteration boundary (no torch.optim "
                "optimizer step, no torch.xxnpu.markers.step() call) since the request. The request is "
                "cancelled: no capture will start. For a loop without either, use --duration-ms")
    if not started:
        return (f"timed out after {timeout:g} s: the main thread of process {pid} ran no Python code since the "
                "request (blocked in a long call, or waiting for threads that do the work: --iterations captures "
                "the thread that steps). The request is cancelled: no capture will start")
    if iterations is not None:
        return (f"timed out after {timeout:g} s: the capture started but only {done} of {iterations} "
                f"iterations completed. Cancelled: process {pid} stops the capture at its next iteration "
                "boundary and discards it. Give a larger --timeout for slow iterations")
    return (f"timed out after {timeout:g} s waiting for the end of the {duration_ms:g} ms capture (the main "
            f"thread of process {pid} ran no Python code since). Cancelled: it stops and discards the capture")


def request(pid, out, iterations=None, duration_ms=None, record_shapes=False, profile_memory=False,
            with_stack=False, timeout=DEFAULT_TIMEOUT_S, on_event=None):
    """Asks process ``pid`` for a capture of ``iterations`` iterations (or ``duration_ms``)
    into directory ``out`` and waits for it, at most ``timeout`` seconds.

    Returns the program's final message: a dict with ``path`` (the trace), ``steps``,
    ``captured_ms``, ``paused_ms`` (how long the program stopped to finish the capture
    and write it) and, for a capture cut short by the program's exit, ``partial``.
    ``on_event(message)`` sees every message as it arrives ("armed", "started",
    "iteration", ...). Raises CaptureError (with what was expected) or ValueError.
    """
    if (iterations is None) == (duration_ms is None):
        raise ValueError("give exactly one of iterations and duration_ms")
    if iterations is not None and iterations < 1:
        raise ValueError(f"iterations must be >= 1 (got {iterations})")
    if duration_ms is not None and not duration_ms > 0:
        raise ValueError(f"duration_ms must be > 0 (got {duration_ms})")
    if pid <= 0:
        raise CaptureError(f"invalid pid {pid}")
    if pid == os.getpid():
        raise CaptureError("a process cannot capture itself this way: run the request from another process")
    if not _alive(pid):
        raise CaptureError(f"no process with pid {pid}")
    out = os.path.abspath(out)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise CaptureError(f"cannot create the output directory {out}: {e.strerror}") from None

    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            sock.connect(_address_of(pid))
        except (ConnectionRefusedError, FileNotFoundError):
            if _other_network_namespace(pid):  # abstract sockets do not cross network namespaces
                raise CaptureError(
                    f"process {pid} is in another network namespace (a container?), where this command "
                    f"cannot reach it: run it there (docker exec, kubectl exec, nsenter --target {pid} --net)"
                ) from None
            raise CaptureError(_not_listening(pid)) from None
        sock.sendall(protocol.encode({
            "protocol": protocol.PROTOCOL, "op": "capture", "iterations": iterations,
            "duration_ms": duration_ms, "out": out, "record_shapes": bool(record_shapes),
            "profile_memory": bool(profile_memory), "with_stack": bool(with_stack)}))
        reader = protocol.LineReader(sock)
        armed = started = False
        done = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise socket.timeout()
                sock.settimeout(remaining)
                message = reader.read()
            except socket.timeout:
                try:  # best effort: closing the connection cancels as well
                    sock.sendall(protocol.encode({"op": "cancel"}))
                except OSError:
                    pass
                raise CaptureError(_timeout_message(pid, timeout, iterations, duration_ms, armed, started,
                                                    done)) from None
            except ConnectionResetError:
                message = None  # the program closed (or exited) without reading everything
            except (ValueError, OSError) as e:
                raise CaptureError(f"unreadable answer from process {pid}: {e}") from None
            if message is None:
                if not _alive(pid):
                    raise CaptureError(f"process {pid} exited before the capture completed")
                raise CaptureError(f"process {pid} closed the connection before the capture completed")
            if on_event is not None:
                on_event(message)
            event = message.get("event")
            if event == "armed":
                armed = True
            elif event == "started":
                armed = started = True
            elif event == "iteration":
                done = message.get("done", done)
            elif event == "done":
                return message
            elif event == "error":
                raise CaptureError(_refusal(pid, message))
    finally:
        sock.close()


def _at_least_one(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of iterations >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value}): the number of iterations to capture")
    return value


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    return value


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m torch_xxnpu.profiler.capture",
        description="Take a torch.profiler trace (CPU + xxnpu) of a running program started with "
                    f"{protocol.ENV_VAR}=1. Prints the trace's path.")
    p.add_argument("--pid", type=int, required=True, help="the program's process id")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--iterations", type=_at_least_one,
                      help=f"capture this many iterations from the next boundary: torch.optim optimizer "
                           f"steps, or torch.xxnpu.markers.step() calls (default {DEFAULT_ITERATIONS})")
    what.add_argument("--duration-ms", type=_positive,
                      help="capture this long instead, started on the program's main thread (for loops "
                           "without boundaries)")
    p.add_argument("--out", required=True, help="directory the program writes the trace into (created)")
    p.add_argument("--record-shapes", action="store_true", help="record ops' input shapes")
    p.add_argument("--profile-memory", action="store_true", help="record allocations and frees")
    p.add_argument("--with-stack", action="store_true", help="record Python stacks")
    p.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds to wait for the trace, start to end (default {DEFAULT_TIMEOUT_S:g}); "
                        "then the request is cancelled")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    iterations = args.iterations
    if iterations is None and args.duration_ms is None:
        iterations = DEFAULT_ITERATIONS

    def progress(message):
        event = message.get("event")
        if event == "armed":
            print(f"capture: process {args.pid} will capture {message.get('what')} {message.get('how')}",
                  file=sys.stderr, flush=True)
        elif event == "started":
            print(f"capture: started {message.get('at')}", file=sys.stderr, flush=True)

    try:
        result = request(args.pid, args.out, iterations=iterations, duration_ms=args.duration_ms,
                         record_shapes=args.record_shapes, profile_memory=args.profile_memory,
                         with_stack=args.with_stack, timeout=args.timeout, on_event=progress)
    except CaptureError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    if iterations is not None:
        what = f"{result['steps']} iteration{'s' if result['steps'] != 1 else ''} in {result['captured_ms']:g} ms"
    else:
        what = f"{result['captured_ms']:g} ms, {result['steps']} iteration boundaries"
    print(f"capture: {what}; the program paused {result['paused_ms']:g} ms to stop the capture and write the "
          "trace", file=sys.stderr)
    if result.get("partial"):
        print(f"capture: {result['partial']}", file=sys.stderr)
    if result.get("program_error"):
        print(f"capture: the program's own device error surfaced at the capture's stop and was handed back "
              f"to it: {result['program_error']}", file=sys.stderr)
    print(result["path"], flush=True)
    return 0
