// The xxnpu device timeline in torch.profiler: a Kineto child profiler for PrivateUse1.
//
// Registered with REGISTER_PRIVATEUSE1_PROFILER (kineto_plugin.cc), so linking this
// library (alwayslink) into torch_xxnpu._C is all it takes: a
// torch.profiler.profile(activities=[CPU, PrivateUse1]) run creates one
// XxnpuActivityProfilerSession per capture.
//
// Session lifecycle (driven by Kineto):
//   configure  -> a session if any device activity type is requested
//   start      -> clears old runtime records, enables the runtime's activity kinds
//   push/pop*CorrelationId -> the runtime's external correlation stacks (per host thread)
//   stop       -> disables the kinds it enabled, collects the records
//   processTrace -> converts them (record_conversion.h), hands every activity to the logger
//   getDeviceInfo / getResourceInfos -> names the device rows ("xxnpu:N") and stream rows
//   getTraceBuffer -> gives Kineto ownership of the activities
// Records the runtime dropped (full per-thread rings) are reported as a warning, in
// errors() and in the trace's metadata ("xxnpu_dropped_records").
#ifndef TORCH_XXNPU_PROFILER_KINETO_PLUGIN_H_
#define TORCH_XXNPU_PROFILER_KINETO_PLUGIN_H_

#include <libkineto.h>
#include <IActivityProfiler.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "device/activity_trace.h"
#include "device/clock.h"
#include "profiler/record_conversion.h"

namespace xxnpu::profiler {

class XxnpuActivityProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  explicit XxnpuActivityProfilerSession(const std::set<libkineto::ActivityType>& types);
  ~XxnpuActivityProfilerSession() override;

  void start() override;
  void stop() override;
  std::vector<std::string> errors() override;

  void processTrace(libkineto::ActivityLogger& logger) override;
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback getLinkedActivity,
                    int64_t startTime, int64_t endTime) override;

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;

  void pushCorrelationId(uint64_t id) override;
  void popCorrelationId() override;
  void pushUserCorrelationId(uint64_t id) override;
  void popUserCorrelationId() override;

  std::string getDeviceProperties() override;
  std::unordered_map<std::string, std::string> getMetadata() override;

  // What the last processTrace produced (tests, diagnostics).
  const ConversionResult& last_conversion() const { return conversion_; }
  // Which conversion the last processTrace put the records' timestamps through
  // (profiler/capture_clock.h): "torch.profiler" or "fitted".
  const std::string& clock_source() const { return clock_source_; }

 private:
  std::vector<ActivityKind> KindsFor() const;

  ConversionOptions options_;
  std::vector<ActivityKind> enabled_by_us_;
  bool started_ = false;
  bool stopped_ = false;
  // Both clocks read at start() and stop(): the capture's window, and the anchors of its
  // records' conversion from the trace clock.
  TraceClockPair start_clock_;
  TraceClockPair stop_clock_;
  std::string clock_source_;
  std::vector<ActivityRecord> records_;
  uint64_t dropped_ = 0;
  std::vector<std::string> errors_;
  ConversionResult conversion_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class XxnpuActivityProfiler : public libkineto::IActivityProfiler {
 public:
  XxnpuActivityProfiler();

  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return available_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override;
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t ts_ms, int64_t duration_ms,
                                                                 const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override;

 private:
  std::string name_ = "xxnpu";
  std::set<libkineto::ActivityType> available_;
};

}  // namespace xxnpu::profiler

#endif  // TORCH_XXNPU_PROFILER_KINETO_PLUGIN_H_
