"""The built extension loads next to the pip torch and reports what it was built against."""
import time

import torch
import torch_xxnpu
from torch_xxnpu import _C


def test_extension_matches_running_torch():
    info = _C._build_info
    assert info["torch_version"].split("+")[0] == torch.__version__.split("+")[0]
    assert info["cxx11_abi"] == torch._C._GLIBCXX_USE_CXX11_ABI
    assert info["cplusplus"] >= 202002


def test_package_version_is_semver():
    parts = torch_xxnpu.__version__.split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts)
