"""Inductor's backend for xxnpu: the C++ (CPU) codegen, run as device kernels.

Inductor generates, compiles and loads each fused kernel exactly as for the CPU; three
things differ:
- The kernel's Python binding does not call it. It packs the arguments (tensors' data
  pointers, sizes) and hands them to ``torch_xxnpu._C``'s compiled-kernel launcher, which
  enqueues one device kernel on the current xxnpu stream of the tensors' device, named
  after the Inductor kernel, with the bytes it moves. On the device thread the pointers go
  through ``DeviceView`` and the kernel runs; the host never dereferences device memory.
  Errors the kernel throws become the stream's sticky error, naming the kernel.
- Kernels split their loops over the device's compute threads without OpenMP: each
  OpenMP region Inductor would write is a child grid of the kernel on the device
  (_DEVICE_PRELUDE, _DeviceWorkSharing, _device_loop_lines). An OpenMP team would run
  outside the device's compute threads, their stream order, and the fault recovery that
  turns a bad access into a sticky error.
- Buffers are allocated with ``empty_strided(..., device='xxnpu:N')`` (Inductor's generic
  path, plus the index) and extern kernels (mm, addmm, bmm, SDPA, ...) are ATen calls on xxnpu tensors, so
  they dispatch to the xxnpu kernels.

With ``cpp_wrapper=True`` and AOTInductor, XxnpuCppWrapper launches the same kernels through
the same launcher from C++ (docs/compile.md, "cpp_wrapper=True and AOTInductor").
"""
import contextlib
import functools
import re
import textwrap
from typing import Sequence

from torch._inductor import config
from torch._inductor.codecache import CppPythonBindingsCodeCache
from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.virtualized import V

DEVICE = "xxnpu"

# Arguments the wrapper binds before the kernel's own: the launcher's address, the interned
# kernel name, the interned list of the FX nodes it fused (0: none), the bytes the kernel
# reads and writes.
_LAUNCH_ARGTYPES = ["uintptr_t", "uintptr_t", "uintptr_t", "int64_t"]

# The launch ABI's version: ops/compiled_kernel_launch.h's kCompiledLaunchAbi.
_LAUNCH_ABI = 4

# The fields of one kernel launch, the launch ABI (_LAUNCH_ABI) that both wrappers' glue below
# declares and ops/compiled_kernel_launch.h's CompiledLaunch defines: keep all in step.
# No braces, so it can go into the format template of _LAUNCH_GLUE as it is.
_LAUNCH_FIELDS = """
    uint32_t abi_version;
    uint32_t nargs;
    const char* name;
    const char* fused_nodes;
    uint64_t bytes;
    const char* (*entry)(const uint64_t* args, const void* device);
    const uint64_t* args;
    const uint8_t* pointee_size;
"""

# C++ put before every xxnpu kernel's source (and into the C++ wrappers): what the kernel's
# parallel loops call. Inductor writes an OpenMP region, ``#pragma omp parallel { ... #pragma
# omp for ... }``; for xxnpu it writes ``xxnpu_device::parallel(N, [&](int64_t tid) { ... })``
# instead (_DeviceWorkSharing), whose body runs once per tid on the device's compute threads
# as a child grid of the kernel (CompiledDeviceApi::parallel_for in
# ops/compiled_kernel_launch.h, which is xxnpuKernelParallelFor), and each ``omp for`` loop
# takes the tid's share of the iterations (_device_loop_lines). An OpenMP team would run on
# threads the device does not own, outside its stream order, its fault handling and its
# profiler records. Guarded: a C++ wrapper holds many kernels in one file.
_DEVICE_PRELUDE = r"""
#ifndef XXNPU_DEVICE_PRELUDE_
#define XXNPU_DEVICE_PRELUDE_
#include <algorithm>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace xxnpu_device {
// ops/compiled_kernel_launch.h's CompiledDeviceApi (launch ABI %ABI%).
struct Api {
    const char* (*parallel_for)(int64_t blocks, void* closure, const char* (*block)(void* closure, int64_t begin, int64_t end));
};
// Set by the kernel's entry on the device thread that runs the kernel.
inline thread_local const Api* api = nullptr;

// Runs f() and returns nullptr, or the message of what it threw (valid until the thread's
// next failure): a generated kernel's exceptions never cross into the runtime.
template <typename F> inline const char* failure_of(const F& f) {
    try {
        f();
        return nullptr;
    } catch (const std::exception& e) {
        thread_local std::string message;
        message = e.what();
        return message.c_str();
    } catch (...) {
        return "the generated kernel threw a non-standard exception";
    }
}

// Runs body(tid) for each tid in [0, n) on the device's compute threads; returns when all
// are done (the join is the barrier that ends an OpenMP region). A body's exception
// becomes this call's, with its message.
template <typename F> inline void parallel(int64_t n, const F& body) {
    if (api == nullptr) {
        throw std::logic_error("an xxnpu kernel's parallel loop ran outside the device (no device entry)");
    }
    const char* (*block)(void*, int64_t, int64_t) = [](void* closure, int64_t begin, int64_t end) -> const char* {
        return failure_of([&] {
            for (int64_t tid = begin; tid < end; ++tid) (*static_cast<const F*>(closure))(tid);
        });
    };
    if (const char* error = api->parallel_for(n, const_cast<F*>(&body), block)) throw std::runtime_error(error);
}

// The number of iterations of for (i = begin; i < end; i += step).
inline int64_t trips(int64_t begin, int64_t end, int64_t step) {
    return end > begin ? (end - begin + step - 1) / step : 0;
}

// Share `tid` of `n` iterations split over `parts`, as OpenMP's static schedule: the
// first n % parts shares have one iteration more.
inline std::pair<int64_t, int64_t> share(int64_t n, int64_t tid, int64_t parts) {
    const int64_t base = n / parts, extra = n % parts;
    const int64_t begin = tid * base + std::min(tid, extra);
    return {begin, begin + base + (tid < extra ? 1 : 0)};
}

// ATen's parallel_for in Inductor's C++ flex attention template (_DeviceAtenParallel): the
// range in at most `threads` shares, run as a child grid like the loops above, and ATen's
// thread number in the body the share's index, below `threads` (the template sizes
// its per-thread scratch for cpp.threads, set to the device's thread count when it renders).
// ATen's own parallel_for would start an OpenMP team from the device thread, on cores the
// device does not own, and index the scratch past its end.
inline thread_local int64_t aten_thread = 0;
inline int aten_thread_num() { return static_cast<int>(aten_thread); }
struct AtenThreadScope {
    explicit AtenThreadScope(int64_t tid) { aten_thread = tid; }
    ~AtenThreadScope() { aten_thread = 0; }  // also when the body throws
};
template <int64_t threads, typename F>
inline void aten_parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
    const int64_t n = end - begin;
    if (n <= 0) return;
    const int64_t g = std::max<int64_t>(grain, 1);
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, n / g + (n % g != 0)));
    if (parts == 1) {  // one share: no child grid
        const AtenThreadScope scope(0);
        f(begin, end);
        return;
    }
    parallel(parts, [&](int64_t tid) {
        const auto [lo, hi] = share(n, tid, parts);
        const AtenThreadScope scope(tid);
        f(begin + lo, begin + hi);
    });
}
}  // namespace xxnpu_device
#endif  // XXNPU_DEVICE_PRELUDE_
""".replace("%ABI%", str(_LAUNCH_ABI))

