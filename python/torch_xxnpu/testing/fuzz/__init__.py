"""fuzz: a differential fuzzer for xxnpu kernels, on hypothesis.

    python -m torch_xxnpu.testing.fuzz [--ops add,gather] [--probes out_*] [--max-examples 40]
        [--seconds 120] [--seed 0] [--known-failures FILE] [--regressions FILE] [--json report.json]
    python -m torch_xxnpu.testing.fuzz --replay TOKEN        # exactly one case, as a finding printed it

The ops are PyTorch's OpInfo ops whose aten op has an xxnpu kernel (the dispatcher's
PrivateUse1 registrations) and the torch.ops.xxnpu custom ops. For each, hypothesis draws
cases: one of the op's samples (opcheck's, ``torch_xxnpu.testing.opcheck``) changed by a
probe -- other layouts (transposed, sliced, offset, expanded, overlapping), broadcast
shapes with 0-d and empty tensors (ufuncs), extreme values (inf, nan, -0.0, huge,
denormals, integer limits), a tensor cast to another dtype, a tensor on another device,
out= of the wrong dtype / shape / device, aliasing an input or overlapping itself, the
in-place variant, out-of-range and negative index values. A case runs on the CPU and on
xxnpu in a worker subprocess: the results must match within the OpInfo's tolerances
(NaN where the CPU has NaN), or both sides raise the same exception class; mixed devices
and out= on another device must be rejected with a RuntimeError, as CUDA does.

A finding is distinct per (op, probe, kind); hypothesis's shrinker minimises the first
case of each, which is then set aside so the search goes on. A crash or hang kills only
the worker: the case is reported and a spare worker takes over. Exit status 1 when a
finding is not in --known-failures, 0 otherwise, 2 for bad arguments.

Modules: ``spec`` (cases as data, replay tokens, signatures, known failures), ``targets``
(which ops, dtypes, probes), ``strategies`` (hypothesis), ``execute`` (a case in a
worker), ``worker`` (the worker process and its handle), ``cli``.
"""
from torch_xxnpu.testing.fuzz.cli import build_parser, main
from torch_xxnpu.testing.fuzz.spec import FINDING_KINDS, KnownFailures, from_token, signature, token

__all__ = ["FINDING_KINDS", "KnownFailures", "build_parser", "from_token", "main", "signature", "token"]
