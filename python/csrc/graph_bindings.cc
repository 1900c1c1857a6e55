// torch_xxnpu._C bindings for graphs: what torch.xxnpu.graphs needs beyond the
// device-generic torch._C._acceleratorGraph (which drives device/c10/xxnpu_graph.h):
// pool handles, the capture status of the current stream, and the private pools' stats.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>

#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_graph.h"
#include "device/c10/xxnpu_stream.h"
#include "device/caching_allocator.h"
#include "device/graph.h"
#include "python/csrc/bindings.h"

namespace py = pybind11;

namespace xxnpu {

void InitGraphBindings(py::module_& m) {
  m.def("_graph_pool_handle", [] {
    const MempoolId id = NewMempoolId();
    return py::make_tuple(id.first, id.second);
  });
  // XXNPUGraph.register_generator_state: torch.accelerator.Graph hides its implementation
  // object, so the generators go to the next capture_begin of this thread.
  m.def("_stage_graph_generators", [](const py::list& generators) {
    std::vector<at::Generator> staged;
    for (const py::handle& g : generators) {
      if (!THPGenerator_Check(g.ptr())) {
        throw py::type_error(std::string("register_generator_state expects a torch.Generator; got ") +
                             py::str(py::type::of(g).attr("__name__")).cast<std::string>());
      }
      staged.push_back(reinterpret_cast<THPGenerator*>(g.ptr())->cdata);
    }
    StageGeneratorsForNextCapture(std::move(staged));
  });
  m.def("_is_current_stream_capturing", [] { return IsCurrentStreamCapturing(); });
  // One dict per private pool of the device (an unused device has none).
  m.def("_graph_pools", [](int64_t d) {
    py::list out;
    const c10::DeviceIndex device = ResolveDeviceIndex(static_cast<c10::DeviceIndex>(d));
    if (!GetXxnpuAllocator()->HasDevice(device)) return out;
    for (const PoolInfo& p : GetXxnpuAllocator()->ForDevice(device).PrivatePools()) {
      py::dict info;
      info["id"] = py::make_tuple(p.id.first, p.id.second);
      info["use_count"] = p.use_count;
      info["allocating"] = p.allocating;
      info["segments"] = p.segments;
      info["reserved_bytes"] = p.reserved_bytes;
      info["allocated_bytes"] = p.allocated_bytes;
      info["allocations"] = p.allocations;
      out.append(info);
    }
    return out;
  });
  // What the runtime's graphs keep alive, for leak tests.
  m.def("_graph_live_counts", [] {
    const GraphLiveCounts c = xxnpuGraphGetLiveCounts();
    py::dict out;
    out["graphs"] = c.graphs;
    out["execs"] = c.execs;
    out["node_lists"] = c.node_lists;
    out["nodes"] = c.nodes;
    return out;
  });
}

}  // namespace xxnpu
