// The Kineto activity the plugin emits: a GenericTraceActivity whose metadata is kept as
// its JSON text, appended field by field.
//
// Why not GenericTraceActivity's own metadata: it keeps an unordered_map of string pairs
// (a node, a key string and a value string per field: ~9 fields on a kernel) and builds
// metadataJson() with a stringstream and one fmt::format per field on every call. torch
// calls metadataJson() once per child-profiler activity when it stops a capture
// (TransferEvents::lookup looks for its own index key there), and again when it exports
// the trace; with a launch and a kernel per op that was ~40% of torch.profiler's stop on
// xxnpu (perf, 2000-add loop). Here metadataJson() is a copy of one string built once,
// and the fields keep the order they were added in (the trace reads in a stable order).
//
// Kineto and torch read activities through ITraceActivity's virtuals (metadataJson,
// getMetadataValue) and hold them by pointer in the CpuTraceBuffer the plugin hands over,
// so the override is what every reader sees. GenericTraceActivity's addMetadata templates
// are not virtual: they are deleted here so a field cannot land in the base's unused map.
#ifndef TORCH_XXNPU_PROFILER_TRACE_ACTIVITY_H_
#define TORCH_XXNPU_PROFILER_TRACE_ACTIVITY_H_

#include <GenericTraceActivity.h>

#include "absl/container/inlined_vector.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace xxnpu::profiler {

class TraceActivity final : public libkineto::GenericTraceActivity {
 public:
  TraceActivity(const libkineto::TraceSpan& span, libkineto::ActivityType type, const std::string& name)
      : GenericTraceActivity(span, type, name) {
    json_.reserve(kTypicalJsonBytes);
  }

  // Each adds `"key": value` unless the key is already present (the first value wins, as
  // with GenericTraceActivity's map). Keys are plain ASCII without quotes.
  void Add(std::string_view key, int64_t value);
  void Add(std::string_view key, int32_t value) { Add(key, static_cast<int64_t>(value)); }
  void Add(std::string_view key, uint64_t value);
  void Add(std::string_view key, double value);  // shortest text that reads back exactly
  void AddJson(std::string_view key, std::string_view json);  // a JSON value, verbatim
  void AddQuoted(std::string_view key, std::string_view value);  // a string, escaped

  const std::string metadataJson() const override { return json_; }
  // The value's text as GenericTraceActivity gives it: unquoted and unescaped for a
  // string, verbatim otherwise; "" when absent.
  const std::string getMetadataValue(const std::string& key) const override;

  template <typename ValType>
  void addMetadata(const std::string&, const ValType&) = delete;
  void addMetadataQuoted(const std::string&, const std::string&) = delete;

 private:
  // Where each field's key and value start in json_: lookups compare keys, never search
  // the text (a value could contain key-like text), and a duplicate check is a few length
  // compares instead of a find over the string for every field added.
  struct Field {
    uint32_t key;
    uint32_t key_size;
    uint32_t value;
  };
  // The field named `key`, or nullptr.
  const Field* Find(std::string_view key) const;
  // Appends `"key": ` (after a separator); false if the key is already present.
  bool AppendKey(std::string_view key);
  // The text of field i's value.
  std::string_view ValueText(size_t i) const;

  // A kernel's ~9 fields take ~150 bytes: one allocation instead of a string growing in
  // steps (most activities have fewer fields).
  static constexpr size_t kTypicalJsonBytes = 160;
  std::string json_;
  absl::InlinedVector<Field, 10> fields_;  // a kernel has 9
};

}  // namespace xxnpu::profiler

#endif  // TORCH_XXNPU_PROFILER_TRACE_ACTIVITY_H_
