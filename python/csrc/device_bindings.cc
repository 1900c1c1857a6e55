// torch_xxnpu._C bindings of the device layer: initialisation and fork safety, devices,
// streams, the caching allocator (settings, history, snapshot in CUDA's schema) and the
// default generators. torch.xxnpu (python/torch_xxnpu/xxnpu/) is built on these.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/Context.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_stream.h"
#include "device/caching_allocator.h"
#include "device/generator/xxnpu_generator.h"
#include "device/runtime.h"
#include "python/csrc/bindings.h"

namespace py = pybind11;

namespace xxnpu {
namespace {

// A device index from Python. Python ints are wider than c10::DeviceIndex (int8_t):
// narrowing before checking made set_device(256) select device 0 (and 128 become -128),
// so every binding taking an index checks the full value first. -1 means the current
// device and is passed through; anything else outside 0..count-1 is the error
// ResolveDeviceIndex raises (torch.AcceleratorError, as CUDA's "invalid device ordinal").
c10::DeviceIndex DeviceIndexArg(int64_t d) {
  if (d == -1) return -1;
  const int64_t count = XxnpuDeviceCount();
  if (d < 0 || d >= count) {
    ThrowStatus(absl::OutOfRangeError(absl::StrCat("Invalid xxnpu device index ", d, ": expected 0 <= index < ",
                                                   count, " (the number of xxnpu devices)")));
  }
  return static_cast<c10::DeviceIndex>(d);
}

py::tuple PackStream(const XxnpuStream& s) {
  return py::make_tuple(s.id(), static_cast<int>(s.device_index()), static_cast<int>(s.unwrap().device_type()));
}

// ---- allocation contexts: interned Python tracebacks for the memory snapshot.
std::mutex g_context_mu;
std::unordered_map<uint64_t, std::shared_ptr<torch::CapturedTraceback>> g_contexts;
std::atomic<uint64_t> g_next_context{1};

uint64_t RecordPythonContext() {
  // Only a thread Python knows can have Python frames (allocations from device or C++
  // threads get no context). torch releases the GIL around ops; gather() takes it again.
  if (PyGILState_GetThisThreadState() == nullptr) return 0;
  auto tb = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
  const uint64_t id = g_next_context.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_context_mu);
  g_contexts.emplace(id, std::move(tb));
  return id;
}

void RecordMemoryHistory(bool enabled, size_t max_entries, bool stacks) {
  for (c10::DeviceIndex d = 0; d < XxnpuDeviceCount(); ++d) {
    GetXxnpuAllocator()->ForDevice(d).RecordHistory(enabled, max_entries);
  }
  SetAllocationContextRecorder(enabled && stacks ? &RecordPythonContext : nullptr);
  if (!enabled) {
    std::lock_guard<std::mutex> lock(g_context_mu);
    g_contexts.clear();
  }
}

// Symbolizes every context the snapshot references, once each.
class FrameTable {
 public:
  void Want(uint64_t id) {
    if (id != 0) wanted_.emplace(id, py::none());
  }
  void Resolve() {
    std::vector<uint64_t> ids;
    std::vector<torch::CapturedTraceback*> tbs;
    {
      std::lock_guard<std::mutex> lock(g_context_mu);
      for (auto& [id, _] : wanted_) {
        auto it = g_contexts.find(id);
        if (it == g_contexts.end()) continue;
        ids.push_back(id);
        tbs.push_back(it->second.get());
      }
    }
    if (tbs.empty()) return;
    torch::SymbolizedTracebacks st = torch::symbolize(tbs);
    for (size_t i = 0; i < ids.size(); ++i) {
      py::list frames;
      for (uint64_t f : st.tracebacks[i]) {
        const auto& fr = st.all_frames.at(f);
        py::dict d;
        d["filename"] = fr.filename;
        d["line"] = fr.lineno;
        d["name"] = fr.funcname;
        frames.append(d);
      }
      wanted_[ids[i]] = frames;
    }
  }
  py::object Frames(uint64_t id) const {
    auto it = wanted_.find(id);
    if (it == wanted_.end() || it->second.is_none()) return py::list();
    return it->second;
  }

