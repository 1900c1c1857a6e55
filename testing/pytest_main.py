"""Runs pytest on the files given as arguments; the main of every xxnpu_py_test."""
import sys

import pytest

if __name__ == "__main__":
    # No cache dir: the test's runfiles are read-only.
    sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", *sys.argv[1:]]))
