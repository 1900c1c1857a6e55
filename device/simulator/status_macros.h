// Early-return helpers for absl::Status / absl::StatusOr (abseil does not export its own).
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_STATUS_MACROS_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define XXNPU_STATUS_CONCAT_INNER(a, b) a##b
#define XXNPU_STATUS_CONCAT(a, b) XXNPU_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define XXNPU_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::absl::Status xxnpu_status_ = (expr);           \
    if (!xxnpu_status_.ok()) return xxnpu_status_;   \
  } while (0)

// `lhs = value of expr`, or returns its error status from the enclosing function.
#define XXNPU_ASSIGN_OR_RETURN(lhs, expr) \
  XXNPU_ASSIGN_OR_RETURN_IMPL(XXNPU_STATUS_CONCAT(xxnpu_statusor_, __LINE__), lhs, expr)
#define XXNPU_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_STATUS_MACROS_H_
