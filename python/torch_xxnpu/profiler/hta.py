"""HolisticTraceAnalysis (HTA) on xxnpu traces.

HTA (``pip install holistictraceanalysis==0.5.0``, not a dependency of the wheel) reads
Kineto traces, but finds roles by CUDA's names: launches are ``cudaLaunchKernel``,
runtime events have category ``cuda_runtime``, collectives are kernels named
``nccl*Kernel``. An xxnpu trace says ``xxnpuLaunchKernel``, ``privateuse1_runtime`` and
``xxccl:all_reduce``. This module teaches HTA those names without touching HTA's files:

    from torch_xxnpu.profiler.hta import TraceAnalysis
    analyzer = TraceAnalysis(trace_dir="traces/")   # one file per rank
    analyzer.get_temporal_breakdown(visualize=False)

``TraceAnalysis`` is HTA's own class with its own analyses; what differs is the trace it
loads (``Trace``, below) and the context each analysis runs in:

* names by role: HTA looks roles up in its symbol table by CUDA name
  (``sym_index.get("cudaLaunchKernel")``); ours answers those look-ups with the xxnpu
  symbol of the same role (``ROLE_NAMES``). The trace keeps its own names and so do the
  results.
* host waits: the trace shows a host blocked on the device as ``<api> (wait)`` on the
  host thread (a row in torch's table). HTA's model is Kineto's ``cuda_sync`` activity on
  the device ("Context Sync" / "Stream Sync") linked to the API call by correlation id;
  the loader turns device and stream waits into that, which gives the critical path its
  device-to-host edges.
* timestamps keep their nanoseconds: HTA 0.5.0 rounds a ns-precision trace to whole
  microseconds by moving each start up and each end down, which gives a sub-microsecond
  kernel a negative duration.
* stream 0: HTA assigns device events to profiler steps only on streams > 0 (CUDA's
  stream ids never are 0); the loader does the same for stream 0.
* views: the breakdowns count every event that has ``args.stream`` as device work, so
  they run on the trace without the ``cuda_sync`` waits (idle time); the critical path
  numbers the instances of an annotation among all events of its name, so it runs on the
  trace without the annotations' projections onto the streams.
* collectives: HTA classifies a kernel as communication with the module-level regex
  ``hta.utils.utils.NCCL_KERNEL_RE``, which no argument or subclass reaches. Each
  analysis (and the critical path graph's breakdown) runs with it widened to also match
  ``xxccl:`` kernels, restored afterwards (``_comm_kernels_include_xxccl``).

``Trace`` is also what ``hta.trace_diff`` needs: ``LabeledTrace(label, t=Trace(trace_dir=d))``
(or ``labeled_trace(d, label)``).
"""
import contextlib
import functools
import os
import re
import threading
import warnings

try:
    import hta.utils.utils as _hta_utils
    import pandas as pd
    from hta.common.trace import Trace as _HtaTrace
    from hta.common.trace import add_fwd_bwd_links, add_iteration, transform_correlation_to_index
    from hta.common.trace_parser import parse_trace_dataframe
    from hta.analyzers.critical_path_analysis import CPGraph
    from hta.common.trace_symbol_table import TraceSymbolTable
    from hta.common.types import KERNEL_LAUNCH_CATEGORY_PATTERN
    from hta.configs.default_values import DEFAULT_TRACE_DIR, AttributeSpec, ValueType
    from hta.configs.parser_config import DEFAULT_PARSE_VERSION, ParserConfig
    from hta.trace_analysis import TraceAnalysis as _HtaTraceAnalysis
    from hta.trace_diff import LabeledTrace
    from hta.version import __version_tuple__ as _HTA_VERSION
except ImportError as e:  # pragma: no cover - exercised only without HTA
    raise ImportError(
        "torch_xxnpu.profiler.hta needs HolisticTraceAnalysis 0.5.0 and what it imports (tools/setup.sh): "
        "pip install --no-deps holistictraceanalysis==0.5.0 && pip install 'pandas<3' plotly networkx psutil "
        f"PyYAML ({e})"
    ) from e

__all__ = ["TraceAnalysis", "Trace", "LabeledTrace", "labeled_trace", "ROLE_NAMES", "SUPPORTED_HTA_VERSION"]

# What this module was written against: it reaches below HTA's public API (the parse
# steps, the symbol look-ups, the kernel-type regex), which other versions may change.
SUPPORTED_HTA_VERSION = (0, 5, 0)
if tuple(_HTA_VERSION) != SUPPORTED_HTA_VERSION:
    warnings.warn(
        f"torch_xxnpu.profiler.hta was written for HTA {'.'.join(map(str, SUPPORTED_HTA_VERSION))}, "
        f"found {'.'.join(map(str, _HTA_VERSION))}: results may be wrong",
        stacklevel=2,
    )