# C++ appended to every xxnpu kernel's source (through the binding template's
# extra_parse_arg hook, hence the doubled braces). XxnpuCompiledLaunch's fields are
# _LAUNCH_FIELDS.
_LAUNCH_GLUE = textwrap.dedent(
    """
    #include <cstdint>
    #include <cstring>
    #include <stdexcept>
    #include <string>
    #include <type_traits>
    #include <utility>

    struct XxnpuCompiledLaunch {{%LAUNCH_FIELDS%}};

    template <typename T> static constexpr uint8_t xxnpu_pointee_size() {{
        if constexpr (std::is_pointer_v<T>) {{
            return static_cast<uint8_t>(sizeof(std::remove_pointer_t<T>));
        }} else {{
            return 0;
        }}
    }}

    template <typename T> static inline uint64_t xxnpu_pack(T value) {{
        uint64_t bits = 0;
        if constexpr (std::is_pointer_v<T>) {{
            bits = reinterpret_cast<uintptr_t>(value);
        }} else {{
            static_assert(sizeof(T) <= sizeof(bits), "kernel scalar wider than 8 bytes");
            std::memcpy(&bits, &value, sizeof(T));
        }}
        return bits;
    }}

    template <typename T> static inline T xxnpu_unpack(uint64_t bits) {{
        if constexpr (std::is_pointer_v<T>) {{
            return reinterpret_cast<T>(static_cast<uintptr_t>(bits));
        }} else {{
            T value;
            std::memcpy(&value, &bits, sizeof(T));
            return value;
        }}
    }}

    template <typename... A, size_t... I>
    static inline void xxnpu_call(const uint64_t* args, std::index_sequence<I...>) {{
        kernel(xxnpu_unpack<A>(args[I])...);
    }}

    // Runs on the device thread with device-visible pointers; never lets an exception
    // cross into the runtime: it returns the message instead.
    template <typename... A> static const char* xxnpu_entry(const uint64_t* args, const void* device) {{
        xxnpu_device::api = static_cast<const xxnpu_device::Api*>(device);
        return xxnpu_device::failure_of([&] {{ xxnpu_call<A...>(args, std::index_sequence_for<A...>{{}}); }});
    }}

    template <typename... A>
    static PyObject* xxnpu_launch(uintptr_t launcher, uintptr_t name, uintptr_t fused_nodes, int64_t bytes,
                                  A... a) {{
        const uint64_t args[] = {{xxnpu_pack(a)..., 0}};
        const uint8_t pointee_size[] = {{xxnpu_pointee_size<A>()..., 0}};
        const XxnpuCompiledLaunch launch{{%ABI%, static_cast<uint32_t>(sizeof...(A)),
            reinterpret_cast<const char*>(name), reinterpret_cast<const char*>(fused_nodes),
            static_cast<uint64_t>(bytes),
            &xxnpu_entry<A...>, args, pointee_size}};
        using Launcher = const char* (*)(const XxnpuCompiledLaunch*);
        if (const char* error = reinterpret_cast<Launcher>(launcher)(&launch)) {{
            throw std::runtime_error(error);
        }}
        Py_RETURN_NONE;
    }}
    """
).replace("%LAUNCH_FIELDS%", _LAUNCH_FIELDS).replace("%ABI%", str(_LAUNCH_ABI))


class XxnpuKernelCodeCache(CppPythonBindingsCodeCache):
    """Inductor's C++ kernel cache with a binding that launches instead of calling."""

    cache: dict = {}
    call_entry_function = "return xxnpu_launch({});"
    extra_parse_arg = _LAUNCH_GLUE

    @staticmethod
    def cache_clear() -> None:
        XxnpuKernelCodeCache.cache.clear()


@functools.lru_cache(None)
def _launcher_address() -> int:
    from torch_xxnpu import _C

    return _C._compiled_kernel_launcher()


def _bind(kernel, name: str, nbytes: int, fused_nodes: str):
    from torch_xxnpu import _C

    # Interned once here, per kernel definition: a launch passes two addresses.
    nodes = _C._compiled_kernel_name(fused_nodes) if fused_nodes else 0
    return functools.partial(kernel, _launcher_address(), _C._compiled_kernel_name(name), nodes, int(nbytes))


def device_kernel(name: str, nbytes: int, argtypes: Sequence[str], source: str, fused_nodes: str = ""):
    """What the generated wrapper calls to define an xxnpu kernel: compiles (or finds) the
    kernel and returns a callable ``kernel(*args)`` that launches it. Compiled in a worker
    pool when Inductor has one, like the CPU's kernels. ``fused_nodes`` ("add, mul, relu")
    goes to the kernel's trace args; it is optional so that a wrapper from an older cache
    entry still loads."""
    from torch._inductor.async_compile import AsyncCompile, get_compile_threads
    from torch._inductor.codecache import LambdaFuture

    argtypes = _LAUNCH_ARGTYPES + list(argtypes)
    if get_compile_threads() <= 1:
        with _naming_kernel_on_compile_error(name):
            kernel = XxnpuKernelCodeCache.load_pybinding(argtypes, source, device_type="cpu")
            return _bind(kernel, name, nbytes, fused_nodes)
    with _naming_kernel_on_compile_error(name):
        get_result = XxnpuKernelCodeCache.load_pybinding_async(
            argtypes, source, device_type="cpu", submit_fn=AsyncCompile().submit
        )

    def result():
        with _naming_kernel_on_compile_error(name):
            return _bind(get_result(), name, nbytes, fused_nodes)

    return LambdaFuture(result)


