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


def _register_backend():
    """Names PrivateUse1 "xxnpu" and installs torch.xxnpu and the generated methods.

    Loading _C already registered the C++ side (guard, hooks, allocators, kernels); this
    is the Python side, in the order torch requires: rename first, then the device module
    (torch.device("xxnpu") must parse), then Tensor/Module/Storage methods.
    """
    name = torch._C._get_privateuse1_backend_name()
    if name != "xxnpu":
        if name != "privateuseone":
            raise RuntimeError(f"PrivateUse1 is already claimed by backend {name!r}; cannot register xxnpu")
        torch.utils.rename_privateuse1_backend("xxnpu")
    from torch_xxnpu import xxnpu as device_module

    if getattr(torch, "xxnpu", None) is not device_module:
        torch._register_device_module("xxnpu", device_module)
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


_register_backend()

from torch_xxnpu import ops  # noqa: E402
from torch_xxnpu import distributed  # noqa: E402

distributed._register()  # torch.distributed's "xxccl" backend for xxnpu tensors

from torch_xxnpu import compiler  # noqa: E402

compiler.install()  # torch.compile: registers when Dynamo/Inductor are imported, not now


def _install_on_demand_capture():
    """XXNPU_PROFILER_ON_DEMAND=1 (like Kineto's KINETO_USE_DAEMON=1) lets
    ``python -m torch_xxnpu.profiler.capture --pid N`` take a trace of this process.
    Without it nothing is installed: no thread, no socket, no hook."""
    from torch_xxnpu._env import env_flag
    from torch_xxnpu.profiler.capture.protocol import ENV_VAR

    if env_flag(ENV_VAR):
        from torch_xxnpu.profiler.capture import agent

        agent.install()


_install_on_demand_capture()

__all__ = ["__version__", "compiler", "distributed", "ops"]
