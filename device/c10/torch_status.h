// Turns the runtime's absl::Status results into PyTorch errors at the torch boundary, the
// classes torch.cuda raises for the same faults: kResourceExhausted -> c10::OutOfMemoryError
// (torch.OutOfMemoryError), kUnimplemented -> c10::NotImplementedError, anything else ->
// c10::AcceleratorError (torch.AcceleratorError, a RuntimeError; get_error_code() is the
// absl::StatusCode).
#ifndef TORCH_XXNPU_DEVICE_C10_TORCH_STATUS_H_
#define TORCH_XXNPU_DEVICE_C10_TORCH_STATUS_H_

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xxnpu {

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
