#include "device/env_flag.h"

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace xxnpu {

absl::StatusOr<bool> ParseEnvFlag(const char* name, const char* value, bool fallback) {
  if (value == nullptr) return fallback;
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  // An exported but empty variable (FOO= cmd) is how shells unset it for one command.
  if (v.empty()) return fallback;
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(name, "=\"", value, "\": expected 1/true/yes/on or 0/false/no/off (any case)"));
}

absl::StatusOr<bool> ReadEnvFlag(const char* name, bool fallback) {
  return ParseEnvFlag(name, std::getenv(name), fallback);
}

}  // namespace xxnpu
