#include "profiler/trace_activity.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace xxnpu::profiler {

const TraceActivity::Field* TraceActivity::Find(std::string_view key) const {
  for (const Field& f : fields_) {
    if (f.key_size == key.size() && std::string_view(json_).substr(f.key, f.key_size) == key) return &f;
  }
  return nullptr;
}

bool TraceActivity::AppendKey(std::string_view key) {
  if (Find(key) != nullptr) return false;
  // append, not absl::StrAppend: Debian's abseil has its own string_view type, which
  // AlphaNum does not take a std::string_view as.
  json_.append(json_.empty() ? "\"" : ", \"");
  const size_t key_at = json_.size();
  json_.append(key).append("\": ");
  fields_.push_back({static_cast<uint32_t>(key_at), static_cast<uint32_t>(key.size()),
                     static_cast<uint32_t>(json_.size())});
  return true;
}

std::string_view TraceActivity::ValueText(size_t i) const {
  // A value ends where the next field's `, "` starts, or at the end of the text.
  const size_t end = i + 1 < fields_.size() ? fields_[i + 1].key - 3 : json_.size();
  return std::string_view(json_).substr(fields_[i].value, end - fields_[i].value);
}

void TraceActivity::Add(std::string_view key, int64_t value) {
  if (AppendKey(key)) absl::StrAppend(&json_, value);
}

void TraceActivity::Add(std::string_view key, uint64_t value) {
  if (AppendKey(key)) absl::StrAppend(&json_, value);
}

void TraceActivity::Add(std::string_view key, double value) {
  if (!AppendKey(key)) return;
  if (!std::isfinite(value)) {  // JSON has no inf/nan: a string, as a reader can tell
    absl::StrAppend(&json_, "\"", std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf"), "\"");
    return;
  }
  // Shortest round-trip text, locale-free (absl's %g keeps 6 digits: 123456.789 would
  // read back as 123457).
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  json_.append(buf, ec == std::errc() ? end : buf);
}

void TraceActivity::AddJson(std::string_view key, std::string_view json) {
  if (AppendKey(key)) json_.append(json);
}

void TraceActivity::AddQuoted(std::string_view key, std::string_view value) {
  if (!AppendKey(key)) return;
  json_.push_back('"');
  for (char c : value) {
    if (c == '"' || c == '\\') json_.push_back('\\');
    json_.push_back(c);
  }
  json_.push_back('"');
}

const std::string TraceActivity::getMetadataValue(const std::string& key) const {
  const Field* f = Find(key);
  if (f == nullptr) return "";
  const std::string_view text = ValueText(static_cast<size_t>(f - fields_.data()));
  if (text.size() < 2 || text.front() != '"') return std::string(text);
  std::string out;  // AddQuoted's string: unquoted and unescaped
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == '\\' && i + 2 < text.size()) ++i;
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace xxnpu::profiler
