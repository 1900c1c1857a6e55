"""torch.xxnpu graphs: capture a stretch of xxnpu work once, replay it as one submission.

The same API as torch.cuda's graphs (``XXNPUGraph``, ``graph``, ``graph_pool_handle``,
``is_current_stream_capturing``, ``make_graphed_callables``). ``XXNPUGraph`` is torch's
device-generic graph (``torch._C._acceleratorGraph``, what ``torch.accelerator.Graph``
wraps too), backed by the xxnpu runtime's stream capture (device/c10/xxnpu_graph.h), so
both APIs drive the same implementation.
"""
from __future__ import annotations

import gc
from typing import Any, Callable, Optional, Tuple, Union

import torch
from torch.utils import _pytree

import torch_xxnpu.xxnpu as _xxnpu
from torch_xxnpu import _C

__all__ = [
    "is_current_stream_capturing",
    "graph_pool_handle",
    "XXNPUGraph",
    "graph",
    "make_graphed_callables",
]

_POOL_HANDLE = Tuple[int, int]
_CAPTURE_MODES = ("default", "global", "thread_local", "relaxed")


def is_current_stream_capturing() -> bool:
    """True while the current xxnpu stream is being captured into a graph."""
    if not _xxnpu.is_initialized():
        return False  # nothing can capture before the device is used (as torch.cuda)
    return _C._is_current_stream_capturing()


def graph_pool_handle() -> _POOL_HANDLE:
    """A new memory-pool id: graphs captured with the same id share their memory."""
    return tuple(_C._graph_pool_handle())


def _check_mode(capture_error_mode: str) -> str:
    if capture_error_mode not in _CAPTURE_MODES:
        raise ValueError(
            f"capture_error_mode must be one of {', '.join(_CAPTURE_MODES)}; got {capture_error_mode!r}"
        )
    return capture_error_mode


class XXNPUGraph(torch._C._acceleratorGraph):
    """An xxnpu graph (torch.cuda.CUDAGraph's twin).

    Args:
        keep_graph: keep the captured graph after ``capture_end`` (then ``instantiate``
            runs explicitly or at the first ``replay``); by default it is instantiated at
            ``capture_end`` and only the executable is kept.
    """

    def __new__(cls, keep_graph: bool = False):
        _xxnpu._lazy_init()
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False):
        super().__init__(keep_graph)
        self._generators: list = []

    def register_generator_state(self, generator: torch.Generator) -> None:
        """Lets random ops drawing from ``generator`` be captured (torch.cuda's twin).

        The default generator of the capturing device is always registered. Each replay
        draws fresh numbers from every registered generator and advances it as running
        the captured ops eagerly would. Call before the capture.
        """
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"register_generator_state expects a torch.Generator; got {type(generator).__name__}")
        if generator.device.type != "xxnpu":
            raise ValueError(f"register_generator_state expects an xxnpu generator; got one on {generator.device}")
        if all(g is not generator for g in self._generators):
            self._generators.append(generator)

    def capture_begin(self, pool: Optional[_POOL_HANDLE] = None, capture_error_mode: str = "global") -> None:
        """Begins capturing the current stream's work (``graph`` calls this for you).

        Args:
            pool: a ``graph_pool_handle()`` or another graph's ``pool()`` to share memory with.
            capture_error_mode: ``"global"`` (default), ``"thread_local"`` or ``"relaxed"``:
                which threads may make unsafe calls (allocations, frees, synchronous
                copies) during the capture, as cudaStreamCaptureMode.
        """
        mode = _check_mode(capture_error_mode)
        _C._stage_graph_generators(getattr(self, "_generators", []))
        try:
            super().capture_begin(pool=pool, capture_error_mode=mode)
        finally:
            _C._stage_graph_generators([])  # never left for another graph's capture

    def capture_end(self) -> None:
        super().capture_end()

    def instantiate(self) -> None:
        super().instantiate()

    def replay(self) -> None:
        """Queues the captured work on the current stream as one submission."""
        super().replay()

    def reset(self) -> None:
        """Frees the graph; its memory pool is released when its last graph is reset."""
        super().reset()

    def pool(self) -> _POOL_HANDLE:
        return tuple(super().pool())

    def enable_debug_mode(self) -> None:
        super().enable_debug_mode()

    def debug_dump(self, debug_path: str) -> None:
        """Writes one line per node (kind, kernel name, dependencies) to ``debug_path``."""
        super().debug_dump(debug_path)


