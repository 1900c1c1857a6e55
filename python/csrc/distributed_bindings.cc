// torch_xxnpu._C bindings of the distributed layer: the xxccl backend's Python class.
//
// Its base class, c10d's Backend, is registered by torch.distributed's own bindings,
// which exist only once `torch.distributed` has been imported: so the class is defined
// by `_xxccl_init()`, called from torch_xxnpu.distributed, not at module load.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/xxccl_backend.h"
#include "python/csrc/bindings.h"

namespace py = pybind11;

namespace xxnpu {

void InitDistributedBindings(py::module_& m) {
  m.def("_xxccl_init", [m]() mutable {
    if (py::hasattr(m, "_ProcessGroupXXCCL")) return;
    using distributed::XxcclBackend;
    py::class_<XxcclBackend, c10d::Backend, c10::intrusive_ptr<XxcclBackend>>(
        m, "_ProcessGroupXXCCL", "xxccl: c10d backend for xxnpu tensors (see docs/distributed.md)")
        // Store and backend arrive as torch's own Python objects; c10d objects count their
        // references themselves, so a raw pointer is turned back into an owning one.
        .def(py::init([](const py::object& store, int rank, int size, const py::object& host,
                         std::chrono::milliseconds timeout, bool shared_memory) {
               auto* raw_store = store.cast<c10d::Store*>();
               auto* raw_host = host.cast<c10d::Backend*>();
               // The constructor waits on the store for the other ranks (shared-memory set-up).
               py::gil_scoped_release no_gil;
               return c10::make_intrusive<XxcclBackend>(c10::intrusive_ptr<c10d::Store>::reclaim_copy(raw_store), rank,
                                                        size, c10::intrusive_ptr<c10d::Backend>::reclaim_copy(raw_host),
                                                        timeout, shared_memory);
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("host_backend"), py::arg("timeout"),
             py::arg("shared_memory") = false)
        .def_property_readonly("_transport", &XxcclBackend::transport,
                               "'shm+gloo' when reductions use shared memory between the ranks, else 'gloo'")
        .def_property_readonly("_staging", &XxcclBackend::staging, "XXCCL_STAGING as read at creation")
        .def_property_readonly("_check_shapes", &XxcclBackend::check_shapes,
                               "XXCCL_CHECK_SHAPES as read at creation");
  });
}

}  // namespace xxnpu
