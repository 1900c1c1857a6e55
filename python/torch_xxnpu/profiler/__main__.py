"""``python -m torch_xxnpu.profiler TRACE.json ...``: same as ``-m torch_xxnpu.profiler.analyze``."""
import sys

from torch_xxnpu.profiler.analyze import main

if __name__ == "__main__":
    sys.exit(main())