class graph:
    """Context manager capturing the work inside it into ``xxnpu_graph``.

    Args:
        xxnpu_graph: the ``XXNPUGraph`` to capture into.
        pool: memory-pool id to share (``graph_pool_handle()`` or ``other.pool()``).
        stream: the stream to capture on; by default one side stream shared by all
            captures of the process (the default stream cannot be captured).
        capture_error_mode: ``"global"`` (default), ``"thread_local"`` or ``"relaxed"``.

    As torch.cuda.graph: the device is synchronized and the cache emptied before the
    capture, so the capture starts from a quiet device.
    """

    _default_capture_stream: Optional["torch.xxnpu.Stream"] = None

    def __init__(
        self,
        xxnpu_graph: XXNPUGraph,
        pool: Optional[_POOL_HANDLE] = None,
        stream: Optional[torch.Stream] = None,
        capture_error_mode: str = "global",
    ):
        if not isinstance(xxnpu_graph, torch._C._acceleratorGraph):
            raise TypeError(f"torch.xxnpu.graph expects an XXNPUGraph; got {type(xxnpu_graph).__name__}")
        if stream is None:
            if graph._default_capture_stream is None:
                graph._default_capture_stream = _xxnpu.Stream()
            stream = graph._default_capture_stream
        self.capture_stream = stream
        self.pool = pool
        self.capture_error_mode = _check_mode(capture_error_mode)
        self.xxnpu_graph = xxnpu_graph
        self._stream_ctx = _xxnpu.stream(stream)

    def __enter__(self) -> None:
        _xxnpu.synchronize()
        gc.collect()  # dead cycles may still hold device memory the capture could reuse
        _xxnpu.empty_cache()
        self._stream_ctx.__enter__()
        try:
            self.xxnpu_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # The stream context is left even when the capture failed, so the caller is back
        # on the stream it had.
        try:
            self.xxnpu_graph.capture_end()
        finally:
            self._stream_ctx.__exit__(exc_type, exc, tb)


def _flat_tensors(args: tuple, what: str) -> tuple:
    flat = tuple(_pytree.arg_tree_leaves(*args))
    for a in flat:
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"make_graphed_callables: {what} must contain only tensors; got {type(a).__name__}")
    return flat


