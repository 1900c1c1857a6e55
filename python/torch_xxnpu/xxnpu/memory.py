"""torch.xxnpu memory management (torch.cuda.memory's twin): statistics from the caching
allocator, cache control, the memory fraction, and memory snapshots in CUDA's pickle
schema, which torch.cuda._memory_viz renders unchanged.
"""
import collections
import pickle
import sys
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

import torch_xxnpu.xxnpu as _xxnpu
from torch_xxnpu import _C
from torch_xxnpu.xxnpu._utils import _get_device_index

__all__ = [
    "empty_cache",
    "memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "memory_summary",
    "mem_get_info",
    "set_per_process_memory_fraction",
    "get_per_process_memory_fraction",
    "memory_snapshot",
]

_device_t = Union[torch.device, str, int, None]


def _index(device: _device_t) -> int:
    _xxnpu._lazy_init()
    return _get_device_index(device, optional=True, check=True)


def empty_cache() -> None:
    """Returns every fully free cached segment to the device."""
    if _xxnpu.is_initialized():
        _C._empty_cache()


def memory_stats(device: _device_t = None) -> Dict[str, Any]:
    """The caching allocator's statistics, keyed as torch.cuda.memory_stats()'s.

    Empty before the device is initialised (as torch.cuda's: asking does not start it).
    """
    if not _xxnpu.is_initialized():
        return collections.OrderedDict()
    return torch.accelerator.memory_stats(_index(device))


