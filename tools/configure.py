#!/usr/bin/env python3
"""Writes .bazelrc.user: which Python (and so which torch) Bazel builds against, and a
fixed disk cache so fresh clones (CI) reuse earlier work.

Run with the interpreter torch is installed in: `python3 tools/configure.py`.
The file is git-ignored; nothing machine-specific is committed.
"""
import argparse
import os
import pathlib
import sys

REQUIRED_TORCH = "2.13."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--disk-cache",
        default=os.environ.get(
            "XXNPU_BAZEL_DISK_CACHE", str(pathlib.Path.home() / ".cache" / "torch_xxnpu" / "bazel-disk")
        ),
        help="Bazel --disk_cache directory shared by every checkout on this machine",
    )
    args = parser.parse_args()

    try:
        import torch
    except ImportError as e:
        print(f"configure: {sys.executable} cannot import torch ({e}); run tools/setup.sh", file=sys.stderr)
        return 1
    if not torch.__version__.startswith(REQUIRED_TORCH):
        print(
            f"configure: torch {torch.__version__} at {torch.__file__}; expected {REQUIRED_TORCH}x "
            "(pip install torch==2.13.0)",
            file=sys.stderr,
        )
        return 1

    root = pathlib.Path(__file__).resolve().parent.parent
    lines = [
        "# Written by tools/configure.py; do not commit.",
        f"build --repo_env=PYTHON_BIN_PATH={sys.executable}",
        # A changed torch install re-runs the @local_torch repository rule.
        f"build --repo_env=XXNPU_TORCH_VERSION={torch.__version__}",
        f"build --python_path={sys.executable}",
        f"build --disk_cache={args.disk_cache}",
        # The embedding test's nested Bazel shares it.
        f"test --test_env=XXNPU_BAZEL_DISK_CACHE={args.disk_cache}",
    ]
    (root / ".bazelrc.user").write_text("\n".join(lines) + "\n")
    print(f"configure: Python {sys.executable}, torch {torch.__version__}, disk cache {args.disk_cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
