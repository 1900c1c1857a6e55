"""``python -m torch_xxnpu.testing.opcheck``: the CLI (and, with ``--worker``, a worker)."""
import sys

from torch_xxnpu.testing.opcheck.cli import main

if __name__ == "__main__":
    sys.exit(main())
