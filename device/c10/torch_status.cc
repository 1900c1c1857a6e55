#include "device/c10/torch_status.h"

#include "absl/strings/str_cat.h"

namespace xxnpu {

void ThrowStatus(const absl::Status& status, const char* context) {
  const std::string msg =
      context ? absl::StrCat(context, ": ", status.message()) : std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      TORCH_CHECK_VALUE(false, msg);
    case absl::StatusCode::kUnimplemented:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    default:
      // Kernel failures, destroyed handles, data loss...: RuntimeError, as CUDA's are.
      TORCH_CHECK(false, msg);
  }
}

}  // namespace xxnpu