def _compile_error_class():
    from torch._inductor.exc import CppCompileError

    class XxnpuKernelCompileError(CppCompileError):
        """CppCompileError whose message starts with the Inductor kernel's name and source
        file (the generated function itself is called ``kernel``)."""

        def __init__(self, cmd, output, kernel_name: str = "", source: str = "") -> None:
            super().__init__(cmd, output)
            self.kernel_name, self.source = kernel_name, source
            self.args = (f"xxnpu kernel {kernel_name} failed to compile (source {source})\n{self.args[0]}",)

        def __reduce__(self):
            return (XxnpuKernelCompileError, (self.cmd, self.output, self.kernel_name, self.source))

    return XxnpuKernelCompileError


@contextlib.contextmanager
def _naming_kernel_on_compile_error(name: str):
    from torch._inductor.exc import CppCompileError

    try:
        yield
    except CppCompileError as e:
        if isinstance(e, XxnpuKernelCompileError):
            raise
        words = e.cmd if isinstance(e.cmd, (list, tuple)) else str(e.cmd).split()
        sources = [w for w in words if w.endswith(".cpp")]
        raise XxnpuKernelCompileError(e.cmd, e.output, name, sources[0] if sources else "(unknown)") from e


XxnpuKernelCompileError = _compile_error_class()


def _kernel_bytes(nodes) -> int:
    """Bytes the kernel reads and writes, as Inductor counts them (size hints for dynamic
    shapes: the profiler's bandwidth figure, not a correctness input)."""
    total = 0
    for node in nodes:
        try:
            total += int(V.graph.sizevars.optimization_hint(node.get_read_write_buffers_sizes(), fallback=0))
        except Exception:  # a size Inductor cannot estimate leaves the figure out, not the kernel
            pass
    return total


def _fused_node_names(nodes) -> str:
    """The FX nodes a kernel fused, as the "Source Nodes" comment Inductor writes above
    each generated kernel names them: for each op the kernel computes, the node of the
    graph Dynamo traced that it came from (the op's own node when it has no such source,
    as backward ops do), without repeats, in graph order."""
    from torch._inductor.utils import aggregate_origins

    ops = [n for n in aggregate_origins(list(nodes)) if n.op == "call_function"]
    graphs = {n.graph for n in ops}
    if len(graphs) == 1:
        order = _node_order(next(iter(graphs)))
        ops.sort(key=lambda n: order.get(n, len(order)))
    names = {}
    for n in ops:
        source = n.meta.get("from_node")
        names.setdefault(source[0].name if source else n.name, None)
    return ", ".join(names)


def _node_order(graph) -> dict:
    # Once per graph, not per kernel: a graph of N nodes generates up to N kernels.
    order = getattr(graph, "_xxnpu_node_order", None)
    if order is None or len(order) != len(graph.nodes):
        order = {n: i for i, n in enumerate(graph.nodes)}
        graph._xxnpu_node_order = order
    return order


def _single_threaded():
    return config.patch({"cpp.threads": 1, "cpp.dynamic_threads": False})


@functools.lru_cache(None)
def _compute_threads(index: int) -> int:
    import torch

    return max(1, int(torch.xxnpu.get_device_properties(index).multi_processor_count))


def _device_threads() -> int:
    """The compute threads of the device being generated for: the N of its kernels'
    parallel regions (any N is correct; this one gives each thread one share)."""
    import torch

    device = V.graph.current_device
    index = device.index if device is not None and device.type == DEVICE and device.index is not None else None
    return _compute_threads(torch.xxnpu.current_device() if index is None else index)


class _DeviceWorkSharing:
    """Inductor's WorkSharing (the OpenMP region its loops are written in) for the device:
    a region is ``xxnpu_device::parallel(N, [&](int64_t tid) { ... });`` (_DEVICE_PRELUDE).

    Each parallel loop nest gets a region of its own: OpenMP's regions share threads across
    several ``omp for`` loops, separated by the barrier each loop ends with; here the join
    at the end of the region is that barrier. Code Inductor would run in ``omp single``
    runs on the kernel's own thread, between regions."""

    def __init__(self, code) -> None:
        self.code = code
        self.in_parallel = False
        self.num_threads = None
        self.stack = contextlib.ExitStack()

    def parallel(self, threads) -> None:
        self.close()
        self.num_threads = threads
        self.in_parallel = True
        self.code.writeline(f"xxnpu_device::parallel({threads}, [&](int64_t tid)")
        self.stack.enter_context(self.code.indent())

    def single(self) -> bool:
        self.close()
        return False

    def close(self) -> None:
        was_parallel = self.in_parallel
        self.stack.close()
        self.in_parallel = False
        if was_parallel:
            self.code.writeline(");")

    def __enter__(self):
        self.stack.__enter__()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()


def _device_kernel_group():
    from torch._inductor.codegen import cpp

    group = cpp.KernelGroup()
    # KernelGroup entered the CPU's WorkSharing and wrote nothing yet: swap in the device's.
    group.stack.close()
    group.ws = _DeviceWorkSharing(group.loops_code)
    group.stack = contextlib.ExitStack()
    group.stack.enter_context(group.ws)
    return group


def _mark_parallel_for_device(original):
    """LoopNest.mark_parallel, also noting on the nest's first parallel level the levels
    it collapses (``omp for collapse(k)``) so that _device_loop_lines can share them out."""

    def mark_parallel(self, par_depth):
        original(self, par_depth)
        start, depth = par_depth.start_depth, par_depth.parallel_depth
        levels = self.loops[start:start + depth]
        levels[0]._xxnpu_shared = list(levels)
        for level in levels[1:]:
            level._xxnpu_folded = True

    return mark_parallel


