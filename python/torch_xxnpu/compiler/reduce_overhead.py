"""``torch.compile(mode="reduce-overhead")`` on xxnpu: compiled graphs replayed as xxnpu graphs.

``mode="reduce-overhead"`` turns on Inductor's ``triton.cudagraphs``. In torch 2.13 two
things keep it CUDA-only (docs/compile.md, "mode="reduce-overhead""):

- at lowering, ``cudagraph_utils.check_lowering_disable_cudagraph`` accepts a graph only
  when its one device has type "cuda" ("skipping cudagraphs due to multiple devices");
- the wrapping itself (``compile_fx.cudagraphify``: cudagraph trees, or the older
  ``cudagraphify_impl``) calls torch.cuda throughout.

torch 2.13 has one device-neutral hook for the second: ``config.cudagraph_policy``, whose
``cudagraphify`` replaces the wrapping. ``XxnpuGraphPolicy`` wraps graphs whose device is
xxnpu with ``graphify`` below and hands every other graph to torch's own wrapping; the
first is a narrow wrapper around the lowering check that lets a graph on one xxnpu device
through (and leaves every other answer to torch).

What ``graphify`` does with a compiled graph (CUDA's behaviour unless said):

- The first call runs the compiled code as is (a warm-up, as cudagraph trees do: lazy
  initialisation and first-use allocations stay out of the capture).
- The second call captures one run into an ``XXNPUGraph`` with a memory pool of its own,
  on a side stream, then replays it on the caller's stream; every later call only copies
  its inputs in, replays, and copies the outputs out.
- Inputs Inductor calls static (parameters, buffers, ``torch._dynamo.mark_static_address``
  tensors, the saved tensors a backward reads) are used in place; the others are copied
  into the graph's own input buffers on each call. If a static input's address changes,
  the graph is captured again: with that input copied from then on if the graph only
  reads it, at its new address if the graph writes it (cudagraph trees capture again at
  each new address), up to ``config.triton.cudagraph_unexpected_rerecord_limit`` times.
- **Outputs are copied out of the graph's pool** on each call (the aliasing between
  outputs kept). cudagraph trees instead return the pool's tensors and let the next
  replay overwrite them (an error on access if still live, or
  ``torch.compiler.cudagraph_mark_step_begin``); a copy costs bandwidth, but a result
  never changes under its holder.
- A graph whose non-static inputs are mutated is not captured (CUDA: "mutated inputs");
  one that cannot be captured (a ``.item()``, a host copy inside) runs uncaptured from
  then on. Both are logged like CUDA's skips and counted in
  ``counters["inductor"]["cudagraph_skips"]``.
- Graphs with symbolic sizes are captured once per distinct set of sizes (as trees do),
  up to ``config.triton.cudagraph_dynamic_shape_warn_limit`` captures, beyond which new
  sizes run uncaptured.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, Sequence

import torch
# Imported only once Inductor's compile_fx is (compiler/__init__.py), so these cost nothing more.
from torch._inductor.compile_fx import index_expanded_dims, index_expanded_dims_and_copy_, static_input
from torch._inductor.cudagraph_utils import CUDAGraphPolicy
from torch._inductor.output_code import get_expanded_dims

log = logging.getLogger(__name__)

DEVICE_TYPE = "xxnpu"
# Graphs with symbolic sizes: captures per compiled graph when the config gives no limit.
_DEFAULT_CAPTURE_LIMIT = 8


def _skip(reason: str) -> None:
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    log_cudagraph_skip_and_bump_counter(f"skipping xxnpu graphs due to {reason}")


def _recapture_limit() -> int:
    from torch._inductor import config

    return getattr(config.triton, "cudagraph_unexpected_rerecord_limit", 128)


def _capture_limit() -> int:
    from torch._inductor import config

    limit = getattr(config.triton, "cudagraph_dynamic_shape_warn_limit", None)
    return limit if isinstance(limit, int) and limit > 0 else _DEFAULT_CAPTURE_LIMIT


class _Capture:
    """One captured run: the graph, its input buffers and outputs, and the static inputs' addresses.

    Everything a replay needs is worked out here once, so that a replay is a few C++ calls:
    the static-address check, one ``_foreach_copy_`` for the inputs, the graph launch and
    one clone per output storage (a decode step's host time is what a replay saves).
    """

    def __init__(self, graph, inputs: list, outputs: Sequence, static_ptrs: dict):
        self.graph = graph
        self.inputs = inputs  # the tensors the captured run read: ours (copied into) or static
        self.outputs = outputs
        self.static_ptrs = static_ptrs  # input index -> data_ptr at capture time
        # Copied inputs: (input index, expanded dims) and the buffers' views to copy into.
        # A buffer that still overlaps itself once its expanded dims are dropped (rare) is
        # copied byte for byte on its own (torch's index_expanded_dims_and_copy_).
        self.copies, self.copy_dsts, self.overlapping = [], [], []
        for i, b in enumerate(inputs):
            if not isinstance(b, torch.Tensor) or i in static_ptrs:
                continue
            dims = get_expanded_dims(b)
            dst = index_expanded_dims(b, dims) if dims else b
            if torch._debug_has_internal_overlap(dst) != 0:
                self.overlapping.append((i, b, dims))
            else:
                self.copies.append((i, dims))
                self.copy_dsts.append(dst)
        self.out_plan = _out_plan(outputs, {inputs[i].untyped_storage().data_ptr() for i in static_ptrs})

    def copy_in(self, inputs: list) -> None:
        if self.copies:
            srcs = [index_expanded_dims(inputs[i], dims) if dims else inputs[i] for i, dims in self.copies]
            torch._foreach_copy_(self.copy_dsts, srcs)
        for i, b, dims in self.overlapping:
            index_expanded_dims_and_copy_(b, inputs[i], dims)

    def statics_moved(self, inputs: list) -> list:
        # (torch's C++ _tensors_data_ptrs_at_indices_equal is built only with CUDA.)
        return [i for i, p in self.static_ptrs.items() if inputs[i].data_ptr() != p]

    def release(self) -> None:
        self.graph.reset()
        self.inputs = self.outputs = self.copies = self.copy_dsts = self.overlapping = self.out_plan = None


def _out_plan(outputs: Sequence, keep: set) -> tuple:
    """How each replay copies the graph's outputs into fresh memory, keeping which outputs
    share storage: (the pool storages as byte tensors, one entry per output).

    An entry is ("as is", value) for a non-tensor or an output in ``keep`` (the storage of a
    static input, a parameter say: returned as it is, as an uncaptured run would),
    ("empty", tensor) for an output without bytes, or ("view", storage index, dtype,
    offset, size, stride): a view of that storage's fresh copy.
    """
    sources: list = []
    index: dict = {}  # pool storage address -> index into sources
    plan = []
    for o in outputs:
        if not isinstance(o, torch.Tensor):
            plan.append(("as is", o))
            continue
        storage = o.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in keep:
            plan.append(("as is", o))
        elif storage.nbytes() == 0:
            plan.append(("empty", o))
        else:
            if ptr not in index:
                # The whole storage, byte for byte: views keep their offset and strides,
                # and outputs that overlapped still do.
                index[ptr] = len(sources)
                sources.append(torch.empty(0, dtype=torch.uint8, device=o.device).set_(storage))
            plan.append(("view", index[ptr], o.dtype, o.storage_offset(), tuple(o.size()), tuple(o.stride())))
    return sources, plan


def _copy_out(out_plan: tuple) -> list:
    """The graph's outputs, copied out of its pool as ``_out_plan`` says."""
    sources, plan = out_plan
    fresh = [s.clone().untyped_storage() for s in sources]
    result = []
    for p in plan:
        if p[0] == "as is":
            result.append(p[1])
        elif p[0] == "empty":
            o = p[1]
            result.append(torch.empty_strided(o.size(), o.stride(), dtype=o.dtype, device=o.device))
        else:
            _, k, dtype, offset, size, stride = p
            result.append(torch.empty(0, dtype=dtype, device=sources[k].device).set_(fresh[k], offset, size, stride))
    return result


def graphify(
    model: Callable[[list], Any],
    static_input_idxs: Sequence[int],
    *,
    device_index: int,
    mutated_input_idxs: Sequence[int] = (),
) -> Callable[[list], Any]:
    """Wraps one compiled xxnpu graph (boxed calling convention) to run as an xxnpu graph."""
    import torch_xxnpu.xxnpu as xxnpu

    static = set(static_input_idxs)
    written = set(mutated_input_idxs)
    mutated = [i for i in written if i not in static]
    if mutated:
        _skip(f"mutated inputs ({len(mutated)} instances): only static inputs (parameters, buffers, "
              "torch._dynamo.mark_static_address tensors) may be mutated in a graph")
        return model

    state = threading.local()  # as compile_fx.cudagraphify: each thread its own captures
    lock = threading.Lock()
    disabled: list = []  # a reason once capture failed: every later call runs uncaptured

    def per_thread():
        if not hasattr(state, "captures"):
            state.captures = {}  # size key -> _Capture
            state.warm = set()  # size keys run once uncaptured
            state.copied = set()  # static inputs demoted to copied (their address changed)
            state.recaptures = 0
            state.stream = None
            state.last_stream = None
        return state

    int_idxs: Optional[list] = None  # where the int inputs are (the same positions at every call)

    def size_key(inputs: list) -> tuple:
        # Symbolic sizes reach the graph as int inputs: one capture per distinct set.
        nonlocal int_idxs
        if int_idxs is None:
            int_idxs = [i for i, x in enumerate(inputs) if isinstance(x, int)]
        return tuple(inputs[i] for i in int_idxs)

    def capture(s, inputs: list) -> Optional[_Capture]:
        copied = {i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and (i not in static or i in s.copied)}
        buffers = list(inputs)
        for i in copied:
            buffers[i] = static_input(inputs[i])
            index_expanded_dims_and_copy_(buffers[i], inputs[i], get_expanded_dims(inputs[i]))
        if s.stream is None:
            s.stream = xxnpu.Stream(device=device_index)
        s.stream.wait_stream(xxnpu.current_stream(device_index))
        graph = xxnpu.XXNPUGraph()
        try:
            # Not torch.xxnpu.graph: it also runs gc.collect() and empty_cache() before the
            # capture (as torch.cuda.graph does), tens of milliseconds in a process that
            # has imported Inductor, paid again at every new size or moved input.
            with xxnpu.stream(s.stream):
                graph.capture_begin(capture_error_mode="thread_local")
                try:
                    outputs = model(list(buffers))
                finally:
                    graph.capture_end()
        except Exception as e:  # noqa: BLE001 - any capture failure leaves the graph uncaptured
            with lock:
                disabled.append(f"a failed capture ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            _skip(disabled[0])
            return None
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        static_ptrs = {i: x.data_ptr() for i, x in enumerate(inputs)
                       if isinstance(x, torch.Tensor) and i not in copied}
        return _Capture(graph, buffers, outputs, static_ptrs)

    def replay(s, c: _Capture, inputs: list) -> list:
        cur = torch.accelerator.current_stream(device_index)  # a torch.Stream, cheaper to get than ours
        if s.last_stream is not None and s.last_stream != cur:
            cur.wait_stream(s.last_stream)  # the buffers may still be in use there
        s.last_stream = cur
        c.copy_in(inputs)
        inputs.clear()  # the boxed convention: the callee drops the caller's references
        c.graph.replay()
        return _copy_out(c.out_plan)

    def run(inputs: list) -> Any:
        if disabled:
            return model(inputs)
        s = per_thread()
        key = size_key(inputs)
        c = s.captures.get(key)
        if c is not None:
            moved = c.statics_moved(inputs)
            if not moved:
                return replay(s, c, inputs)
            # A static input is somewhere else now (a new parameter, a new KV cache, the
            # saved tensor a backward reads): capture again. One the graph only reads is
            # copied from then on; one it writes must stay in place, so it is captured
            # again at each new address, up to torch's re-record limit.
            s.copied.update(i for i in moved if i not in written)
            s.recaptures += 1
            c.release()
            del s.captures[key]
            if s.recaptures > _recapture_limit():
                with lock:
                    disabled.append(f"static inputs that changed address {s.recaptures} times "
                                    "(config.triton.cudagraph_unexpected_rerecord_limit)")
                _skip(disabled[0])
                return model(inputs)
            log.debug("xxnpu graph: static inputs %s moved; captured again", moved)
        elif key not in s.warm:
            s.warm.add(key)
            return model(inputs)
        elif len(s.captures) >= _capture_limit():
            return model(inputs)  # too many distinct sizes: these run uncaptured
        c = capture(s, inputs)
        if c is None:
            return model(inputs)
        s.captures[key] = c
        return replay(s, c, inputs)

    return run


def _xxnpu_only(device_node_mapping) -> bool:
    devices = [d for d in device_node_mapping if d.type != "meta"]
    return bool(devices) and all(d.type == DEVICE_TYPE for d in devices)


# Set by XxnpuGraphPolicy.should_wrap for the cudagraphify call that follows on the same
# thread (module-level: Inductor deep-copies its config, policy included, so the policy
# itself holds no state).
_wrapping = threading.local()


class XxnpuGraphPolicy(CUDAGraphPolicy):
    """Wraps compiled graphs on xxnpu with ``graphify``; CUDA's go to torch's own wrapping."""

    def should_wrap(self, compiled_graph) -> bool:
        # post_compile asks this just before cudagraphify for the same graph, on the same
        # thread: it is where the graph's device types are visible.
        _wrapping.device_types = frozenset(getattr(compiled_graph, "device_types", ()))
        return super().should_wrap(compiled_graph)

    def cudagraphify(self, model, example_inputs, static_input_idxs, *, device_index, is_backward,
                     is_inference, **kwargs):
        types = getattr(_wrapping, "device_types", frozenset())
        _wrapping.device_types = frozenset()
        if DEVICE_TYPE in types:
            return graphify(model, static_input_idxs, device_index=device_index,
                            mutated_input_idxs=kwargs.get("mutated_input_idxs", ()))
        return super().cudagraphify(model, example_inputs, static_input_idxs, device_index=device_index,
                                    is_backward=is_backward, is_inference=is_inference, **kwargs)


def register() -> None:
    """Lets reduce-overhead capture xxnpu graphs (called once Inductor's compile_fx is loaded)."""
    from torch._inductor import config, cudagraph_utils

    original = cudagraph_utils.check_lowering_disable_cudagraph
    if not getattr(original, "_xxnpu", False):
        def check_lowering_disable_cudagraph(device_node_mapping):
            if _xxnpu_only(device_node_mapping):
                devices = sorted({d for d in device_node_mapping if d.type != "meta"}, key=str)
                if len(devices) == 1:
                    return None
                return cudagraph_utils.format_default_skip_message(
                    f"multiple devices: {', '.join(map(repr, devices))}")
            return original(device_node_mapping)

        check_lowering_disable_cudagraph._xxnpu = True
        # compile_fx imports it from the module at each use, so replacing the attribute is enough.
        cudagraph_utils.check_lowering_disable_cudagraph = check_lowering_disable_cudagraph
    if config.cudagraph_policy is None:  # a policy the user set stays theirs
        config.cudagraph_policy = XxnpuGraphPolicy()
