"""torch.compile on xxnpu: the Dynamo device interface and the Inductor backend.

Nothing here is imported by ``import torch_xxnpu``: Dynamo and Inductor take over a
second to import, and most programs never compile. ``install()`` (called by the package)
only arranges that the moment torch imports Dynamo's device-interface module or
Inductor's compile_fx, the xxnpu pieces register themselves there
(``_import_hook``); if those modules are already loaded, they register at once.

- ``dynamo``:  ``XxnpuInterface``, registered for "xxnpu" and "xxnpu:N".
- ``inductor``: ``XxnpuScheduling`` (Inductor's C++ codegen, parallel loops on the device's
  compute threads)
  and ``XxnpuPythonWrapperCodegen`` (launches each kernel on the current xxnpu stream
  through ``torch_xxnpu._C``'s compiled-kernel launcher). docs/compile.md.
- ``reduce_overhead``: ``mode="reduce-overhead"`` replays compiled graphs as xxnpu graphs.
- ``flex_attention``: FlexAttention accepted on xxnpu, compiled by Inductor's C++ template.
"""

__all__ = ["install"]


def install() -> None:
    """Registers the compile path once Dynamo / Inductor are imported (cheap: no import)."""
    from torch_xxnpu.compiler import _import_hook

    _import_hook.on_import("torch._dynamo.device_interface", _register_dynamo)
    _import_hook.on_import("torch._dynamo.variables.user_defined", _register_dynamo_classes)
    _import_hook.on_import("torch._inductor.compile_fx", _register_inductor)
    _import_hook.on_import("torch.nn.attention.flex_attention", _register_flex_attention)


def _register_dynamo(module) -> None:
    from torch_xxnpu.compiler import dynamo

    dynamo.register(module)


def _register_dynamo_classes(module) -> None:
    from torch_xxnpu.compiler import dynamo

    dynamo.register_in_graph_classes(module)


def _register_inductor(module) -> None:
    # compile_fx is what torch.compile's Inductor backend imports first; once it is loaded,
    # Inductor's codegen modules are importable without cycles (codegen.common is not).
    from torch._inductor.codegen import common

    from torch_xxnpu.compiler import flex_attention, inductor, reduce_overhead

    inductor.register(common)
    reduce_overhead.register()
    flex_attention.register_lowering()


def _register_flex_attention(module) -> None:
    from torch_xxnpu.compiler import flex_attention

    flex_attention.register_api(module)