def _device_loop_lines(original):
    """LoopLevel.lines for the device: the first level of a parallel nest (and the levels
    it collapses) becomes one loop over the tid's share of the nest's iterations, as
    OpenMP's static schedule would give thread tid; the collapsed levels' own headers
    are empty (an empty block remains). Other levels are Inductor's."""
    from torch._inductor.codegen.cpp_utils import cexpr_index
    from torch._inductor.utils import parallel_num_threads

    def lines(self):
        if getattr(self, "_xxnpu_folded", False):
            return []
        levels = getattr(self, "_xxnpu_shared", None)
        if not self.parallel:
            return original(self)
        if levels is None:
            raise AssertionError("xxnpu codegen: a parallel loop level that mark_parallel did not mark")
        offsets = [cexpr_index(level.offset) for level in levels]
        sizes = [cexpr_index(level.size) for level in levels]
        if config.cpp.no_redundant_loops and any(o == z for o, z in zip(offsets, sizes)):
            return None  # no iterations (what Inductor's lines() says with None)
        steps = []
        for level in levels:
            step = cexpr_index(level.steps)
            steps.append(step if level.steps.is_number else f"({step} == 0 ? 1 : {step})")
        tag = str(levels[0].var)
        trips = [f"xxnpu_n{j}_{tag}" for j in range(len(levels))]
        out = [
            f"const int64_t {n} = xxnpu_device::trips({o}, {z}, {st});"
            for n, o, z, st in zip(trips, offsets, sizes, steps)
        ]
        threads = parallel_num_threads()  # the region's N (_DeviceWorkSharing.parallel)
        out.append(f"const auto xxnpu_share_{tag} = xxnpu_device::share({' * '.join(trips)}, tid, {threads});")
        i = f"xxnpu_i_{tag}"

        def var_at(j: int, flat: str) -> str:
            below = " * ".join(trips[j + 1:])
            index = f"({flat} / ({below}))" if below else flat
            if j > 0:
                index = f"({index} % {trips[j]})"
            return f"{levels[j].var} = {offsets[j]} + {index} * {steps[j]}"

        if len(levels) == 1:
            init = [f"{i} = xxnpu_share_{tag}.first", f"{levels[0].var} = {offsets[0]} + {i} * {steps[0]}"]
            step = [f"++{i}", f"{levels[0].var} += {steps[0]}"]
        else:
            init = [f"{i} = xxnpu_share_{tag}.first"] + [var_at(j, i) for j in range(len(levels))]
            step = [f"++{i}"] + [var_at(j, i) for j in range(len(levels))]
        out.append(f"for(int64_t {', '.join(init)}; {i} < xxnpu_share_{tag}.second; {', '.join(step)})")
        return out

    return lines


@contextlib.contextmanager
def _device_threaded():
    """While xxnpu kernels are generated: N = the device's compute threads, parallel loops
    written for the device (_DeviceWorkSharing, _device_loop_lines). Re-entered by the
    flush inside codegen_node: the loop patches are then already in place."""
    from torch._inductor.codegen import cpp

    with contextlib.ExitStack() as stack:
        if not getattr(cpp.LoopLevel.lines, "_xxnpu", False):
            lines, mark = cpp.LoopLevel.lines, cpp.LoopNest.mark_parallel
            device_lines = _device_loop_lines(lines)
            device_lines._xxnpu = True
            cpp.LoopLevel.lines, cpp.LoopNest.mark_parallel = device_lines, _mark_parallel_for_device(mark)

            def restore():
                cpp.LoopLevel.lines, cpp.LoopNest.mark_parallel = lines, mark

            stack.callback(restore)
        stack.enter_context(config.patch({"cpp.threads": _device_threads(), "cpp.dynamic_threads": False}))
        yield


class _DeviceAtenParallel:
    """ATen's parallel_for in a C++ template's source, made the device's: each
    ``at::parallel_for(`` becomes ``xxnpu_device::aten_parallel_for<T>(`` and each
    ``at::get_thread_num()`` ``xxnpu_device::aten_thread_num()`` (_DEVICE_PRELUDE), T being
    the thread count the template sized its per-thread scratch for."""

    _FOR = "at::parallel_for("
    _TID = "at::get_thread_num()"
    _UNMAPPED = re.compile(r"at::(parallel_\w+|get_thread_num|get_num_threads)|\bomp_\w+|#pragma omp[^\n]*")

    @staticmethod
    @contextlib.contextmanager
    def rendering(scheduling):
        scheduling._xxnpu_aten_threads = _device_threads()
        try:
            yield
        finally:
            scheduling._xxnpu_aten_threads = None

    @classmethod
    def rewrite(cls, scheduling, src_code: str) -> str:
        threads = getattr(scheduling, "_xxnpu_aten_threads", None)
        if threads is None:
            return src_code
        src_code = src_code.replace(cls._FOR, f"xxnpu_device::aten_parallel_for<{threads}>(")
        src_code = src_code.replace(cls._TID, "xxnpu_device::aten_thread_num()")
        # Anything else of ATen's or OpenMP's threading would run outside the device.
        leftover = cls._UNMAPPED.search(src_code)
        if leftover:
            raise NotImplementedError(
                f"xxnpu: Inductor's C++ template uses {leftover.group(0)!r}, which torch_xxnpu does not map to "
                "the device's threads (python/torch_xxnpu/compiler/inductor.py, _DeviceAtenParallel)"
            )
        return src_code


class XxnpuScheduling(CppScheduling):
    """CppScheduling generating device kernels: parallel loops as child grids over the
    device's compute threads, with the byte count of each. Of the C++ templates, the GEMM
    one is generated single-threaded and the flex-attention one's at::parallel_for runs on
    the compute threads (_DeviceAtenParallel)."""

    def reset_kernel_group(self) -> None:
        self.kernel_group = _device_kernel_group()

    def codegen_node(self, node) -> None:
        with _device_threaded():
            super().codegen_node(node)

    def codegen_template(self, template_node, *args, **kwargs):
        from torch._inductor.codegen.cpp_flex_attention_template import CppFlexAttentionTemplate

        if isinstance(getattr(template_node.node, "template", None), CppFlexAttentionTemplate):
            # The flex attention template parallelises with at::parallel_for, which
            # define_kernel turns into the device's (_DeviceAtenParallel); its scratch is
            # sized for cpp.threads, so that is the device's thread count.
            with _device_threaded(), _DeviceAtenParallel.rendering(self):
                return super().codegen_template(template_node, *args, **kwargs)
        # The GEMM template writes OpenMP regions of its own: one thread, no region.
        with _single_threaded():
            return super().codegen_template(template_node, *args, **kwargs)

    def flush(self) -> None:
        with _device_threaded():
            super().flush()

    def define_kernel(self, src_code, nodes, kernel_args=None):
        # The wrapper dedupes kernels by source across devices: the marker line keeps an
        # xxnpu kernel from reusing a CPU kernel of the same source (called directly, on
        # host memory) in a graph that has both.
        src_code = _DeviceAtenParallel.rewrite(self, src_code)
        src_code = f"{_DEVICE_PRELUDE}\n{src_code}\n// xxnpu device kernel\n"
        wrapper = V.graph.wrapper_code
        wrapper._xxnpu_pending_bytes = _kernel_bytes(nodes)
        wrapper._xxnpu_pending_fused_nodes = _fused_node_names(nodes)
        try:
            return super().define_kernel(src_code, nodes, kernel_args)
        finally:
            wrapper._xxnpu_pending_bytes = None
            wrapper._xxnpu_pending_fused_nodes = None