def make_graphed_callables(
    callables: Union[Callable, tuple],
    sample_args: tuple,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Optional[_POOL_HANDLE] = None,
):
    """Graphs the forward and backward of each callable (function or nn.Module).

    As torch.cuda.make_graphed_callables: each returned callable replays a forward graph
    inside one autograd node whose backward replays a backward graph. The inputs, outputs
    and gradients live at fixed addresses (the graphs' static tensors): new inputs are
    copied in, outputs are the static ones (detached). Callables passed together share
    one memory pool and must then run in the order given.
    """
    if torch.is_autocast_enabled() and torch.is_autocast_cache_enabled():
        raise RuntimeError(
            "make_graphed_callables does not support the autocast cache: use "
            "torch.autocast(..., cache_enabled=False)"
        )
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"make_graphed_callables: {len(callables)} callables but {len(sample_args)} sample_args")

    flat_args, module_params = [], []
    for c, args in zip(callables, sample_args):
        if isinstance(c, torch.nn.Module):
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise RuntimeError("make_graphed_callables: modules must have no hooks when they are graphed")
            if any(b.requires_grad for b in c.buffers()):
                raise RuntimeError("make_graphed_callables: module buffers must have requires_grad=False")
        flat_args.append(_flat_tensors(args, "sample_args"))
        module_params.append(tuple(c.parameters()) if isinstance(c, torch.nn.Module) else ())
    surfaces = [a + p for a, p in zip(flat_args, module_params)]

    def grads_of(outputs, surface, grad_outputs):
        needs = tuple(o for o in outputs if o.requires_grad)
        if not needs:
            return None
        return torch.autograd.grad(
            outputs=needs,
            inputs=tuple(i for i in surface if i.requires_grad),
            grad_outputs=grad_outputs,
            only_inputs=True,
            allow_unused=allow_unused_input,
        )

    mempool = graph_pool_handle() if pool is None else pool
    # Warm-up on a side stream: lazy initialisations (workspaces, autograd's buffers) must
    # not happen inside a capture.
    _xxnpu.synchronize()
    with _xxnpu.stream(_xxnpu.Stream()):
        for func, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outs = _pytree.tree_leaves(func(*args))
                grads_of(outs, surface, tuple(torch.empty_like(o) for o in outs if o.requires_grad))
            del outs
    _xxnpu.synchronize()

    fwd_graphs = [XXNPUGraph() for _ in callables]
    bwd_graphs = [XXNPUGraph() for _ in callables]
    static_outputs, out_specs = [], []
    for func, args, fwd in zip(callables, sample_args, fwd_graphs):
        with graph(fwd, pool=mempool):
            outs = func(*args)
        flat, spec = _pytree.tree_flatten(outs)
        static_outputs.append(tuple(flat))
        out_specs.append(spec)

    # Backward graphs in reverse order, as autograd will run them.
    static_grad_outputs, static_grad_inputs = [None] * len(callables), [None] * len(callables)
    for i in reversed(range(len(callables))):
        grad_outs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs[i])
        grads = None
        if any(g is not None for g in grad_outs):
            with graph(bwd_graphs[i], pool=mempool):
                grads = grads_of(static_outputs[i], surfaces[i], tuple(g for g in grad_outs if g is not None))
        it = iter(grads or ())
        static_grad_inputs[i] = tuple(next(it) if (a.requires_grad and grads is not None) else None for a in surfaces[i])
        static_grad_outputs[i] = grad_outs

    def graphed_function(i):
        fwd, bwd = fwd_graphs[i], bwd_graphs[i]
        n_user = len(flat_args[i])
        surface, outs, g_outs, g_ins = surfaces[i], static_outputs[i], static_grad_outputs[i], static_grad_inputs[i]

        class Graphed(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                for static, new in zip(surface[:n_user], inputs[:n_user]):
                    if static.data_ptr() != new.data_ptr():
                        static.copy_(new)
                fwd.replay()
                return tuple(o.detach() for o in outs)

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx, *grads):
                for static, new in zip(g_outs, grads):
                    if static is not None and new is not None and static.data_ptr() != new.data_ptr():
                        static.copy_(new)
                bwd.replay()
                return tuple(g.detach() if g is not None else None for g in g_ins)

        params = module_params[i]

        def run(*user_args):
            flat = _flat_tensors(user_args, "the arguments")
            if len(flat) != n_user:
                raise ValueError(f"graphed callable: expected {n_user} tensor arguments (as sample_args); got {len(flat)}")
            return _pytree.tree_unflatten(Graphed.apply(*(flat + params)), out_specs[i])

        return run

    result = []
    for i, func in enumerate(callables):
        graphed = graphed_function(i)
        if isinstance(func, torch.nn.Module):
            # Graphed only in the training mode it was captured in; the other mode runs eagerly.
            def forward(*a, _graphed=graphed, _mod=func, _mode=func.training, _eager=func.forward, **kw):
                return _graphed(*a, **kw) if _mod.training == _mode else _eager(*a, **kw)

            func.forward = forward
            result.append(func)
        else:
            result.append(graphed)
    return result[0] if single else tuple(result)
