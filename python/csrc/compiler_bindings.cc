// torch_xxnpu._C bindings of the compile path: the launcher through which Inductor's
// generated C++ kernels run as xxnpu device kernels (python/torch_xxnpu/compiler/inductor.py).
//
// A generated kernel's Python binding packs its arguments (data pointers, sizes, scalars)
// as 64-bit words and calls XxnpuLaunchCompiledKernel through its address (no link-time
// dependency: the generated .so links neither torch nor this module). The launcher enqueues
// one kernel on the current stream of the tensors' device, named after the Inductor kernel;
// on the device thread the pointer words go through DeviceView and the generated code runs.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "python/csrc/bindings.h"

namespace xxnpu {
namespace {

// The ABI shared with the glue inductor.py appends to each kernel (_LAUNCH_GLUE); a change
// to either side bumps the version.
constexpr uint32_t kCompiledLaunchAbi = 1;

struct CompiledLaunch {
  uint32_t abi_version;
  uint32_t nargs;
  const char* name;  // interned by _compiled_kernel_name: lives as long as the process
  uint64_t bytes;
  const char* (*entry)(const uint64_t* args);  // nullptr on success, else the kernel's message
  const uint64_t* args;
  const uint8_t* is_pointer;
};

// Kernel names outlive every launch (the profiler keeps LaunchConfig::name).
const char* InternKernelName(const std::string& name) {
  static std::mutex mu;
  static auto* names = new absl::node_hash_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return names->insert(name).first->c_str();
}

// Host-side failures (before anything is queued) go back as a message the binding raises.
const char* Fail(std::string message) {
  thread_local std::string error;
  error = std::move(message);
  return error.c_str();
}

// Most kernels have a handful of arguments: up to this many, the arguments travel inside
// the launch (no allocation); more take the heap-captured form.
constexpr size_t kInlineArgs = 20;

struct InlineKernel {
  const char* (*entry)(const uint64_t*);
  uint32_t nargs;
  uint32_t pointer_mask;
  uint64_t args[kInlineArgs];

  absl::Status operator()(BlockRange) const {
    uint64_t local[kInlineArgs];
    for (uint32_t i = 0; i < nargs; ++i) {
      local[i] = (pointer_mask >> i) & 1u
                     ? reinterpret_cast<uintptr_t>(DeviceView(reinterpret_cast<const void*>(args[i])))
                     : args[i];
    }
    if (const char* error = entry(local)) return absl::InternalError(error);
    return absl::OkStatus();
  }
};
static_assert(kFitsInlineKernel<InlineKernel>);

const char* XxnpuLaunchCompiledKernel(const CompiledLaunch* launch) {
  if (launch->abi_version != kCompiledLaunchAbi) {
    return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, " was built for launch ABI ",
                             launch->abi_version, ", but torch_xxnpu expects ", kCompiledLaunchAbi,
                             ": clear Inductor's cache (TORCHINDUCTOR_CACHE_DIR) and recompile"));
  }
  // The device is the one the tensors live on; every device pointer must agree.
  int device = -1;
  for (uint32_t i = 0; i < launch->nargs; ++i) {
    if (!launch->is_pointer[i] || launch->args[i] == 0) continue;
    const int d = DeviceOfPointer(reinterpret_cast<const void*>(launch->args[i]));
    if (d < 0) {
      return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, ": argument ", i,
                               " is host memory; expected xxnpu tensors"));
    }
    if (device >= 0 && d != device) {
      return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, ": arguments on xxnpu:", device,
                               " and xxnpu:", d, "; expected all tensors on one device"));
    }
    device = d;
  }
  if (device < 0) {
    return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, " got no xxnpu tensor"));
  }
  LaunchConfig config;
  config.name = launch->name;
  config.bytes = launch->bytes;
  // One block: the generated loops are single-threaded (inductor.py says why).
  config.grid = Dim3{1, 1, 1};
  const xxnpuStream_t stream = CurrentXxnpuStreamHandle(static_cast<c10::DeviceIndex>(device));
  absl::Status status;
  if (launch->nargs <= kInlineArgs) {
    InlineKernel kernel{launch->entry, launch->nargs, 0, {}};
    for (uint32_t i = 0; i < launch->nargs; ++i) {
      kernel.args[i] = launch->args[i];
      if (launch->is_pointer[i]) kernel.pointer_mask |= 1u << i;
    }
    status = xxnpuLaunchKernel(config, kernel, stream);
  } else {
    absl::InlinedVector<uint64_t, 32> args(launch->args, launch->args + launch->nargs);
    absl::InlinedVector<uint8_t, 32> is_pointer(launch->is_pointer, launch->is_pointer + launch->nargs);
    status = xxnpuLaunchKernel(
        config,
        KernelBody([entry = launch->entry, args = std::move(args),
                    is_pointer = std::move(is_pointer)](BlockRange) -> absl::Status {
          absl::InlinedVector<uint64_t, 32> local(args.begin(), args.end());
          for (size_t i = 0; i < local.size(); ++i) {
            if (is_pointer[i]) {
              local[i] = reinterpret_cast<uintptr_t>(DeviceView(reinterpret_cast<const void*>(local[i])));
            }
          }
          if (const char* error = entry(local.data())) return absl::InternalError(error);
          return absl::OkStatus();
        }),
        stream);
  }
  if (!status.ok()) return Fail(absl::StrCat("launching ", launch->name, ": ", status.ToString()));
  return nullptr;
}

}  // namespace

void InitCompilerBindings(pybind11::module_& m) {
  m.def(
      "_compiled_kernel_launcher",
      [] { return reinterpret_cast<uintptr_t>(&XxnpuLaunchCompiledKernel); },
      "Address of the launcher Inductor's generated xxnpu kernels call (C ABI, version 1).");
  m.def(
      "_compiled_kernel_name",
      [](const std::string& name) { return reinterpret_cast<uintptr_t>(InternKernelName(name)); },
      "Interns a compiled kernel's name for the launcher; returns its address.");
}

}  // namespace xxnpu
