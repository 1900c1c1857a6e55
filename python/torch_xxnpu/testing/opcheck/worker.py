"""The worker process: reads tasks (JSON lines) on stdin, runs them, answers on the
protocol fd; and the set-up (imports, --import plugins) it shares with the main process."""
import argparse
import json
import os
import sys
import traceback
import warnings
from typing import List

from torch_xxnpu.testing.opcheck.cases import load_cases
from torch_xxnpu.testing.opcheck.runner import run_task, short_exc


def setup_process(imports: List[str]):
    warnings.filterwarnings("ignore")
    import torch  # noqa: F401
    import torch_xxnpu  # noqa: F401

    for mod in imports:
        _import_plugin(mod)


def _import_plugin(spec: str):
    """--import: a module name or a .py file (registers kernels or sample generators)."""
    import importlib
    import importlib.util

    if spec.endswith(".py"):
        name = "opcheck_plugin_" + os.path.splitext(os.path.basename(spec))[0]
        s = importlib.util.spec_from_file_location(name, spec)
        mod = importlib.util.module_from_spec(s)
        sys.modules[name] = mod
        s.loader.exec_module(mod)
    else:
        importlib.import_module(spec)


def worker_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--import", dest="imports", action="append", default=[])
    p.add_argument("--namespaces", default="xxnpu")
    p.add_argument("--no-opinfo", action="store_true")
    a = p.parse_args(argv)
    # Protocol on the original stdout; anything the ops print goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    setup_process(a.imports)
    cases = load_cases(a.namespaces.split(","), with_opinfo=not a.no_opinfo)
    proto.write(json.dumps({"ready": True}) + "\n")
    import torch

    for line in sys.stdin:
        task = json.loads(line)
        case = cases.get(task["op"])
        dtype = getattr(torch, task["dtype"])
        if case is None:
            row = {"op": task["op"], "dtype": task["dtype"], "status": "error",
                   "reason": "op not found in the worker", "execution": "none"}
        else:
            try:
                row = run_task(case, dtype, task["opts"])
            except Exception as e:
                row = {"op": case.name, "kind": case.kind, "dtype": task["dtype"], "status": "error",
                       "execution": "none", "reason": "opcheck internal error: " + short_exc(e),
                       "traceback": traceback.format_exc()[-3000:]}
        proto.write(json.dumps({"id": task["id"], "row": row}) + "\n")
