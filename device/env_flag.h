// One parser for boolean environment variables (XXCCL_STAGING, XXNPU_STRICT_FALLBACK,
// XXNPU_LAUNCH_BLOCKING, ...), so that "false" means false everywhere. Torch-free and
// small on purpose: only the files that read a flag include it.
#ifndef TORCH_XXNPU_DEVICE_ENV_FLAG_H_
#define TORCH_XXNPU_DEVICE_ENV_FLAG_H_

#include "absl/status/statusor.h"

namespace xxnpu {

// `value` of the variable `name` -> true for 1/true/yes/on, false for 0/false/no/off (any
// case, surrounding blanks ignored). An empty value means unset: `fallback`. Anything else
// is an InvalidArgument error naming the variable, the value and the accepted values.
absl::StatusOr<bool> ParseEnvFlag(const char* name, const char* value, bool fallback);

// ParseEnvFlag of std::getenv(name); unset gives `fallback`.
absl::StatusOr<bool> ReadEnvFlag(const char* name, bool fallback);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_ENV_FLAG_H_