def memory_allocated(device: _device_t = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: _device_t = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: _device_t = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: _device_t = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: _device_t = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: _device_t = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def reset_max_memory_allocated(device: _device_t = None) -> None:
    reset_peak_memory_stats(device)


def mem_get_info(device: _device_t = None) -> Tuple[int, int]:
    """(free, total) bytes of device memory, as the device sees them."""
    return torch.accelerator.get_memory_info(_index(device))


def set_per_process_memory_fraction(fraction: float, device: _device_t = None) -> None:
    """Caps this process's reserved memory on the device at ``fraction`` of its total."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, _index(device))


def get_per_process_memory_fraction(device: _device_t = None) -> float:
    return _C._get_memory_fraction(_index(device))


def _format_size(sz: int, pref_sz: int) -> str:
    prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_sz < 768 * 1024:
            break
        prefix = new_prefix
        sz //= 1024
        pref_sz /= 1024
    return f"{sz:6d} {prefix}"


def _format_count(cnt: int, pref_cnt: int) -> str:
    prefixes = [" ", "K", "M"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_cnt < 750 * 1000:
            break
        prefix = new_prefix
        cnt //= 1000
        pref_cnt /= 1000
    return f"{cnt:7d} {prefix} "


def memory_summary(device: _device_t = None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator's statistics (torch.cuda.memory_summary's layout)."""
    idx = _index(device)
    stats = memory_stats(idx)

    metrics_to_display = [
        ("allocated_bytes", "Allocated memory", _format_size),
        ("active_bytes", "Active memory", _format_size),
        ("requested_bytes", "Requested memory", _format_size),
        ("reserved_bytes", "xxnpu reserved memory", _format_size),
        ("inactive_split_bytes", "Non-releasable memory", _format_size),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "xxnpu reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    lines = []
    lines.append("=" * 75)
    lines.append(" {_:16} PyTorch xxnpu memory summary, device ID {device:<17d} ")
    lines.append("-" * 75)
    lines.append("  {_:9} xxnpu OOMs: {num_ooms:<12d} | {_:6} allocator retries: {num_alloc_retries:<8d}  ")
    lines.append("=" * 75)
    lines.append("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ")
    for metric_key, metric_name, formatter in metrics_to_display:
        lines.append("-" * 75)
        submetrics = [("all", metric_name)]
        if not abbreviated:
            submetrics.append(("large_pool", "      from large pool"))
            submetrics.append(("small_pool", "      from small pool"))
        current_prefval, peak_prefval, allocated_prefval, freed_prefval = None, None, None, None
        for submetric_key, submetric_name in submetrics:
            prefix = metric_key + "." + submetric_key + "."
            current = stats.get(prefix + "current", 0)
            peak = stats.get(prefix + "peak", 0)
            allocated = stats.get(prefix + "allocated", 0)
            freed = stats.get(prefix + "freed", 0)
            if current_prefval is None:
                current_prefval, peak_prefval, allocated_prefval, freed_prefval = current, peak, allocated, freed
            lines.append(
                f" {submetric_name:<21} | {formatter(current, current_prefval)} | {formatter(peak, peak_prefval)} | "
                f"{formatter(allocated, allocated_prefval)} | {formatter(freed, freed_prefval)} "
            )
    lines.append("=" * 75)
    fmt_dict = {"_": "", "device": idx}
    for k, v in stats.items():
        fmt_dict[k.replace(".", "-")] = v
    fmt_dict.setdefault("num_ooms", stats.get("num_ooms", 0))
    fmt_dict.setdefault("num_alloc_retries", stats.get("num_alloc_retries", 0))
    return "|" + "|\n|".join(lines).format(**fmt_dict) + "|\n"


# ---- memory snapshots (CUDA's schema: torch.cuda._memory_viz and pytorch.org/memory_viz read them)


_TRACE_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot")
# What the Python side keeps of _record_memory_history's arguments (applied by _snapshot).
_history = {"enabled": None, "context": "all", "skip_actions": frozenset()}


def _record_memory_history(enabled: Optional[Union[str, bool]] = "all", *args, **kwargs) -> None:
    """Starts (``enabled="all"``/``"state"``) or stops (``None``) recording allocator
    history, with torch.cuda.memory._record_memory_history's signature:

    ``(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
    clear_history=False, compile_context=False, global_record_annotations=False,
    skip_actions=None)``; a bool ``enabled`` takes the legacy signature.

    Python stacks are kept per allocation when ``context`` is not None ("state": for live
    blocks only, "alloc": also alloc events, "all": also free events). ``stacks="all"``
    records Python frames too (the simulator has no C++ frames worth showing).
    """
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(
    enabled: Optional[str] = "all",
    context: Optional[str] = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: _device_t = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: Optional[List[str]] = None,
) -> None:
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    unknown = set(skip_actions or ()) - set(_TRACE_ACTIONS)
    if unknown:
        raise ValueError(f"unknown skip_actions {sorted(unknown)}; valid: {list(_TRACE_ACTIONS)}")
    _xxnpu._lazy_init()
    if clear_history or enabled is None:
        _C._record_memory_history(False, 0, False)
    _history["enabled"] = enabled
    if enabled is None:
        return
    _history["context"] = context
    _history["skip_actions"] = frozenset(skip_actions or ())
    entries = max_entries if enabled == "all" else 0
    _C._record_memory_history(True, min(int(entries), 2**62), context is not None)


def _record_memory_history_legacy(
    enabled: bool,
    record_context: bool = True,
    trace_alloc_max_entries: int = 1,
    trace_alloc_record_context: bool = False,
    device: _device_t = None,
    record_context_cpp: bool = False,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
) -> None:
    if not enabled:
        return _record_memory_history_impl(None)
    return _record_memory_history_impl(
        "all" if trace_alloc_record_context else "state",
        context="all" if record_context else None,
        max_entries=trace_alloc_max_entries,
        clear_history=clear_history,
    )


def _snapshot(device: _device_t = None, augment_with_fx_traces: bool = False) -> Dict[str, Any]:
    """The allocator's segments, blocks and recorded history, as torch.cuda.memory._snapshot()."""
    _xxnpu._lazy_init()
    snapshot = _C._snapshot()
    context, skip = _history["context"], _history["skip_actions"]
    for trace in snapshot["device_traces"]:
        if _history["enabled"] == "state":  # live blocks' stacks only, no history
            trace.clear()
        elif skip:
            trace[:] = [e for e in trace if e["action"] not in skip]
        for e in trace:
            if context == "state" or (context == "alloc" and e["action"] != "alloc"):
                e["frames"] = []
    return snapshot


def memory_snapshot() -> List[Dict[str, Any]]:
    """The allocator's segments on every device (torch.cuda.memory_snapshot())."""
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickles _snapshot(): the file pytorch.org/memory_viz and torch.cuda._memory_viz read."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