class XxnpuPythonWrapperCodegen(PythonWrapperCodegen):
    """Python wrapper whose C++ kernels are xxnpu device kernels (see device_kernel)."""

    _CPU_BINDING = "async_compile.cpp_pybinding("

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            # The branches of torch.cond, the body of a while_loop: their kernels are
            # device kernels too (Inductor's own subgraph wrapper raised "device xxnpu nyi").
            return _subgraph_wrapper_class()(subgraph_name, parent_wrapper, partition_signatures)
        return XxnpuPythonWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from torch_xxnpu.compiler.inductor import device_kernel as xxnpu_device_kernel")

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        # Only kernels XxnpuScheduling is defining right now (a CPU kernel of the same
        # graph keeps Inductor's direct call).
        nbytes = getattr(self, "_xxnpu_pending_bytes", None)
        if nbytes is not None and not gpu and kernel_body.startswith(self._CPU_BINDING):
            body = kernel_body[len(self._CPU_BINDING):].rstrip()
            assert body.endswith(")"), "Inductor's cpp_pybinding(...) call changed shape"
            fused_nodes = getattr(self, "_xxnpu_pending_fused_nodes", None) or ""
            kernel_body = (
                f"xxnpu_device_kernel({kernel_name!r}, {nbytes}, {body[:-1]}, fused_nodes={fused_nodes!r})"
            )
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def codegen_cuda_stream_enter(self, stream_idx: int):
        # Inductor names the graph's streams (default_stream, stream1, ...) in the device
        # guard it writes only for GPU device types (utils.device_need_guard); a C++-codegen
        # device gets no guard, so the names are defined here, before the first switch.
        if not getattr(self, "_xxnpu_streams_defined", False):
            self._xxnpu_streams_defined = True
            from torch._inductor.stream_constants import DEFAULT_STREAM, STREAM_NAME_TEMPLATE

            self.imports.writeline("from torch._dynamo.graph_bytecode_inputs import get_external_object_by_index")
            self.writeline(f"{DEFAULT_STREAM} = torch.xxnpu.current_stream()")
            for idx, obj_idx in sorted(V.graph.scheduler.stream_idx_to_user_obj_idx.items()):
                if idx != 0:
                    stream_name = STREAM_NAME_TEMPLATE.format(stream_idx=idx)
                    self.writeline(f"{stream_name} = get_external_object_by_index({obj_idx})")
        return super().codegen_cuda_stream_enter(stream_idx)

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        # Inductor's generic allocation names the device type only and relies on a device
        # guard to pick the index, which it writes only for GPU types: without the index a
        # graph on xxnpu:1 would get its buffers on the current device.
        if device.type == DEVICE and device.index is not None:
            line = line.replace(f"device='{DEVICE}'", f"device='{DEVICE}:{device.index}'")
        return line

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        # Inductor writes a plain call only for cpu/mps C++ kernels; ours is one too (the
        # binding launches it on the current stream).
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == DEVICE:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


@functools.cache
def _subgraph_wrapper_class():
    """The wrapper of a control-flow subgraph: Inductor's SubgraphPythonWrapperCodegen (its
    code becomes a function in the parent's module, no header of its own) with this
    module's kernel definitions, launches and allocations (first in the MRO after it)."""
    from torch._inductor.codegen.wrapper import SubgraphPythonWrapperCodegen

    class XxnpuSubgraphPythonWrapperCodegen(SubgraphPythonWrapperCodegen, XxnpuPythonWrapperCodegen):
        pass

    return XxnpuSubgraphPythonWrapperCodegen