# The CUDA name HTA looks a role up by -> the xxnpu name of that role in our traces.
ROLE_NAMES = {
    # categories
    "cuda_runtime": "privateuse1_runtime",
    "cuda_driver": "privateuse1_driver",
    # launches (launch statistics, queue length, critical path's launch edges)
    "cudaLaunchKernel": "xxnpuLaunchKernel",
    "cudaMemcpyAsync": "xxnpuMemcpyAsync",
    "cudaMemsetAsync": "xxnpuMemsetAsync",
    # calls that may block the host (critical path: their wait is not CPU work)
    "cudaMemcpy": "xxnpuMemcpy",
    "cudaDeviceSynchronize": "xxnpuDeviceSynchronize",
    "cudaStreamSynchronize": "xxnpuStreamSynchronize",
    "cudaEventSynchronize": "xxnpuEventSynchronize",
    "cudaEventQuery": "xxnpuEventQuery",
    # cross-stream dependencies (critical path)
    "cudaEventRecord": "xxnpuEventRecord",
    "cudaStreamWaitEvent": "xxnpuStreamWaitEvent",
}

# Kernels HTA should count as communication besides NCCL's.
COMM_KERNEL_PATTERN = r"^xxccl:"

# Host waits (args.wait of "<api> (wait)") that become Kineto's device-side sync events.
_WAIT_TO_SYNC = {"device": "Context Sync", "stream": "Stream Sync"}
_WAIT_SUFFIX = " (wait)"
# Float microseconds: a wait ends inside its call, but equal ends may differ by an ulp.
_CONTAIN_SLACK_US = 0.002


class _RoleIndex(dict):
    """A symbol -> id dict that also answers look-ups of a CUDA name with the id of the
    xxnpu symbol of the same role. Only look-ups see the aliases: iteration, len() and
    pandas (``pd.Series(sym_index)``) see the real symbols."""

    def __init__(self, roles):
        super().__init__()
        self._roles = dict(roles)

    def _alias(self, key):
        other = self._roles.get(key) if isinstance(key, str) else None
        return other if other is not None and dict.__contains__(self, other) else None

    def __missing__(self, key):
        other = self._alias(key)
        if other is None:
            raise KeyError(key)
        return dict.__getitem__(self, other)

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        other = self._alias(key)
        return dict.__getitem__(self, other) if other is not None else default

    def __contains__(self, key):
        return dict.__contains__(self, key) or self._alias(key) is not None


class _SymbolTable(TraceSymbolTable):
    """HTA's symbol table with role look-ups (``ROLE_NAMES``)."""

    def __init__(self, roles=None):
        super().__init__()
        self.roles = dict(ROLE_NAMES if roles is None else roles)
        self.sym_index = _RoleIndex(self.roles)

    def get_kernel_launch_ids(self):
        # HTA finds launches here by a regex over the symbols (cuda.*LaunchKernel, ...):
        # add the symbols that play a matched CUDA name's role.
        ids = set(super().get_kernel_launch_ids())
        for cuda, ours in self.roles.items():
            if KERNEL_LAUNCH_CATEGORY_PATTERN.match(cuda) and dict.__contains__(self.sym_index, ours):
                ids.add(dict.__getitem__(self.sym_index, ours))
        return sorted(ids)

    def add_symbols(self, symbols):
        for s in symbols:
            # A real symbol is added even when an alias already answers for its name.
            if not dict.__contains__(self.sym_index, s):
                dict.__setitem__(self.sym_index, s, len(self.sym_table))
                self.sym_table.append(s)


def _parser_config():
    """HTA's default parser config plus the args the loader reads."""
    cfg = ParserConfig.get_default_cfg()
    cfg.add_args([
        AttributeSpec(name, raw, kind, default, DEFAULT_PARSE_VERSION)
        for name, raw, kind, default in (
            ("device", "device", ValueType.Int, -1),
            ("target_stream", "target stream", ValueType.Int, -1),
            ("wait_kind", "wait", ValueType.String, ""),
        )
    ])
    return cfg


