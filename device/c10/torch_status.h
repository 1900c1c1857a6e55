// Turns the runtime's absl::Status results into PyTorch errors at the torch boundary, the
// classes torch.cuda raises for the same faults: kResourceExhausted -> c10::OutOfMemoryError
// (torch.OutOfMemoryError), IndexOutOfRange (below) -> c10::IndexError, kUnimplemented ->
// c10::NotImplementedError, anything else -> c10::AcceleratorError (torch.AcceleratorError,
// a RuntimeError; get_error_code() is the absl::StatusCode).
#ifndef TORCH_XXNPU_DEVICE_C10_TORCH_STATUS_H_
#define TORCH_XXNPU_DEVICE_C10_TORCH_STATUS_H_

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xxnpu {

// A kernel's out-of-range index, as a status a kernel body returns: kOutOfRange with a
// payload that makes ThrowStatus raise c10::IndexError (Python IndexError, what the CPU
// raises for the same index), not AcceleratorError. The payload survives the stream's
// sticky error, so the IndexError comes from the next synchronizing call.
absl::Status IndexOutOfRange(std::string message);

// Throws the c10 error matching `status` (prefixed with `context` when given).
[[noreturn]] void ThrowStatus(const absl::Status& status, const char* context = nullptr);

inline void CheckOk(const absl::Status& status, const char* context = nullptr) {
  if (!status.ok()) ThrowStatus(status, context);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> result, const char* context = nullptr) {
  if (!result.ok()) ThrowStatus(result.status(), context);
  return std::move(result).value();
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_C10_TORCH_STATUS_H_