 private:
  std::unordered_map<uint64_t, py::object> wanted_;
};

int64_t StreamIdOf(xxnpuStream_t stream) {
  if (stream == nullptr) return 0;
  auto id = xxnpuStreamGetId(stream);
  return id.ok() ? *id : -1;
}

// torch.cuda.memory._snapshot()'s schema, so torch.cuda._memory_viz renders it.
py::dict Snapshot() {
  std::vector<MemorySnapshot> snaps;
  for (c10::DeviceIndex d = 0; d < XxnpuDeviceCount(); ++d) {
    if (GetXxnpuAllocator()->HasDevice(d)) {
      snaps.push_back(GetXxnpuAllocator()->ForDevice(d).Snapshot());
    } else {
      MemorySnapshot empty;
      empty.device = d;
      snaps.push_back(std::move(empty));
    }
  }
  FrameTable table;
  for (const auto& s : snaps) {
    for (const auto& seg : s.segments) {
      for (const auto& b : seg.blocks) table.Want(b.context_id);
    }
    for (const auto& t : s.trace) table.Want(t.context_id);
  }
  table.Resolve();

  py::list segments;
  py::list device_traces;
  for (const auto& s : snaps) {
    for (const auto& seg : s.segments) {
      py::dict d;
      d["device"] = s.device;
      d["address"] = seg.address;
      d["total_size"] = seg.total_size;
      d["allocated_size"] = seg.allocated_size;
      d["active_size"] = seg.active_size;
      d["requested_size"] = seg.requested_size;
      d["stream"] = StreamIdOf(seg.stream);
      d["segment_type"] = seg.is_large ? "large" : "small";
      d["segment_pool_id"] = py::make_tuple(seg.pool_id.first, seg.pool_id.second);  // {0, 0}: no graph pool
      d["is_expandable"] = false;
      d["frames"] = py::list();
      py::list blocks;
      for (const auto& b : seg.blocks) {
        py::dict bd;
        bd["address"] = b.address;
        bd["size"] = b.size;
        bd["requested_size"] = b.requested_size;
        bd["state"] = BlockStateName(b.state);
        bd["frames"] = table.Frames(b.context_id);
        blocks.append(bd);
      }
      d["blocks"] = blocks;
      segments.append(d);
    }
    py::list trace;
    for (const auto& t : s.trace) {
      py::dict td;
      td["action"] = TraceActionName(t.action);
      // An OOM entry carries the device's free bytes instead of an address (CUDA's).
      td[t.action == TraceAction::OOM ? "device_free" : "addr"] = t.addr;
      td["size"] = t.size;
      td["stream"] = StreamIdOf(t.stream);
      td["time_us"] = t.time_ns / 1000;
      td["frames"] = table.Frames(t.context_id);
      td["compile_context"] = "N/A";
      td["user_metadata"] = "";
      trace.append(td);
    }
    device_traces.append(trace);
  }
  py::dict settings;
  settings["PYTORCH_XXNPU_ALLOC_CONF"] = "";
  settings["max_split_size"] = -1;
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  out["allocator_settings"] = settings;
  out["external_annotations"] = py::list();
  return out;
}

}  // namespace