# C++ written once into a cpp_wrapper / AOTInductor wrapper that runs xxnpu kernels. The
# wrapper gets torch_xxnpu's CompiledKernelApi (ops/compiled_kernel_launch.h, the ABI: keep
# in step) from the op xxnpu::_compiled_kernel_api through the AOTI shim's
# aoti_torch_call_dispatcher. Why that way: it is the one call a JIT wrapper (loaded by
# Python next to a _C that Python loaded RTLD_LOCAL, so dlsym cannot see it) and an AOTI
# model .so (loaded by any C++ program that links torch_xxnpu's ops) can both make, with no
# link-time dependency on torch_xxnpu and no address passed in from outside.
_CPP_WRAPPER_PRELUDE = _DEVICE_PRELUDE + r"""
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace xxnpu_compiled {
struct Launch {%LAUNCH_FIELDS%};

struct Api {
    uint32_t abi_version;
    uint32_t size;
    const char* (*launch)(const Launch*);
    const char* (*intern)(const char*);
    int32_t (*mm_out)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle);
    int32_t (*addmm_out)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, double, double);
    int32_t (*bmm_out)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle);
    int32_t (*convolution)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle*, const int64_t*, int64_t,
                           const int64_t*, int64_t, const int64_t*, int64_t, int32_t, const int64_t*, int64_t,
                           int64_t, AtenTensorHandle*);
    int32_t (*baddbmm_out)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, double, double);
    int32_t (*sdpa_overrideable)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle*, double,
                                 int32_t, int32_t, double*, AtenTensorHandle*, AtenTensorHandle*, AtenTensorHandle*,
                                 AtenTensorHandle*, int64_t*, int64_t*, AtenTensorHandle*, AtenTensorHandle*,
                                 AtenTensorHandle*);
    int32_t (*sdpa_overrideable_backward)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle,
                                          AtenTensorHandle, const int32_t*, int64_t, AtenTensorHandle,
                                          AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, int64_t, int64_t,
                                          double, int32_t, AtenTensorHandle, AtenTensorHandle, double*,
                                          AtenTensorHandle*, AtenTensorHandle*, AtenTensorHandle*, AtenTensorHandle*);
    int32_t (*int_mm_out)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle);
    int32_t (*weight_int8pack_mm)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle*);
    int32_t (*scaled_mm_out)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle,
                             AtenTensorHandle*, AtenTensorHandle*, int32_t*, int32_t);
};

inline const Api& api() {
    static const Api* table = [] {
        StableIValue stack[1] = {0};
        if (aoti_torch_call_dispatcher("xxnpu::_compiled_kernel_api", "", stack) != AOTI_TORCH_SUCCESS) {
            throw std::runtime_error(
                "xxnpu compiled kernels: torch.ops.xxnpu._compiled_kernel_api is not registered "
                "(link torch_xxnpu's ops, or import torch_xxnpu)");
        }
        const Api* a = reinterpret_cast<const Api*>(static_cast<uintptr_t>(stack[0]));
        if (a->abi_version != %ABI% || a->size < sizeof(Api)) {
            throw std::runtime_error("xxnpu compiled kernels: this wrapper was built for launch ABI %ABI%, torch_xxnpu has "
                                     + std::to_string(a->abi_version) + "; recompile");
        }
        return a;
    }();
    return *table;
}

template <typename T> constexpr uint8_t pointee_size() {
    if constexpr (std::is_pointer_v<T>) {
        return static_cast<uint8_t>(sizeof(std::remove_pointer_t<T>));
    } else {
        return 0;
    }
}

template <typename T> inline uint64_t pack(T value) {
    uint64_t bits = 0;
    if constexpr (std::is_pointer_v<T>) {
        bits = reinterpret_cast<uintptr_t>(value);
    } else {
        static_assert(sizeof(T) <= sizeof(bits), "kernel scalar wider than 8 bytes");
        std::memcpy(&bits, &value, sizeof(T));
    }
    return bits;
}

template <typename T> inline T unpack(uint64_t bits) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<T>(static_cast<uintptr_t>(bits));
    } else {
        T value;
        std::memcpy(&value, &bits, sizeof(T));
        return value;
    }
}

// One instantiation per generated kernel (Fn): its device-thread entry, and the kernel's
// name and fused-node list interned once.
template <auto Fn> struct Kernel;
template <typename... A, void (*Fn)(A...)> struct Kernel<Fn> {
    template <size_t... I> static void call(const uint64_t* args, std::index_sequence<I...>) {
        Fn(unpack<A>(args[I])...);
    }

    // Runs on the device thread with device-visible pointers; never lets an exception
    // cross into the runtime: it returns the message instead.
    static const char* entry(const uint64_t* args, const void* device) {
        xxnpu_device::api = static_cast<const xxnpu_device::Api*>(device);
        return xxnpu_device::failure_of([&] { call(args, std::index_sequence_for<A...>{}); });
    }

    static void launch(const char* name, const char* fused_nodes, uint64_t bytes, A... a) {
        static const char* const interned_name = api().intern(name);
        static const char* const interned_nodes = fused_nodes[0] ? api().intern(fused_nodes) : nullptr;
        const uint64_t args[] = {pack(a)..., 0};
        const uint8_t sizes[] = {pointee_size<A>()..., 0};
        const Launch l{%ABI%, static_cast<uint32_t>(sizeof...(A)), interned_name, interned_nodes, bytes, &entry, args, sizes};
        if (const char* error = api().launch(&l)) {
            throw std::runtime_error(error);
        }
    }
};
}  // namespace xxnpu_compiled

// The C-shim functions Inductor calls for xxnpu extern kernels (torch ships them for its
// in-tree devices only): torch_xxnpu's, which dispatch to the xxnpu ATen kernels.
static inline AOTITorchError aoti_torch_xxnpu_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
    return xxnpu_compiled::api().mm_out(out, self, mat2);
}
static inline AOTITorchError aoti_torch_xxnpu_addmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
                                                        AtenTensorHandle mat2, double beta, double alpha) {
    return xxnpu_compiled::api().addmm_out(out, self, mat1, mat2, beta, alpha);
}
static inline AOTITorchError aoti_torch_xxnpu_bmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
    return xxnpu_compiled::api().bmm_out(out, self, mat2);
}
static inline AOTITorchError aoti_torch_xxnpu_convolution(
        AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
        int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
        int64_t dilation_len_, int32_t transposed, const int64_t* output_padding, int64_t output_padding_len_,
        int64_t groups, AtenTensorHandle* ret0) {
    return xxnpu_compiled::api().convolution(input, weight, bias, stride, stride_len_, padding, padding_len_, dilation,
                                             dilation_len_, transposed, output_padding, output_padding_len_, groups,
                                             ret0);
}
static inline AOTITorchError aoti_torch_xxnpu_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                          AtenTensorHandle batch1, AtenTensorHandle batch2, double beta,
                                                          double alpha) {
    return xxnpu_compiled::api().baddbmm_out(out, self, batch1, batch2, beta, alpha);
}
static inline AOTITorchError aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable(
        AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, AtenTensorHandle* attn_bias,
        double dropout_p, int32_t is_causal, int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0,
        AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3, int64_t* ret4, int64_t* ret5,
        AtenTensorHandle* ret6, AtenTensorHandle* ret7, AtenTensorHandle* ret8) {
    return xxnpu_compiled::api().sdpa_overrideable(query, key, value, attn_bias, dropout_p, is_causal,
                                                   return_debug_mask, scale, ret0, ret1, ret2, ret3, ret4, ret5, ret6,
                                                   ret7, ret8);
}
static inline AOTITorchError aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable_backward(
        AtenTensorHandle grad_out, AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value,
        AtenTensorHandle attn_bias, const int32_t* grad_input_mask, int64_t grad_input_mask_len_, AtenTensorHandle out,
        AtenTensorHandle logsumexp, AtenTensorHandle cum_seq_q, AtenTensorHandle cum_seq_k, int64_t max_q,
        int64_t max_k, double dropout_p, int32_t is_causal, AtenTensorHandle philox_seed,
        AtenTensorHandle philox_offset, double* scale, AtenTensorHandle* ret0, AtenTensorHandle* ret1,
        AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
    return xxnpu_compiled::api().sdpa_overrideable_backward(
        grad_out, query, key, value, attn_bias, grad_input_mask, grad_input_mask_len_, out, logsumexp, cum_seq_q,
        cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, scale, ret0, ret1, ret2, ret3);
}
static inline AOTITorchError aoti_torch_xxnpu__int_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                          AtenTensorHandle mat2) {
    return xxnpu_compiled::api().int_mm_out(out, self, mat2);
}
static inline AOTITorchError aoti_torch_xxnpu__weight_int8pack_mm(AtenTensorHandle self, AtenTensorHandle mat2,
                                                                  AtenTensorHandle scales, AtenTensorHandle* ret0) {
    return xxnpu_compiled::api().weight_int8pack_mm(self, mat2, scales, ret0);
}
static inline AOTITorchError aoti_torch_xxnpu__scaled_mm_out(
        AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2, AtenTensorHandle scale_a,
        AtenTensorHandle scale_b, AtenTensorHandle* bias, AtenTensorHandle* scale_result, int32_t* out_dtype,
        int32_t use_fast_accum) {
    return xxnpu_compiled::api().scaled_mm_out(out, self, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
                                               use_fast_accum);
}
""".replace("%LAUNCH_FIELDS%", _LAUNCH_FIELDS).replace("%ABI%", str(_LAUNCH_ABI))

