// The launch of Inductor's generated C++ kernels as xxnpu device kernels (docs/compile.md).
//
// Two kinds of generated code call it, neither linking torch_xxnpu:
// - the Python wrapper's kernel bindings (python/torch_xxnpu/compiler/inductor.py,
//   _LAUNCH_GLUE), which get the launcher's address from torch_xxnpu._C;
// - the C++ wrappers of cpp_wrapper=True and AOTInductor, which get this whole table from
//   the op xxnpu::_compiled_kernel_api through the AOTI shim's aoti_torch_call_dispatcher
//   (the one call both a JIT wrapper and an AOTI model .so can make into a library loaded
//   RTLD_LOCAL, as Python loads _C, or linked into a C++ program).
//
// The structs are an ABI shared with the generated code: a change to either side bumps
// kCompiledLaunchAbi (the glue checks it). Torch-free on purpose: this header is included
// where torch is not.
#ifndef XXNPU_OPS_COMPILED_KERNEL_LAUNCH_H_
#define XXNPU_OPS_COMPILED_KERNEL_LAUNCH_H_

#include <cstdint>

namespace xxnpu {

inline constexpr uint32_t kCompiledLaunchAbi = 4;

// What a generated kernel calls while it runs on the device. Inductor's kernels come in
// phases (a parallel loop, then code combining its per-thread results, then the next
// loop); each parallel loop is a child grid of the kernel (xxnpuKernelParallelFor).
struct CompiledDeviceApi {
  // Runs block(closure, begin, end) over ranges covering [0, blocks) on the compute threads
  // of the device running the kernel, and returns when all are done: nullptr, or the first
  // failing range's message (valid until the calling thread's next failure).
  const char* (*parallel_for)(int64_t blocks, void* closure, const char* (*block)(void* closure, int64_t begin, int64_t end));
};

struct CompiledLaunch {
  uint32_t abi_version;
  uint32_t nargs;
  const char* name;  // interned (InternKernelName): the profiler keeps it
  // The FX nodes the kernel fused ("add, mul, relu"; the trace's "fused nodes"), interned
  // the same way; nullptr when Inductor named none.
  const char* fused_nodes;
  uint64_t bytes;
  // Runs the kernel: nullptr on success, else the kernel's message. `device` is a
  // const CompiledDeviceApi* (declared void here so the generated side need not name it).
  const char* (*entry)(const uint64_t* args, const void* device);
  const uint64_t* args;
  // Per argument: 0 for a scalar, else the size of the element a pointer points to.
  const uint8_t* pointee_size;
};

// An AtenTensorHandle of the AOTI shim, without including it.
using ShimTensor = void*;

// What a C++ wrapper needs from torch_xxnpu. Extern kernels Inductor leaves to ATen are
// here as the AOTI C-shim functions torch does not ship for an out-of-tree device
// (aoti_torch_<device>_mm_out ...): they dispatch to the xxnpu ATen kernels. Returns 0 on
// success (AOTI_TORCH_SUCCESS), 1 on an exception.
struct CompiledKernelApi {
  uint32_t abi_version;  // kCompiledLaunchAbi
  uint32_t size;         // sizeof(CompiledKernelApi): later fields are appended
  const char* (*launch)(const CompiledLaunch* launch);
  const char* (*intern)(const char* name);
  int32_t (*mm_out)(ShimTensor out, ShimTensor self, ShimTensor mat2);
  int32_t (*addmm_out)(ShimTensor out, ShimTensor self, ShimTensor mat1, ShimTensor mat2, double beta,
                       double alpha);
  int32_t (*bmm_out)(ShimTensor out, ShimTensor self, ShimTensor mat2);
  // aoti_torch_<device>_convolution's signature: `bias` may be null or point to null (no
  // bias); the result is a new handle in *ret0.
  int32_t (*convolution)(ShimTensor input, ShimTensor weight, ShimTensor* bias, const int64_t* stride,
                         int64_t stride_len, const int64_t* padding, int64_t padding_len, const int64_t* dilation,
                         int64_t dilation_len, int32_t transposed, const int64_t* output_padding,
                         int64_t output_padding_len, int64_t groups, ShimTensor* ret0);
  int32_t (*baddbmm_out)(ShimTensor out, ShimTensor self, ShimTensor batch1, ShimTensor batch2, double beta,
                         double alpha);
  // aoti_torch_<device>__scaled_dot_product_fused_attention_overrideable's signature (the
  // fused SDPA of ops/attention_ops.cc): `attn_bias` and `scale` may be null (none); the
  // nine results (max_q and max_k as integers) go to ret0..ret8.
  int32_t (*sdpa_overrideable)(ShimTensor query, ShimTensor key, ShimTensor value, ShimTensor* attn_bias,
                               double dropout_p, int32_t is_causal, int32_t return_debug_mask, double* scale,
                               ShimTensor* ret0, ShimTensor* ret1, ShimTensor* ret2, ShimTensor* ret3, int64_t* ret4,
                               int64_t* ret5, ShimTensor* ret6, ShimTensor* ret7, ShimTensor* ret8);
  // Its backward: grad_query, grad_key, grad_value, grad_attn_bias in ret0..ret3.
  int32_t (*sdpa_overrideable_backward)(ShimTensor grad_out, ShimTensor query, ShimTensor key, ShimTensor value,
                                        ShimTensor attn_bias, const int32_t* grad_input_mask,
                                        int64_t grad_input_mask_len, ShimTensor out, ShimTensor logsumexp,
                                        ShimTensor cum_seq_q, ShimTensor cum_seq_k, int64_t max_q, int64_t max_k,
                                        double dropout_p, int32_t is_causal, ShimTensor philox_seed,
                                        ShimTensor philox_offset, double* scale, ShimTensor* ret0, ShimTensor* ret1,
                                        ShimTensor* ret2, ShimTensor* ret3);
  // The int8 and float8 matmuls (torch._int_mm, _weight_int8pack_mm, _scaled_mm), with
  // torch's shim signatures: `bias`, `scale_result` and `out_dtype` may be null (none).
  int32_t (*int_mm_out)(ShimTensor out, ShimTensor self, ShimTensor mat2);
  int32_t (*weight_int8pack_mm)(ShimTensor self, ShimTensor mat2, ShimTensor scales, ShimTensor* ret0);
  int32_t (*scaled_mm_out)(ShimTensor out, ShimTensor self, ShimTensor mat2, ShimTensor scale_a, ShimTensor scale_b,
                           ShimTensor* bias, ShimTensor* scale_result, int32_t* out_dtype, int32_t use_fast_accum);
};

// Enqueues the kernel on the current stream of the device its pointer arguments live on.
// Returns nullptr, or a message (valid until the calling thread's next failure).
const char* LaunchCompiledKernel(const CompiledLaunch* launch);

// Kernel names (and fused-node lists) outlive every launch: the profiler keeps
// LaunchConfig::name and ::fused_nodes, and a wrapper .so may be unloaded before a trace
// is written. Interned once per kernel definition.
const char* InternKernelName(const char* name);

const CompiledKernelApi* GetCompiledKernelApi();

}  // namespace xxnpu

#endif  // XXNPU_OPS_COMPILED_KERNEL_LAUNCH_H_