void InitDeviceBindings(py::module_& m) {
  m.def("_init", [] {
    // As torch.cuda: a child forked after this point must not use the device.
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  });
  m.def("_is_in_bad_fork", [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); });
  m.def("_device_count", [] { return static_cast<int>(XxnpuDeviceCount()); });
  // torch_xxnpu.xxnpu._utils._get_device_index's check (every torch.xxnpu API taking a
  // device), so that an index that would be narrowed never reaches a torch.device.
  m.def("_check_device_index", [](int64_t d) { return static_cast<int>(DeviceIndexArg(d)); });
  m.def("_get_device", [] { return static_cast<int>(ResolveDeviceIndex(-1)); });
  m.def("_set_device", [](int64_t d) { CheckOk(xxnpuSetDevice(ResolveDeviceIndex(DeviceIndexArg(d)))); });
  // The hooks already implement the exchange; the binding only forwards.
  m.def("_exchange_device", [](int64_t d) {
    return static_cast<int>(at::detail::getPrivateUse1Hooks().exchangeDevice(DeviceIndexArg(d)));
  });
  m.def("_synchronize", [](int64_t d) {
    py::gil_scoped_release no_gil;
    const int previous = ResolveDeviceIndex(-1);
    CheckOk(xxnpuSetDevice(ResolveDeviceIndex(DeviceIndexArg(d))));
    absl::Status s = xxnpuDeviceSynchronize();
    (void)xxnpuSetDevice(previous);
    CheckOk(s, "torch.xxnpu.synchronize");  // the message names the Python API users called
  });

  py::class_<DeviceProperties>(m, "_XxnpuDeviceProperties")
      .def_readonly("name", &DeviceProperties::name)
      .def_readonly("index", &DeviceProperties::index)
      .def_readonly("total_memory", &DeviceProperties::total_memory)
      .def_readonly("multi_processor_count", &DeviceProperties::compute_units)
      .def_readonly("max_threads_per_block", &DeviceProperties::max_threads_per_block)
      .def_readonly("strict_memory", &DeviceProperties::strict_memory)
      .def_readonly("launch_blocking", &DeviceProperties::launch_blocking)
      .def_readonly("major", &DeviceProperties::major)
      .def_readonly("minor", &DeviceProperties::minor)
      .def("__repr__", [](const DeviceProperties& p) {
        return "_XxnpuDeviceProperties(name='" + p.name + "', total_memory=" + std::to_string(p.total_memory >> 20) +
               "MB, multi_processor_count=" + std::to_string(p.compute_units) + ")";
      });
  m.def("_get_device_properties", [](int64_t d) {
    return ValueOrThrow(xxnpuGetDeviceProperties(ResolveDeviceIndex(DeviceIndexArg(d))));
  });

  m.def("_current_stream", [](int64_t d) { return PackStream(GetCurrentXxnpuStream(DeviceIndexArg(d))); });
  m.def("_default_stream", [](int64_t d) { return PackStream(GetDefaultXxnpuStream(DeviceIndexArg(d))); });
  m.def("_set_stream", [](int64_t id, int64_t device_index, int device_type) {
    auto stream = c10::Stream::unpack3(id, DeviceIndexArg(device_index),
                                       static_cast<c10::DeviceType>(device_type));
    SetCurrentXxnpuStream(XxnpuStream(stream));
  });
  m.def("_stream_from_external", [](uintptr_t handle, int64_t d) {
    return PackStream(GetStreamFromExternal(reinterpret_cast<xxnpuStream_t>(handle), DeviceIndexArg(d)));
  });
  m.def("_stream_priority_range", [] { return py::make_tuple(0, -1); });
  m.def("_stream_priority", [](int64_t id, int64_t device_index, int device_type) {
    return XxnpuStream(c10::Stream::unpack3(id, DeviceIndexArg(device_index),
                                            static_cast<c10::DeviceType>(device_type)))
        .priority();
  });

  m.def("_empty_cache", [] { GetXxnpuAllocator()->emptyCache(); });
  m.def("_set_memory_fraction", [](double f, int64_t d) {
    GetXxnpuAllocator()->SetMemoryFraction(f, DeviceIndexArg(d));
  });
  m.def("_get_memory_fraction", [](int64_t d) {
    return GetXxnpuAllocator()->ForDevice(DeviceIndexArg(d)).GetMemoryFraction();
  });
  m.def("_record_memory_history", &RecordMemoryHistory, py::arg("enabled"), py::arg("max_entries"),
        py::arg("stacks"));
  m.def("_snapshot", &Snapshot);

  // torch.Event.elapsed_time() accepts only an exact torch.Event as its argument; this
  // takes torch.xxnpu.Event (a subclass) too.
  m.def("_event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK_TYPE(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()),
                     "elapsed_time expects torch.Event objects");
    const c10::Event& a = reinterpret_cast<THPEvent*>(start.ptr())->event;
    const c10::Event& b = reinterpret_cast<THPEvent*>(end.ptr())->event;
    // torch.cuda.Event raises RuntimeError here; c10::Event (torch.Event's) a ValueError.
    // xxnpu events follow torch.cuda's, so CUDA code's `except RuntimeError` still works.
    TORCH_CHECK(a.flag() == c10::EventFlag::BACKEND_DEFAULT && b.flag() == c10::EventFlag::BACKEND_DEFAULT,
                "Both events must be created with argument 'enable_timing=True'.");
    TORCH_CHECK(a.was_marked_for_recording() && b.was_marked_for_recording(),
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a.device_index() < 0 || b.device_index() < 0 || a.device_index() == b.device_index(),
                "elapsed_time: the events are on different devices, ",
                a.device(), " and ", b.device());
    py::gil_scoped_release no_gil;
    return a.elapsedTime(b);
  });

  m.def("_default_generators", [] {
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
    py::tuple out(XxnpuDeviceCount());
    for (c10::DeviceIndex d = 0; d < XxnpuDeviceCount(); ++d) {
      out[d] = py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(GetDefaultXxnpuGenerator(d)));
    }
    return out;
  });
}

}  // namespace xxnpu