# The shim functions _CPP_WRAPPER_PRELUDE defines for xxnpu (read from it, so that adding
# one there is all it takes).
_XXNPU_SHIM_FUNCTIONS = frozenset(re.findall(r"static inline AOTITorchError (aoti_torch_xxnpu_\w+)\(",
                                             _CPP_WRAPPER_PRELUDE))


def _cpp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class XxnpuCppWrapper(CppWrapperCpu):
    """The C++ wrapper (cpp_wrapper=True; AOTInductor) for xxnpu graphs: CppWrapperCpu,
    except that each generated kernel is launched as a device kernel through torch_xxnpu's
    launcher (as the Python wrapper's bindings do) instead of being called on the host
    thread with device pointers, and that the C-shim calls of extern kernels on xxnpu
    (``aoti_torch_xxnpu_mm_out`` ...) are torch_xxnpu's (_CPP_WRAPPER_PRELUDE).

    The wrapper is compiled as the CPU's (``self.device`` stays "cpu": same toolchain, flags
    and headers); buffers are ``aoti_torch_empty_strided`` on PrivateUse1 (DEVICE_TO_ATEN).
    """

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        # CppWrapperCpu does not lift subgraphs either (its create ignores them).
        return XxnpuCppWrapper()

    def __init__(self) -> None:
        if V.graph.aot_mode:
            # AOTInductor: the model's device (package metadata, its runner, the device of
            # its constants) is xxnpu. The JIT wrapper keeps "cpu": it is what selects the
            # CPU's build of the wrapper module.
            self.device = DEVICE
        super().__init__()
        self.needs_vec_isa = True  # the kernels are the CPU's vectorised C++
        self._xxnpu_kernels: dict = {}

    def codegen_model_constructor(self):
        # AOTI's runtime keeps the constant blob in host memory on any device but CUDA, XPU
        # and MPS (torch 2.13, aoti_runtime/model_base.h): weights baked into the .so would be
        # host memory posing as xxnpu tensors. They are loaded as xxnpu tensors instead.
        if V.graph.constants and config.aot_inductor.package_constants_in_so:
            raise NotImplementedError(
                "AOTInductor on xxnpu: compile with inductor_configs={'aot_inductor.package_constants_in_so': False} "
                "and load the weights as xxnpu tensors after loading the package "
                "(compiled.load_constants(state_dict, check_full_update=True)); docs/compile.md"
            )
        return super().codegen_model_constructor()

    def add_device_include(self, device: str) -> None:
        if device != DEVICE:
            return super().add_device_include(device)
        if DEVICE in self.included_devices:
            return
        # There is no cpp_wrapper/xxnpu.h: the host side of an xxnpu wrapper is the CPU's.
        super().add_device_include("cpu")
        self.included_devices.add(DEVICE)
        self.header.splice(_CPP_WRAPPER_PRELUDE)

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        nbytes = getattr(self, "_xxnpu_pending_bytes", None)
        if nbytes is not None and not gpu:
            self._xxnpu_kernels[kernel_name] = (nbytes, getattr(self, "_xxnpu_pending_fused_nodes", None) or "")
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, arg_types=None, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if triton or device.type != DEVICE:
            return super()._generate_kernel_call_helper(
                kernel_name, call_args, device=device, triton=triton, arg_types=arg_types, **kwargs
            )
        assert kernel_name in self._xxnpu_kernels, f"xxnpu kernel {kernel_name} was not defined by XxnpuScheduling"
        self.add_device_include(DEVICE)
        nbytes, fused_nodes = self._xxnpu_kernels[kernel_name]
        assert arg_types is not None and len(call_args) == len(arg_types)
        args = [_cpp_string(kernel_name), _cpp_string(fused_nodes), f"UINT64_C({int(nbytes)})"]
        for arg, arg_type in zip(call_args, arg_types):
            if isinstance(arg_type, str) and "*" in arg_type:
                args.append(f"({arg_type})({arg}.data_ptr())")
            else:
                args.append(arg if isinstance(arg, str) else str(arg))
        self.writeline(self.wrap_kernel_call(f"xxnpu_compiled::Kernel<&{kernel_name}>::launch", args))

    def generate_fallback_kernel(self, node) -> None:
        # An ATen op Inductor leaves to ATen on xxnpu: torch has no aoti_torch_xxnpu_<op>
        # shim for it, so it takes Inductor's runtime-lookup path (the one it uses for custom
        # ops): the op through the dispatcher by name, with the xxnpu tensors (through Python
        # in a JIT wrapper, the proxy executor in an AOTI model).
        import torch

        device = node.get_device()
        if (
            device is not None and device.type == DEVICE and isinstance(node.op_overload, torch._ops.OpOverload)
            and self.get_c_shim_func_name(node.cpp_kernel_name, DEVICE) not in _XXNPU_SHIM_FUNCTIONS
        ):
            import sympy

            if any(isinstance(out, (int, sympy.Expr)) for out in node.outputs or ()):
                # torch 2.13's runtime-lookup codegen (CppWrapperCpu.
                # generate_fallback_kernel_with_runtime_lookup_nopython) declares every output
                # a tensor handle, integer outputs included: C++ that does not compile.
                raise NotImplementedError(
                    f"torch.compile on xxnpu with cpp_wrapper=True / AOTInductor: {node.op_overload} returns "
                    "integers, which torch 2.13's C++ wrapper cannot take from a runtime-dispatched op; "
                    "the default Python wrapper supports it (docs/compile.md)"
                )
            self.generate_fallback_kernel_with_runtime_lookup(
                node.get_name(),
                node.python_kernel_name,
                lambda: [*node.codegen_args(), *node.codegen_kwargs()],
                node.op_overload,
                node.export_extern_kernel_node(),
                node.outputs if node.outputs else node.mutation_outputs,
            )
            return
        super().generate_fallback_kernel(node)

    def generate_c_shim_extern_kernel_call(self, kernel, args, device, **kwargs) -> None:
        if device == DEVICE:
            name = self.get_c_shim_func_name(kernel, device)
            if name not in _XXNPU_SHIM_FUNCTIONS:
                raise NotImplementedError(
                    f"torch.compile on xxnpu with cpp_wrapper=True / AOTInductor: the extern kernel {kernel}"
                    f"{'' if name == kernel else f' ({name})'} has no xxnpu C shim yet (there are: {', '.join(sorted(_XXNPU_SHIM_FUNCTIONS))}); "
                    "the default Python wrapper supports it (docs/compile.md)"
                )
        super().generate_c_shim_extern_kernel_call(kernel, args, device, **kwargs)


class XxnpuDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_xxnpu.compiler.dynamo import _raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.xxnpu.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.xxnpu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.xxnpu.device({device_idx})"

    def cpp_kernel_type(self) -> str:
        return "void*"


def _treat_xxnpu_nodes_as_cpp_codegen() -> None:
    """Inductor's scheduler asks ``node.is_cpu()`` in exactly three places (torch 2.13:
    loop index inversion, loop reordering, pointwise reindexing during fusion), each meaning
    "this node is generated by the C++ codegen, skip the Triton-only transformation". For a
    device on the C++ codegen the answer must be True, or fusion hands the C++ kernel
    Triton-shaped groups and fails (a TypeError in _try_reindex_pointwise_for_reduction).
    The clean fix upstream is to ask the node's backend (BackendFeature) instead."""
    from torch._inductor import scheduler

    base = scheduler.BaseSchedulerNode
    if getattr(base.is_cpu, "_xxnpu", False):
        return
    original = base.is_cpu

    def is_cpu(self) -> bool:
        if original(self):
            return True
        device = self.get_device()
        return device is not None and device.type == DEVICE

    is_cpu._xxnpu = True
    base.is_cpu = is_cpu


def _flush_before_deviceless_extern_nodes() -> None:
    """The C++ scheduling batches consecutive kernels and writes them at the next flush;
    the scheduler flushes before an extern node only when the node has a device. Stream
    and event ops (record_event, wait_event, ...) have none, so a batched kernel was written
    after them, and after the ``del`` of its inputs (UnboundLocalError at run time; wrong
    stream order in principle). No CPU graph has such nodes; an xxnpu one does. Upstream,
    the fix is one condition in Scheduler._codegen: flush when ``node.is_extern()`` also
    for device-less nodes."""
    from torch._inductor import scheduler

    cls = scheduler.Scheduler
    if getattr(cls.codegen_extern_call, "_xxnpu", False):
        return
    original = cls.codegen_extern_call

    def codegen_extern_call(self, node):
        if node.get_device() is None:
            self.flush()
        return original(self, node)

    codegen_extern_call._xxnpu = True
    cls.codegen_extern_call = codegen_extern_call


def _xxnpu_is_a_cpp_backend(common) -> None:
    """Inductor's ``utils.get_current_backend()`` names the code generator of the current
    device: "cpp" for the CPU, and for every other device type the CUDA one ("triton").
    Code that asks it then treated an xxnpu kernel as Triton's: the C++ kernels' CSE
    variables got no dtype (CSEProxy fills one in only for "cpp"), so every random op
    asserted (``CppVecKernel.arange`` on the seed's index: dropout could not compile) and
    mixed-width vector code did not compile (``softmax(x, dtype=torch.float64)`` on float32);
    dtype propagation also applied Triton's fp16/bf16 -> fp32 rule (``upcast_compute_type``).
    xxnpu kernels are the C++ codegen's, so the answer for xxnpu is "cpp". ``common`` and
    ``utils`` bind the name at import: both are replaced. Upstream: ask the device's
    registered backend."""
    from torch._inductor import utils

    if getattr(utils.get_current_backend, "_xxnpu", False):
        return
    original = utils.get_current_backend

    def get_current_backend(device_type=None) -> str:
        if not device_type:
            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type == DEVICE else original(device_type)

    get_current_backend._xxnpu = True
    utils.get_current_backend = get_current_backend
    common.get_current_backend = get_current_backend


def _codegen_version_pass():
    """A device pass (``register_backend_for_device(device_custom_pass=...)``) that changes
    nothing in the graph: it is there for its ``uuid()``, which Inductor's FX graph cache
    puts in every key. That key covers torch's sources and Inductor's config, not this
    backend's; without it a cache entry written by an older torch_xxnpu (a wrapper, kernels
    generated by older codegen rules) would be reused after they changed."""
    from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files

    class XxnpuCodegenVersion(CustomGraphModulePass):
        def __call__(self, gm) -> None:
            pass

        @functools.lru_cache(None)
        def uuid(self) -> bytes:
            import torch_xxnpu
            from torch_xxnpu.compiler import flex_attention

            # This file (codegen) and flex_attention's (a lowering).
            files = (__file__, flex_attention.__file__)
            return get_hash_for_files(files, extra=f"torch_xxnpu {torch_xxnpu.__version__}")

    return XxnpuCodegenVersion()


def _cpu_wrapper_header_for_xxnpu() -> None:
    """AOTInductor precompiles ``aoti_include/<device>.h`` (codecache._get_cpp_wrapper_header):
    torch ships none for xxnpu. An xxnpu wrapper's host side is the CPU's (XxnpuCppWrapper
    includes the CPU header), so the CPU's header is the one to precompile. Upstream: a
    header per registered backend, or the CPU's for a C++-codegen backend."""
    from torch._inductor import codecache

    if getattr(codecache._get_cpp_wrapper_header, "_xxnpu", False):
        return
    original = codecache._get_cpp_wrapper_header

    def _get_cpp_wrapper_header(device: str, aot_mode: bool = False) -> str:
        if device.split(":", 1)[0] == DEVICE:
            device = "cpu"
        return original(device, aot_mode)

    _get_cpp_wrapper_header._xxnpu = True
    codecache._get_cpp_wrapper_header = _get_cpp_wrapper_header


def register(common) -> None:
    """Registers the backend with torch._inductor.codegen.common (given as ``common``)."""
    _xxnpu_is_a_cpp_backend(common)
    _treat_xxnpu_nodes_as_cpp_codegen()
    _flush_before_deviceless_extern_nodes()
    _cpu_wrapper_header_for_xxnpu()
    # The C++ wrapper's device enum for buffers it allocates (aoti_torch_empty_strided):
    # PrivateUse1 is xxnpu.
    from torch._inductor.codegen import cpp_utils

    cpp_utils.DEVICE_TO_ATEN.setdefault(DEVICE, "at::kPrivateUse1")
    common.register_backend_for_device(
        DEVICE, XxnpuScheduling, XxnpuPythonWrapperCodegen, XxnpuCppWrapper,
        device_custom_pass=_codegen_version_pass(),
    )
    common.register_device_op_overrides(DEVICE, XxnpuDeviceOpOverrides())
