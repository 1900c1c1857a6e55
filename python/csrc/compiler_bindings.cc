// torch_xxnpu._C bindings of the compile path: the launcher through which Inductor's
// generated C++ kernels run as xxnpu device kernels (python/torch_xxnpu/compiler/inductor.py).
//
// A generated kernel's Python binding packs its arguments (data pointers, sizes, scalars)
// as 64-bit words and calls XxnpuLaunchCompiledKernel through its address (no link-time
// dependency: the generated .so links neither torch nor this module). The launcher enqueues
// one kernel on the current stream of the tensors' device, named after the Inductor kernel;
// on the device thread the pointer words go through DeviceView and the generated code runs.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
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
constexpr uint32_t kCompiledLaunchAbi = 3;

struct CompiledLaunch {
  uint32_t abi_version;
  uint32_t nargs;
  const char* name;  // interned by _compiled_kernel_name: lives as long as the process
  // The FX nodes the kernel fused ("add, mul, relu"; the trace's "fused nodes"), interned
  // the same way; nullptr when Inductor named none.
  const char* fused_nodes;
  uint64_t bytes;
  const char* (*entry)(const uint64_t* args);  // nullptr on success, else the kernel's message
  const uint64_t* args;
  // Per argument: 0 for a scalar, else the size of the element a pointer points to.
  const uint8_t* pointee_size;
};

// How the device sees an argument word: as is (a scalar), through DeviceView (device
// memory), or as the address of the word itself (a host scalar captured at launch).
enum ArgKind : uint8_t { kScalar = 0, kDevicePointer = 1, kHostValue = 2 };

inline uint64_t DeviceWord(uint64_t word, uint8_t kind, const uint64_t* self) {
  switch (kind) {
    case kDevicePointer:
      return reinterpret_cast<uintptr_t>(DeviceView(reinterpret_cast<const void*>(word)));
    case kHostValue:
      return reinterpret_cast<uintptr_t>(self);
    default:
      return word;
  }
}

// Kernel names (and fused-node lists) outlive every launch: the profiler keeps
// LaunchConfig::name and ::fused_nodes. Interned once per kernel definition, so a launch
// allocates nothing for them.
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
  uint8_t kinds[kInlineArgs];
  uint64_t args[kInlineArgs];

  absl::Status operator()(BlockRange) const {
    uint64_t local[kInlineArgs];
    for (uint32_t i = 0; i < nargs; ++i) local[i] = DeviceWord(args[i], kinds[i], &args[i]);
    if (const char* error = entry(local)) return absl::InternalError(error);
    return absl::OkStatus();
  }
};
static_assert(kFitsInlineKernel<InlineKernel>);

// Classifies the arguments and turns host scalars into values. Inductor passes a host
// pointer into a device kernel for one thing only: a 0-dim CPU tensor (a Python number
// Dynamo lifted, a CPU scalar tensor mixed with xxnpu ones, as eager allows). Its value is
// read now, at launch, as CUDA reads a CPU scalar into the kernel's parameters; the kernel
// reads it from the launch's own copy, which lives as long as the kernel runs.
const char* Classify(const CompiledLaunch* launch, uint64_t* words, uint8_t* kinds, int* device) {
  *device = -1;
  for (uint32_t i = 0; i < launch->nargs; ++i) {
    words[i] = launch->args[i];
    const uint8_t size = launch->pointee_size[i];
    if (size == 0 || words[i] == 0) {
      kinds[i] = kScalar;
      continue;
    }
    const void* ptr = reinterpret_cast<const void*>(words[i]);
    const int d = DeviceOfPointer(ptr);
    if (d < 0) {
      if (size > sizeof(uint64_t)) {
        return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, ": argument ", i,
                                 " is host memory with ", size, "-byte elements; expected xxnpu tensors"));
      }
      words[i] = 0;
      std::memcpy(&words[i], ptr, size);
      kinds[i] = kHostValue;
      continue;
    }
    if (*device >= 0 && d != *device) {
      return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, ": arguments on xxnpu:", *device,
                               " and xxnpu:", d, "; expected all tensors on one device"));
    }
    *device = d;
    kinds[i] = kDevicePointer;
  }
  if (*device < 0) return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, " got no xxnpu tensor"));
  return nullptr;
}

const char* XxnpuLaunchCompiledKernel(const CompiledLaunch* launch) {
  if (launch->abi_version != kCompiledLaunchAbi) {
    return Fail(absl::StrCat("compiled xxnpu kernel ", launch->name, " was built for launch ABI ",
                             launch->abi_version, ", but torch_xxnpu expects ", kCompiledLaunchAbi,
                             ": clear Inductor's cache (TORCHINDUCTOR_CACHE_DIR) and recompile"));
  }
  absl::InlinedVector<uint64_t, kInlineArgs> words(launch->nargs);
  absl::InlinedVector<uint8_t, kInlineArgs> kinds(launch->nargs);
  int device = -1;
  if (const char* error = Classify(launch, words.data(), kinds.data(), &device)) return error;

  LaunchConfig config;
  config.name = launch->name;
  config.bytes = launch->bytes;
  config.fused_nodes = launch->fused_nodes;
  // One block: the generated loops are single-threaded (inductor.py says why).
  config.grid = Dim3{1, 1, 1};
  const xxnpuStream_t stream = CurrentXxnpuStreamHandle(static_cast<c10::DeviceIndex>(device));
  absl::Status status;
  if (launch->nargs <= kInlineArgs) {
    InlineKernel kernel{launch->entry, launch->nargs, {}, {}};
    std::copy(words.begin(), words.end(), kernel.args);
    std::copy(kinds.begin(), kinds.end(), kernel.kinds);
    status = xxnpuLaunchKernel(config, kernel, stream);
  } else {
    status = xxnpuLaunchKernel(
        config,
        KernelBody([entry = launch->entry, words = std::move(words),
                    kinds = std::move(kinds)](BlockRange) -> absl::Status {
          absl::InlinedVector<uint64_t, kInlineArgs> local(words.size());
          for (size_t i = 0; i < local.size(); ++i) local[i] = DeviceWord(words[i], kinds[i], &words[i]);
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
      "Address of the launcher Inductor's generated xxnpu kernels call (launch ABI version 3).");
  m.def(
      "_compiled_kernel_name",
      [](const std::string& name) { return reinterpret_cast<uintptr_t>(InternKernelName(name)); },
      "Interns a compiled kernel's name (or its fused-node list) for the launcher; returns its address.");
}

}  // namespace xxnpu
