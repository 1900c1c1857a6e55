"""``python -m torch_xxnpu.testing.fuzz`` (with ``--worker``: a worker process)."""
import sys

from torch_xxnpu.testing.fuzz.cli import main

if __name__ == "__main__":
    sys.exit(main())