@contextlib.contextmanager
def _env(name, value):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _host_waits_as_syncs(df, symbols):
    """Turns device and stream waits ("<api> (wait)" on the host thread) into what HTA
    expects from Kineto: a ``cuda_sync`` event on the device ("Context Sync" on no stream,
    "Stream Sync" on the stream waited for) with the correlation id of the API call it was
    part of. Other waits (a pageable copy, an event) stay host events."""
    index = symbols.get_sym_id_map()
    runtime = index.get("privateuse1_runtime")
    if runtime is None or "wait_kind" not in df.columns:
        return
    waits = df[(df["cat"] == runtime) & df["wait_kind"].isin(list(_WAIT_TO_SYNC))]
    if waits.empty:
        return
    names = symbols.get_sym_table()
    base = waits["name"].map(lambda i: index.get(names[i][: -len(_WAIT_SUFFIX)], -1)
                             if names[i].endswith(_WAIT_SUFFIX) else -1)
    w = pd.DataFrame({"row": waits.index, "pid": waits["pid"], "tid": waits["tid"], "api": base,
                      "ts": waits["ts"], "end": waits["ts"] + waits["dur"]})
    calls = df[(df["cat"] == runtime) & (df["correlation"] > 0)]
    c = pd.DataFrame({"pid": calls["pid"], "tid": calls["tid"], "api": calls["name"], "call_ts": calls["ts"],
                      "call_end": calls["ts"] + calls["dur"], "call_correlation": calls["correlation"]})
    m = w.merge(c, on=["pid", "tid", "api"])
    m = m[(m["call_ts"] <= m["ts"] + _CONTAIN_SLACK_US) & (m["call_end"] + _CONTAIN_SLACK_US >= m["end"])]
    m = m.sort_values("call_ts").drop_duplicates("row", keep="last").set_index("row")
    if m.empty:
        return
    symbols.add_symbols(["cuda_sync", *_WAIT_TO_SYNC.values()])
    # HTA downcasts integer columns to the smallest type their values fit; new symbol ids
    # and device pids may not fit it.
    for col in ("cat", "name", "pid", "tid", "stream", "correlation"):
        df[col] = df[col].astype("int64")
    rows = m.index
    kinds = df.loc[rows, "wait_kind"]
    on_stream = kinds.eq("stream")
    stream = df.loc[rows, "target_stream"].where(on_stream, -1)
    df.loc[rows, "cat"] = index["cuda_sync"]
    df.loc[rows, "name"] = kinds.map(lambda k: index[_WAIT_TO_SYNC[k]])
    df.loc[rows, "correlation"] = m["call_correlation"]
    df.loc[rows, "pid"] = df.loc[rows, "device"]
    df.loc[rows, "stream"] = stream
    df.loc[rows, "tid"] = stream


def _drop_strings(df):
    # HTA's critical path casts whole frames to int (`.fillna(-1).astype(int)`): a column
    # of words would stop it.
    df.drop(columns=["wait_kind"], inplace=True, errors="ignore")


def _steps_of_stream0(df):
    """HTA puts a device event in its launch's profiler step on streams > 0 only (CUDA
    stream ids never are 0); xxnpu's default stream is 0."""
    on0 = df["stream"].eq(0)
    if not on0.any():
        return
    iteration = df["iteration"]
    df.loc[on0, "iteration"] = df.loc[on0, "index_correlation"].map(
        lambda i: iteration.get(i, -1) if i > 0 else -1)
    df["iteration"] = pd.to_numeric(df["iteration"], downcast="integer")


def parse_trace_file(path, cfg=None):
    """HTA's ``parse_trace_file`` for an xxnpu trace: (metadata, events, symbol table)."""
    cfg = cfg or _parser_config()
    # Integer-microsecond rounding gives sub-microsecond kernels negative durations.
    with _env("HTA_DISABLE_NS_ROUNDING", "1"):
        meta, df, symbols = parse_trace_dataframe(path, cfg)
    _host_waits_as_syncs(df, symbols)
    _drop_strings(df)
    add_fwd_bwd_links(df)
    df = transform_correlation_to_index(df, symbols)
    add_iteration(df, symbols)
    _steps_of_stream0(df)
    df["end"] = df["ts"] + df["dur"]
    return meta, df, symbols


class Trace(_HtaTrace):
    """HTA's ``Trace`` for xxnpu traces: role look-ups, host waits as sync events,
    nanosecond timestamps, profiler steps on stream 0 (see the module docstring)."""

    def __init__(self, trace_files=None, trace_dir=DEFAULT_TRACE_DIR, parser_config=None):
        super().__init__(trace_files, trace_dir, parser_config or _parser_config())
        self.symbol_table = _SymbolTable()

    def parse_single_rank(self, rank):
        if rank in self.trace_files:
            self._add_ranks([rank])

    # Ranks are parsed one after the other: HTA forks a pool for several, which is not
    # worth a fork of a process that has torch loaded for the handful of ranks a machine
    # like this one traces.
    def parse_multiple_ranks(self, ranks, use_multiprocessing=True, use_memory_profiling=True):
        self._add_ranks(ranks)

    def _add_ranks(self, ranks):
        local = {}
        for rank in ranks:
            self.meta_data[rank], self.traces[rank], local[rank] = parse_trace_file(
                self.trace_files[rank], self.parser_config)
            self.symbol_table.add_symbols(local[rank].get_sym_table())
        # Each rank was encoded with its own table: re-encode with the shared one.
        ids = self.symbol_table.get_sym_id_map()
        for rank in ranks:
            table = local[rank].get_sym_table()
            to_shared = [dict.__getitem__(ids, s) for s in table]
            for col in ("cat", "name"):
                self.traces[rank][col] = self.traces[rank][col].map(lambda i: to_shared[i])


