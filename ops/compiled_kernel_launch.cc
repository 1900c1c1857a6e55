// The launcher of Inductor's generated xxnpu kernels, and the API table the C++ wrappers
// (cpp_wrapper=True, AOTInductor) reach it through. See compiled_kernel_launch.h.
#include "ops/compiled_kernel_launch.h"

#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_blas.h"

namespace xxnpu {
namespace {

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

// Host-side failures (before anything is queued) go back as a message the caller raises.
const char* Fail(std::string message) {
  thread_local std::string error;
  error = std::move(message);
  return error.c_str();
}

// A generated kernel's parallel loop, as a child grid of the kernel running it.
const char* ParallelFor(int64_t blocks, void* closure, const char* (*block)(void*, int64_t, int64_t)) {
  const absl::Status st = xxnpuKernelParallelFor(blocks, [&](BlockRange r) -> absl::Status {
    const SingleThreadedBlas one_thread;  // see RunEntry
    // The message is copied here, on the thread that produced it.
    if (const char* error = block(closure, r.begin, r.end)) return absl::InternalError(error);
    return absl::OkStatus();
  });
  return st.ok() ? nullptr : Fail(std::string(st.message()));
}

constexpr CompiledDeviceApi kDeviceApi{&ParallelFor};

// Runs a generated kernel's entry on the device thread. MKL stays single-threaded there (and
// in ParallelFor's blocks): Inductor's C++ templates call the host BLAS (the flex-attention
// template's bfloat16 brgemm is MKL's cblas_gemm_bf16bf16f32 without AMX), and MKL would
// otherwise start an OpenMP team on cores the device does not own (cpu_blas.h).
absl::Status RunEntry(const char* (*entry)(const uint64_t*, const void*), const uint64_t* args) {
  const SingleThreadedBlas one_thread;
  if (const char* error = entry(args, &kDeviceApi)) return absl::InternalError(error);
  return absl::OkStatus();
}

// Most kernels have a handful of arguments: up to this many, the arguments travel inside
// the launch (no allocation); more take the heap-captured form.
constexpr size_t kInlineArgs = 20;

struct InlineKernel {
  const char* (*entry)(const uint64_t*, const void*);
  uint32_t nargs;
  uint8_t kinds[kInlineArgs];
  uint64_t args[kInlineArgs];

  absl::Status operator()(BlockRange) const {
    uint64_t local[kInlineArgs];
    for (uint32_t i = 0; i < nargs; ++i) local[i] = DeviceWord(args[i], kinds[i], &args[i]);
    return RunEntry(entry, local);
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

// The C-shim form of the extern kernels: the xxnpu ATen kernels through the dispatcher
// (torch's own aoti_torch_cpu_* call the CPU kernels directly, at::cpu::mm_out, which would
// read device memory on the host).
at::Tensor& T(ShimTensor handle) {
  return *torch::aot_inductor::tensor_handle_to_tensor_pointer(static_cast<AtenTensorHandle>(handle));
}

// A tensor argument passed as a pointer to a handle: null, or pointing to null, is none.
std::optional<at::Tensor> OptionalTensor(ShimTensor* handle) {
  if (handle == nullptr || *handle == nullptr) return std::nullopt;
  return T(*handle);
}

int32_t MmOut(ShimTensor out, ShimTensor self, ShimTensor mat2) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::mm_out(T(out), T(self), T(mat2)); });
}

int32_t AddmmOut(ShimTensor out, ShimTensor self, ShimTensor mat1, ShimTensor mat2, double beta, double alpha) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::addmm_out(T(out), T(self), T(mat1), T(mat2), beta, alpha); });
}

int32_t BmmOut(ShimTensor out, ShimTensor self, ShimTensor mat2) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::bmm_out(T(out), T(self), T(mat2)); });
}

int32_t Convolution(ShimTensor input, ShimTensor weight, ShimTensor* bias, const int64_t* stride, int64_t stride_len,
                    const int64_t* padding, int64_t padding_len, const int64_t* dilation, int64_t dilation_len,
                    int32_t transposed, const int64_t* output_padding, int64_t output_padding_len, int64_t groups,
                    ShimTensor* ret0) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    at::Tensor out = at::convolution(T(input), T(weight), OptionalTensor(bias), at::IntArrayRef(stride, stride_len),
                                     at::IntArrayRef(padding, padding_len), at::IntArrayRef(dilation, dilation_len),
                                     transposed != 0, at::IntArrayRef(output_padding, output_padding_len), groups);
    *ret0 = torch::aot_inductor::new_tensor_handle(std::move(out));
  });
}

int32_t BaddbmmOut(ShimTensor out, ShimTensor self, ShimTensor batch1, ShimTensor batch2, double beta,
                   double alpha) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE(
      { at::baddbmm_out(T(out), T(self), T(batch1), T(batch2), beta, alpha); });
}

// Stores a result as torch's generated shims do: into *ret as a new handle (an undefined
// tensor, the philox state say, stays undefined), or nowhere when the wrapper passed no
// place for it (nullptr: a result the graph does not use).
void SetResult(ShimTensor* ret, at::Tensor t) {
  if (ret != nullptr) *ret = torch::aot_inductor::new_tensor_handle(std::move(t));
}
void SetResult(int64_t* ret, const c10::SymInt& v) {
  if (ret != nullptr) *ret = v.guard_int(__FILE__, __LINE__);
}

// A tensor argument that may come as a null handle (undefined).
at::Tensor TensorOrUndefined(ShimTensor handle) { return handle != nullptr ? T(handle) : at::Tensor(); }

