// torch_xxnpu._C bindings for sharing xxnpu storages between processes: what
// torch_xxnpu/xxnpu/ipc.py's torch.multiprocessing reducers call.
#include <pybind11/pybind11.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/pybind.h>

#include "device/c10/xxnpu_ipc.h"
#include "python/csrc/bindings.h"

namespace py = pybind11;

namespace xxnpu {

void InitIpcBindings(py::module_& m) {
  // (device, mem_handle, storage_bytes, offset_bytes, ref_handle) for one send.
  m.def("_ipc_share_storage", [](py::handle storage) {
    const c10::Storage s = torch::createStorage(storage.ptr());
    SharedStorageHandle h;
    {
      py::gil_scoped_release no_gil;  // synchronizes the device's current stream
      h = ShareStorage(s);
    }
    return py::make_tuple(h.device, py::bytes(h.mem_handle), h.storage_bytes, h.offset_bytes,
                          py::bytes(h.ref_handle));
  });
  m.def("_ipc_open_storage", [](int device, const std::string& mem_handle, size_t storage_bytes,
                                size_t offset_bytes, const std::string& ref_handle) {
    SharedStorageHandle h{device, mem_handle, storage_bytes, offset_bytes, ref_handle};
    c10::Storage s;
    {
      py::gil_scoped_release no_gil;
      s = OpenSharedStorage(h);
    }
    return py::reinterpret_steal<py::object>(torch::createPyObject(s));
  });
  m.def("_ipc_release_reference", [](const std::string& ref_handle) { ReleaseSharedReference(ref_handle); });
  m.def("_ipc_collect", [] {
    py::gil_scoped_release no_gil;
    return IpcCollect();
  });
}

}  // namespace xxnpu
