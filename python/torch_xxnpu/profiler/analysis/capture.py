"""One pass over a trace's events: device work, runtime calls, ops, memory events, syncs
and annotations sorted out, the capture window, and the links between them. Every
summary section reads a ``Capture``."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.errors import DEVICE_EXPECTED, NoDeviceActivityError
from torch_xxnpu.profiler.analysis.events import DEVICE_CATS, OP_CAT, RUNTIME_CATS, Event
from torch_xxnpu.profiler.analysis.links import link_device_work, op_parents
from torch_xxnpu.profiler.analysis.numeric import is_int, is_num, to_ns, to_us


class Capture:
    """The events of a trace, grouped and linked.

    ``device`` is sorted by (start, end, index); ``w0``/``w1`` bound the capture window
    in ns; ``parents`` maps an op's index to its enclosing op; ``launch_of``/``op_of``
    map a device activity's index to its launch runtime event / op (or None);
    ``by_dev``/``by_stream`` group the device work by device and (device, stream).
    """

    def __init__(self, trace, source=None):
        self.trace = trace
        self.source = source
        self.device, self.runtime, self.ops, self.mem_events, self.device_syncs, self.annotations = \
            [], [], [], [], [], []
        self.process_names, self.thread_names = {}, {}
        self.malformed = 0
        flow_s, flow_f = self._read(trace.get("traceEvents", []))
        if not self.device:
            raise NoDeviceActivityError(f"{source or 'trace'}: no device activity; expected {DEVICE_EXPECTED}")
        self.window = self.w1 - self.w0

        self.ops_by_row = defaultdict(list)
        for o in self.ops:
            self.ops_by_row[o.row].append(o)
        self.parents = op_parents(self.ops_by_row)

        self.device.sort(key=lambda d: (d.start, d.end, d.idx))
        self.launch_of, self.op_of = link_device_work(self.device, self.runtime, self.ops, self.ops_by_row,
                                                      flow_s, flow_f, self.annotations)
        self.total_device = sum(d.dur for d in self.device)
        self.by_dev = defaultdict(list)
        self.by_stream = defaultdict(list)
        for d in self.device:
            self.by_dev[self.dev_of(d)].append(d)
            self.by_stream[(self.dev_of(d), self.stream_of(d))].append(d)

    def _read(self, raw):
        """Sorts the events out; returns the flow ends (``s`` by place, ``f`` by id)."""
        flow_s, flow_f = {}, {}
        window_lo, window_hi = None, None
        for i, e in enumerate(raw):
            if not isinstance(e, dict):
                self.malformed += 1
                continue
            ph = e.get("ph")
            if ph == "M":
                args = e.get("args") if isinstance(e.get("args"), dict) else {}
                if e.get("name") == "process_name":
                    self.process_names[e.get("pid")] = str(args.get("name", ""))
                elif e.get("name") == "thread_name":
                    self.thread_names[(e.get("pid"), e.get("tid"))] = str(args.get("name", ""))
                continue
            if ph not in ("X", "i", "I", "s", "f") or not is_num(e.get("ts")):
                if ph in ("X", "i", "I"):
                    self.malformed += 1
                continue
            if ph in ("s", "f"):
                key = (e.get("pid"), e.get("tid"), to_ns(e["ts"]))
                (flow_s if ph == "s" else flow_f)[key if ph == "s" else e.get("id")] = (
                    e.get("id") if ph == "s" else key)
                continue
            if ph == "X" and not (is_num(e.get("dur")) and e["dur"] >= 0):
                self.malformed += 1
                continue
            ev = Event(e, i)
            if ev.cat == "Trace" or (ph in ("i", "I") and e.get("s") == "g"):
                continue  # Kineto's span markers: not the workload
            window_lo = ev.start if window_lo is None else min(window_lo, ev.start)
            window_hi = ev.end if window_hi is None else max(window_hi, ev.end)
            if ph in ("i", "I"):
                if ev.name == "[memory]":
                    self.mem_events.append(ev)
                continue
            if ev.cat in DEVICE_CATS:
                self.device.append(ev)
            elif ev.cat in RUNTIME_CATS:
                self.runtime.append(ev)
            elif ev.cat == OP_CAT:
                self.ops.append(ev)
            elif ev.cat == "cuda_sync":
                self.device_syncs.append(ev)
            elif ev.cat == "user_annotation":
                self.annotations.append(ev)
        self.w0, self.w1 = window_lo, window_hi
        return flow_s, flow_f

    def rel(self, t):
        """ns timestamp -> us since the capture window's start."""
        return to_us(t - self.w0)

    def top_level(self, o):
        while self.parents.get(o.idx) is not None:
            o = self.parents[o.idx]
        return o

    def label(self, dv):
        return self.process_names.get(dv) or f"device {dv}"

    @staticmethod
    def dev_of(d):
        v = d.args.get("device")
        return v if is_int(v) else d.pid

    @staticmethod
    def stream_of(d):
        v = d.args.get("stream")
        return v if is_int(v) else d.tid

    @staticmethod
    def kind_of(d):
        return DEVICE_CATS[d.cat]
