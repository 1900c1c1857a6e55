#include "ops/cpu_vml.h"

#include <algorithm>
#include <climits>

#include "ops/cpu_blas.h"

// mkl_vml_functions.h's declarations (MKL_INT is int in torch's LP64 build, the mode a
// 64-bit word). Weak: a process whose torch links another BLAS has none of them.
extern "C" {
#define XXNPU_VML(name) void name(int n, const float* a, float* r, long long mode) __attribute__((weak));
XXNPU_VML(vmsExp)
XXNPU_VML(vmsLn)
XXNPU_VML(vmsLog2)
XXNPU_VML(vmsLog10)
XXNPU_VML(vmsSqrt)
XXNPU_VML(vmsTanh)
XXNPU_VML(vmsErf)
XXNPU_VML(vmsErfc)
XXNPU_VML(vmsSin)
XXNPU_VML(vmsCos)
XXNPU_VML(vmsTan)
XXNPU_VML(vmsAsin)
XXNPU_VML(vmsAcos)
XXNPU_VML(vmsAtan)
#undef XXNPU_VML
}

namespace xxnpu {
namespace {

// mkl_vml_defines.h: VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE, torch's mode.
constexpr long long kVmlHa = 0x2, kVmlFtzDazOff = 0x140000, kVmlErrmodeIgnore = 0x100;
constexpr long long kMode = kVmlHa | kVmlFtzDazOff | kVmlErrmodeIgnore;

using VmlFn = void (*)(int, const float*, float*, long long);

// The ops torch's CPU backend runs through VML for float32 (the IMPLEMENT_VML_MKL list of
// ATen/cpu/vml.h that VecUnaryOp has).
VmlFn VmlFor(VecUnaryOp op) {
  switch (op) {
    case VecUnaryOp::kExp: return vmsExp;
    case VecUnaryOp::kLog: return vmsLn;
    case VecUnaryOp::kLog2: return vmsLog2;
    case VecUnaryOp::kLog10: return vmsLog10;
    case VecUnaryOp::kSqrt: return vmsSqrt;
    case VecUnaryOp::kTanh: return vmsTanh;
    case VecUnaryOp::kErf: return vmsErf;
    case VecUnaryOp::kErfc: return vmsErfc;
    case VecUnaryOp::kSin: return vmsSin;
    case VecUnaryOp::kCos: return vmsCos;
    case VecUnaryOp::kTan: return vmsTan;
    case VecUnaryOp::kAsin: return vmsAsin;
    case VecUnaryOp::kAcos: return vmsAcos;
    case VecUnaryOp::kAtan: return vmsAtan;
    default: return nullptr;
  }
}

// MKL sets up each VML function on its first call, and a first call racing another
// thread's first call of the same function sometimes ran at ~1e-4 relative error instead of
// ~1e-7: a device kernel's first cos on a compute thread while the host computed the same
// cos on the CPU did, in 4 of 20 fresh processes (so did torch's own tanh, its OpenMP
// worker against its main thread, with no xxnpu at all). One call of each function while
// the library loads, on the importing thread before any device thread runs a kernel, and
// none of 40 processes did.
const bool kVmlSetUp = [] {
  const float in[16] = {};
  float out[16];
  for (VecUnaryOp op : {VecUnaryOp::kExp, VecUnaryOp::kLog, VecUnaryOp::kLog2, VecUnaryOp::kLog10, VecUnaryOp::kSqrt,
                        VecUnaryOp::kTanh, VecUnaryOp::kErf, VecUnaryOp::kErfc, VecUnaryOp::kSin, VecUnaryOp::kCos,
                        VecUnaryOp::kTan, VecUnaryOp::kAsin, VecUnaryOp::kAcos, VecUnaryOp::kAtan}) {
    if (const VmlFn fn = VmlFor(op)) fn(16, in, out, kMode);
  }
  return true;
}();

}  // namespace

bool VmlUnaryFloat(VecUnaryOp op, float* out, const float* in, int64_t n) {
  const VmlFn fn = VmlFor(op);
  if (fn == nullptr) return false;
  // Left to itself VML may start an OpenMP team on the cores the other compute threads
  // are using (cpu_blas.h).
  const SingleThreadedBlas single_threaded;
  for (int64_t i = 0; i < n; i += INT_MAX) {
    const int64_t c = std::min<int64_t>(INT_MAX, n - i);
    fn(static_cast<int>(c), in + i, out + i, kMode);
  }
  return true;
}

}  // namespace xxnpu