def labeled_trace(trace_dir, label):
    """An xxnpu trace directory as ``hta.trace_diff``'s ``LabeledTrace``."""
    return LabeledTrace(label=label, t=Trace(trace_dir=trace_dir))


# ---- the analyses

_PATCH_LOCK = threading.RLock()


@contextlib.contextmanager
def _comm_kernels_include_xxccl():
    """HTA 0.5.0 decides "communication kernel" with ``hta.utils.utils.NCCL_KERNEL_RE``,
    read at each call by ``is_comm_kernel`` (the breakdowns, the comm/compute overlap,
    the critical path). No argument, config or subclass reaches it, so for the duration
    of one analysis it is widened to also match xxccl's kernels, then restored. The lock
    keeps two analyses on different threads from restoring each other's patch; code that
    calls HTA directly on another thread meanwhile would also see xxccl kernels as
    communication, which no CUDA kernel name matches."""
    with _PATCH_LOCK:
        original = _hta_utils.NCCL_KERNEL_RE
        _hta_utils.NCCL_KERNEL_RE = re.compile(f"(?:{original.pattern})|(?:{COMM_KERNEL_PATTERN})")
        try:
            yield
        finally:
            _hta_utils.NCCL_KERNEL_RE = original


def _view_without(t, category):
    """A shallow copy of trace ``t`` without the events of ``category``."""
    view = _HtaTrace.__new__(type(t))
    view.__dict__.update(t.__dict__)
    cat = t.symbol_table.get_sym_id_map().get(category)
    view.traces = {r: df if cat is None else df[df["cat"] != cat] for r, df in t.traces.items()}
    return view


# What an analysis sees, when it is not the whole trace:
# - the breakdowns count every event with a stream as device work: not the cuda_sync
#   events, which are a stream (or the host) waiting, i.e. idle time;
# - the critical path counts "instances" of an annotation among all events of that name:
#   not the record_function ranges' projections onto the streams (gpu_user_annotation,
#   one per stream that ran the range's work), so that instance_id=1 is the second
#   ProfilerStep, not the first one's projection.
_VIEWS = {
    "get_temporal_breakdown": "cuda_sync",
    "get_gpu_kernel_breakdown": "cuda_sync",
    "get_comm_comp_overlap": "cuda_sync",
    "get_idle_time_breakdown": "cuda_sync",
    "get_memory_bw_summary": "cuda_sync",
    "get_memory_bw_time_series": "cuda_sync",
    "critical_path_analysis": "gpu_user_annotation",
}


class TraceAnalysis(_HtaTraceAnalysis):
    """HTA's ``TraceAnalysis`` over xxnpu traces (one file per rank in ``trace_dir``, or
    ``trace_files={rank: path}``). Every analysis of HTA's class is available, unchanged;
    see the module docstring for what is adapted. The graph ``critical_path_analysis``
    returns is HTA's ``CPGraph``."""

    def __init__(self, trace_files=None, trace_dir=DEFAULT_TRACE_DIR, include_last_profiler_step=False):
        # Not HTA's __init__: it would load the files with HTA's Trace.
        self.t = Trace(trace_files, trace_dir)
        self.t.load_traces(include_last_profiler_step)
        assert self.t.is_parsed
        self._full = self.t
        self._views = {cat: _view_without(self.t, cat) for cat in set(_VIEWS.values())}

    def critical_path_analysis(self, rank, annotation, instance_id):
        result = self._critical_path_analysis(rank, annotation, instance_id)
        if result is not None and result[0] is not None:
            result[0].__class__ = _CPGraph  # its breakdown, read later, classifies kernels too
        return result  # None when HTA finds no such annotation

    @contextlib.contextmanager
    def _hta_context(self, without):
        with _comm_kernels_include_xxccl():
            self.t = self._full if without is None else self._views[without]
            try:
                yield
            finally:
                self.t = self._full


def _adapted(name, method):
    without = _VIEWS.get(name)

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._hta_context(without):
            return method(self, *args, **kwargs)

    return run


for _name, _method in list(vars(_HtaTraceAnalysis).items()):
    if callable(_method) and not _name.startswith("_"):
        setattr(TraceAnalysis, "_critical_path_analysis" if _name == "critical_path_analysis" else _name,
                _adapted(_name, _method))
del _name, _method


class _CPGraph(CPGraph):
    """The graph ``critical_path_analysis`` returns: its breakdown (``bound_by``, also
    behind ``summary()``) tells communication kernels by HTA's regex when it is called,
    after the analysis has returned."""

    def get_critical_path_breakdown(self):
        with _comm_kernels_include_xxccl():
            return super().get_critical_path_breakdown()
