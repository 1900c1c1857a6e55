"""opcheck: every op of PyTorch's OpInfo database and every torch.ops.xxnpu op, on xxnpu
against the CPU, per op and dtype.

    python -m torch_xxnpu.testing.opcheck [--ops add,mul] [--dtypes float32,float16]
        [--native-only] [--backward] [--compile] [-j 2] [--timeout 300]
        [--json out.json] [--markdown out.md] [--html out.html] [--baseline old.json]

For every (op, dtype) it takes the op's sample inputs (made on the CPU, seeded), copies
each to xxnpu with its strides, runs the op on both devices and compares the results with
the OpInfo's tolerances (its toleranceOverride / precisionOverride for that dtype, else
torch.testing.assert_close's defaults). It records whether the op ran natively or went
through the CPU fallback (the fallback counters' deltas around the op call), the status
(pass / fail / error / skipped with why / xfail / crashed / timeout), the largest absolute
and relative errors and the first failing sample (shapes, strides, dtypes, arguments).

Ops run in worker subprocesses: one that segfaults or hangs is reported as crashed or
timeout, its worker is replaced and the sweep goes on.

Exit status: 0 when nothing failed (with --baseline: nothing regressed against it),
1 otherwise, 2 on bad arguments.

Modules: ``cases`` (OpInfo and custom-op cases, loading and selecting them), ``samples``
(moving sample inputs between xxnpu and the CPU), ``compare`` (a result against the
CPU's), ``runner`` (one (op, dtype) inside a worker), ``worker`` (the worker process),
``pool`` (the main process's worker pool), ``cli``; ``dtypes`` (names, default
tolerances). The reports are ``torch_xxnpu.testing.report``.
"""
from torch_xxnpu.testing.opcheck.cases import (
    Case,
    CustomOpCase,
    OpInfoCase,
    SampleError,
    discover_custom_ops,
    load_cases,
    select_cases,
)
from torch_xxnpu.testing.opcheck.cli import build_parser, main
from torch_xxnpu.testing.opcheck.compare import compare
from torch_xxnpu.testing.opcheck.dtypes import dtype_name, parse_dtypes
from torch_xxnpu.testing.opcheck.pool import WorkerPool
from torch_xxnpu.testing.opcheck.runner import run_task
from torch_xxnpu.testing.opcheck.samples import DEVICE, copy_to, describe_sample, move_sample
from torch_xxnpu.testing.opcheck.worker import worker_main
from torch_xxnpu.testing.report import BAD, STATUSES

__all__ = [
    "BAD",
    "DEVICE",
    "STATUSES",
    "Case",
    "CustomOpCase",
    "OpInfoCase",
    "SampleError",
    "WorkerPool",
    "build_parser",
    "compare",
    "copy_to",
    "describe_sample",
    "discover_custom_ops",
    "dtype_name",
    "load_cases",
    "main",
    "move_sample",
    "parse_dtypes",
    "run_task",
    "select_cases",
    "worker_main",
]
