"""Runs pytest on the files given as arguments; the main of every xxnpu_py_test."""
import os
import sys

import pytest

# ASan options for a Python process, appended to the build's ASAN_OPTIONS (later ones win).
# detect_leaks=0: CPython and torch keep interned objects, registries and thread pools
# alive until exit on purpose; LeakSanitizer would report them all.
PYTHON_ASAN_OPTIONS = "detect_leaks=0"


def _reexec_with_asan():
    """In the ASan build, restarts this interpreter with the ASan runtime preloaded.

    The instrumented _C.so needs libasan to be the first library of the process; a plain
    python can only get that from LD_PRELOAD, which the dynamic loader reads at start-up,
    hence the exec. XXNPU_ASAN_RUNTIME (set by xxnpu_py_test(asan = True) in the ASan
    build) is the runfiles path of //bazel:asan_runtime, the libraries to preload.
    """
    runtime_file = os.environ.get("XXNPU_ASAN_RUNTIME")
    if not runtime_file or os.environ.get("XXNPU_ASAN_PRELOADED") == "1":
        return
    with open(runtime_file) as f:
        libraries = f.read().split()
    for library in libraries:
        if not os.path.isabs(library) or not os.path.exists(library):
            sys.exit(f"pytest_main: {runtime_file} should list absolute paths of existing "
                     f"libraries (libasan, libstdc++), got {library!r}: is the compiler's "
                     "ASan runtime installed?")
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(libraries + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
    env["ASAN_OPTIONS"] = ":".join(p for p in (env.get("ASAN_OPTIONS"), PYTHON_ASAN_OPTIONS) if p)
    env["XXNPU_ASAN_PRELOADED"] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


if __name__ == "__main__":
    _reexec_with_asan()
    # No cache dir: the test's runfiles are read-only.
    flags = ["-p", "no:cacheprovider", "-q"]
    if os.environ.get("XXNPU_ASAN_PRELOADED") == "1":
        # An ASan report is written to fd 2 and ends the process: pytest's default capture
        # (fd 2 into a temporary file) would swallow it with the process. Capture Python's
        # sys.stderr only, and name each test as it runs so the report follows its test.
        flags = ["-p", "no:cacheprovider", "-v", "--capture=sys"]
    sys.exit(pytest.main([*flags, *sys.argv[1:]]))