int32_t SdpaOverrideable(ShimTensor query, ShimTensor key, ShimTensor value, ShimTensor* attn_bias, double dropout_p,
                         int32_t is_causal, int32_t return_debug_mask, double* scale, ShimTensor* ret0,
                         ShimTensor* ret1, ShimTensor* ret2, ShimTensor* ret3, int64_t* ret4, int64_t* ret5,
                         ShimTensor* ret6, ShimTensor* ret7, ShimTensor* ret8) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    auto [out, lse, cum_q, cum_k, max_q, max_k, seed, offset, mask] = at::_scaled_dot_product_fused_attention_overrideable(
        T(query), T(key), T(value), OptionalTensor(attn_bias), dropout_p, is_causal != 0, return_debug_mask != 0,
        scale != nullptr ? std::optional<double>(*scale) : std::nullopt);
    SetResult(ret0, std::move(out));
    SetResult(ret1, std::move(lse));
    SetResult(ret2, std::move(cum_q));
    SetResult(ret3, std::move(cum_k));
    SetResult(ret4, max_q);
    SetResult(ret5, max_k);
    SetResult(ret6, std::move(seed));
    SetResult(ret7, std::move(offset));
    SetResult(ret8, std::move(mask));
  });
}

int32_t SdpaOverrideableBackward(ShimTensor grad_out, ShimTensor query, ShimTensor key, ShimTensor value,
                                 ShimTensor attn_bias, const int32_t* grad_input_mask, int64_t grad_input_mask_len,
                                 ShimTensor out, ShimTensor logsumexp, ShimTensor cum_seq_q, ShimTensor cum_seq_k,
                                 int64_t max_q, int64_t max_k, double dropout_p, int32_t is_causal,
                                 ShimTensor philox_seed, ShimTensor philox_offset, double* scale, ShimTensor* ret0,
                                 ShimTensor* ret1, ShimTensor* ret2, ShimTensor* ret3) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    TORCH_CHECK(grad_input_mask_len == 4, "aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable_backward: "
                "expected a grad_input_mask of 4 entries, got ", grad_input_mask_len);
    const std::array<bool, 4> mask{grad_input_mask[0] != 0, grad_input_mask[1] != 0, grad_input_mask[2] != 0,
                                   grad_input_mask[3] != 0};
    auto [dq, dk, dv, dbias] = at::_scaled_dot_product_fused_attention_overrideable_backward(
        T(grad_out), T(query), T(key), T(value), TensorOrUndefined(attn_bias), mask, T(out), T(logsumexp),
        TensorOrUndefined(cum_seq_q), TensorOrUndefined(cum_seq_k), max_q, max_k, dropout_p, is_causal != 0,
        TensorOrUndefined(philox_seed), TensorOrUndefined(philox_offset),
        scale != nullptr ? std::optional<double>(*scale) : std::nullopt);
    SetResult(ret0, std::move(dq));
    SetResult(ret1, std::move(dk));
    SetResult(ret2, std::move(dv));
    SetResult(ret3, std::move(dbias));
  });
}

int32_t IntMmOut(ShimTensor out, ShimTensor self, ShimTensor mat2) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::_int_mm_out(T(out), T(self), T(mat2)); });
}

int32_t WeightInt8packMm(ShimTensor self, ShimTensor mat2, ShimTensor scales, ShimTensor* ret0) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ SetResult(ret0, at::_weight_int8pack_mm(T(self), T(mat2), T(scales))); });
}

int32_t ScaledMmOut(ShimTensor out, ShimTensor self, ShimTensor mat2, ShimTensor scale_a, ShimTensor scale_b,
                    ShimTensor* bias, ShimTensor* scale_result, int32_t* out_dtype, int32_t use_fast_accum) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    std::optional<at::ScalarType> dtype;
    if (out_dtype != nullptr) dtype = static_cast<at::ScalarType>(*out_dtype);
    at::_scaled_mm_out(T(out), T(self), T(mat2), T(scale_a), T(scale_b), OptionalTensor(bias),
                       OptionalTensor(scale_result), dtype, use_fast_accum != 0);
  });
}

constexpr CompiledKernelApi kApi{
    kCompiledLaunchAbi, sizeof(CompiledKernelApi), &LaunchCompiledKernel, &InternKernelName, &MmOut, &AddmmOut,
    &BmmOut, &Convolution, &BaddbmmOut, &SdpaOverrideable, &SdpaOverrideableBackward, &IntMmOut,
    &WeightInt8packMm, &ScaledMmOut,
};

// An integer-returning op is what aoti_torch_call_dispatcher can hand back to generated C++
// without either side linking the other.
int64_t CompiledKernelApiAddress() { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(&kApi)); }

}  // namespace

const char* InternKernelName(const char* name) {
  static std::mutex mu;
  static auto* names = new absl::node_hash_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return names->insert(name).first->c_str();
}

const CompiledKernelApi* GetCompiledKernelApi() { return &kApi; }

const char* LaunchCompiledKernel(const CompiledLaunch* launch) {
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
  // One block: the kernel's own code runs on the device thread, and each of its parallel
  // loops is a child grid over the compute threads (ParallelFor; compiler/inductor.py).
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
          return RunEntry(entry, local.data());
        }),
        stream);
  }
  if (!status.ok()) return Fail(absl::StrCat("launching ", launch->name, ": ", status.ToString()));
  return nullptr;
}

}  // namespace xxnpu

TORCH_LIBRARY_FRAGMENT(xxnpu, m) {
  // Address of xxnpu::CompiledKernelApi (ops/compiled_kernel_launch.h), for generated C++.
  m.def("_compiled_kernel_api() -> int", &xxnpu::CompiledKernelApiAddress);
}
