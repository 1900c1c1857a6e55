"""The trace's event categories and the timed event the analysis passes work on."""
import re

from torch_xxnpu.profiler.analysis.numeric import is_num, to_ns

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
# What HTA and Perfetto expect on a device row besides device work.
DEVICE_ROW_CATS = set(DEVICE_CATS) | {"gpu_user_annotation", "cuda_sync"}
RUNTIME_CATS = {"privateuse1_runtime", "privateuse1_driver", "cuda_runtime", "cuda_driver"}
OP_CAT = "cpu_op"
COMM_RE = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|barrier|\bsend\b|\brecv\b|"
    r"nccl|xxccl|c10d::|record_param_comms",
    re.IGNORECASE,
)


class Event:
    """A timed trace event with integer-nanosecond bounds; ``idx`` is its traceEvents index."""

    __slots__ = ("name", "cat", "pid", "tid", "start", "end", "args", "idx")

    def __init__(self, e, idx):
        self.name = str(e.get("name", ""))
        self.cat = e.get("cat")
        self.pid = e.get("pid")
        self.tid = e.get("tid")
        self.start = to_ns(e["ts"])
        self.end = self.start + (to_ns(e["dur"]) if is_num(e.get("dur")) else 0)
        args = e.get("args")
        self.args = args if isinstance(args, dict) else {}
        self.idx = idx

    @property
    def row(self):
        return (self.pid, self.tid)

    @property
    def dur(self):
        return self.end - self.start


def row_key(row):
    # Rows mix int and str pids/tids; sort them deterministically.
    return tuple((0, v) if is_num(v) else (1, str(v)) for v in row)
