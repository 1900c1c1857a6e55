"""``python -m torch_xxnpu.profiler.capture --pid N --iterations K --out DIR``."""
import sys

from torch_xxnpu.profiler.capture.cli import main

if __name__ == "__main__":
    sys.exit(main())
