"""What the requesting CLI and the program's agent share: the opt-in variable, the
address, the message format. Torch-free, so the CLI side stays light.

One request per connection, JSON lines both ways:

    CLI -> agent   {"protocol": 1, "op": "capture", "iterations": 5 | null,
                    "duration_ms": null | 500, "out": "/abs/dir", "record_shapes": false,
                    "profile_memory": false, "with_stack": false}
                   {"op": "cancel"}                    (or simply closing the connection)
    agent -> CLI   {"event": "armed", "pid": N, ...}    then "started", "iteration" (one
                   per completed iteration), and finally "done" (with "path") or "error"
                   (with "reason" and "message"); an "error" may also come instead of
                   "armed".
"""
import json
import os

ENV_VAR = "XXNPU_PROFILER_ON_DEMAND"
PROTOCOL = 1

# A message is a short JSON object; anything longer is not ours.
MAX_LINE = 64 * 1024


def enabled(value):
    """Whether a value of XXNPU_PROFILER_ON_DEMAND (another process's, as the CLI reads it)
    turns on-demand capture on: torch_xxnpu._env's true values. Not raising: a malformed
    value already failed that process's import."""
    from torch_xxnpu._env import TRUE_VALUES

    return (value or "").strip().lower() in TRUE_VALUES


def address(pid, pid_namespace):
    """The agent's socket: a Linux abstract Unix socket named after the program's pid as
    the program sees it and its pid namespace (the inode of /proc/PID/ns/pid).

    Abstract, not a file: nothing is left behind when the program dies (no stale file a
    later process with the same pid would have to clean), and no directory has to agree
    between the program's and the CLI's TMPDIR. Abstract names are shared by everything
    in a network namespace, which several pid namespaces can share (containers of one
    Kubernetes pod, sandboxed tests run in parallel), each with its own pid 1, 2, ...:
    the pid namespace in the name keeps their programs apart. Anyone on the host can
    connect to an abstract name, so the agent accepts only its own user (and root) by
    the peer's credentials (SO_PEERCRED).
    """
    return "\0torch_xxnpu.profiler.on_demand.%d.%d" % (pid_namespace, pid)


def namespace_inode(pid, kind):
    """The inode of /proc/PID/ns/KIND ("pid", "net"), or None if it cannot be read."""
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def own_address():
    return address(os.getpid(), namespace_inode("self", "pid") or 0)


def encode(message):
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


class LineReader:
    """Reads newline-terminated JSON messages from a socket (honours its timeout)."""

    def __init__(self, sock):
        self._sock = sock
        self._buf = b""

    def read(self):
        """The next message, or None at end of stream; ValueError on a malformed one."""
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_LINE:
                raise ValueError("message too long")
            chunk = self._sock.recv(4096)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("message is not a JSON object")
        return message


def trace_name(directory, hostname, pid, time_ns):
    """tensorboard_trace_handler's naming (``<host>_<pid>.<ns>.pt.trace.json``), so the
    directory can be handed to TensorBoard or HTA as it is."""
    return os.path.join(directory, f"{hostname}_{pid}.{time_ns}.pt.trace.json")
