"""torch-xxnpu: the xxnpu accelerator as a PyTorch backend (PrivateUse1).

Importing this package loads the native extension. With the wheel installed, a bare
``import torch`` imports it too (``torch.backends`` entry point; set
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` to turn that off).
"""



def _autoload():
    """Entry point for torch's backend autoload: importing the package is the work.

    Defined before ``import torch``: when a user imports torch_xxnpu first, torch's own
    autoload runs inside that import and looks this up on the half-initialised module.
    """


import torch  # noqa: E402

from torch_xxnpu import _C  # noqa: E402
from torch_xxnpu.version import __version__  # noqa: E402

_built = _C._build_info["torch_version"]
if torch.__version__.split("+")[0] != _built.split("+")[0]:
    raise ImportError(
        f"torch_xxnpu was built against torch {_built} but torch {torch.__version__} is "
        "imported; rebuild torch_xxnpu or install torch=={_built}"
    )


__all__ = ["__version__"]
