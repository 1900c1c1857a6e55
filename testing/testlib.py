"""Helpers shared by the pytest files under testing/ (imported as `testlib`: the
//testing:testlib target puts testing/ on sys.path)."""
import contextlib
import json
import os
import subprocess
import sys
import textwrap

import pytest


def example_script(name):
    """Path of examples/<name>: from the Bazel runfiles, else from the source tree."""
    candidates = []
    if os.environ.get("TEST_SRCDIR"):
        candidates.append(os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "torch_xxnpu"),
                                       "examples", name))
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", name))
    for c in candidates:
        if os.path.isfile(c):
            return c
    pytest.fail(f"examples/{name} not found in {candidates}")


def run_python_module(tmp_path, module, *args, timeout=600):
    """`python -m MODULE ARGS` in tmp_path, with the package under test importable."""
    import torch_xxnpu

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(torch_xxnpu.__file__)),
                                                     env.get("PYTHONPATH", "")] if p)
    return subprocess.run([sys.executable, "-m", module, *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def run_opcheck(tmp_path, *args, timeout=600):
    """`python -m torch_xxnpu.testing.opcheck --no-progress ARGS` in tmp_path, with the
    package under test importable."""
    return run_python_module(tmp_path, "torch_xxnpu.testing.opcheck", "--no-progress", *args, timeout=timeout)


def opcheck_rows(path):
    """(document, {(op, dtype): row}) of an opcheck --json report."""
    with open(path) as f:
        doc = json.load(f)
    return doc, {(r["op"], r["dtype"]): r for r in doc["rows"]}


def run_python(code, timeout=120, **env):
    """Runs `code` (dedented) in a fresh interpreter that sees this one's sys.path, so it
    can import torch_xxnpu; `env` adds environment variables. Returns the CompletedProcess."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=timeout)


@contextlib.contextmanager
def no_fallback():
    """Fails the enclosed code if any op ran on the CPU fallback. A test module makes it
    an autouse fixture where its features are native:

        @pytest.fixture(autouse=True)
        def _no_fallback():
            with testlib.no_fallback():
                yield
    """
    from torch_xxnpu import ops as xops

    xops.reset_fallback_counts()
    yield
    counts = xops.fallback_counts()
    assert counts == {}, f"ops fell back to the CPU: {counts}"
