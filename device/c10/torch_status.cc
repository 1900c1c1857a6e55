#include "device/c10/torch_status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace xxnpu {

namespace {
constexpr char kIndexErrorPayload[] = "xxnpu/index_error";
}  // namespace

absl::Status IndexOutOfRange(std::string message) {
  absl::Status s = absl::OutOfRangeError(std::move(message));
  s.SetPayload(kIndexErrorPayload, absl::Cord());
  return s;
}

void ThrowStatus(const absl::Status& status, const char* context) {
  const std::string msg =
      context ? absl::StrCat(context, ": ", status.message()) : std::string(status.message());
  if (status.GetPayload(kIndexErrorPayload).has_value()) TORCH_CHECK_INDEX(false, msg);
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case absl::StatusCode::kUnimplemented:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    default:
      // Whatever the driver API refuses or reports (an invalid device index, a bad handle,
      // a kernel fault, a sticky error) is what CUDA reports through C10_CUDA_CHECK:
      // c10::AcceleratorError, torch.AcceleratorError in Python (a RuntimeError), carrying
      // the runtime's error code as CUDA's carries its cudaError_t.
      throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                  static_cast<int32_t>(status.code()), msg);
  }
}

}  // namespace xxnpu
