#include "profiler/kineto_plugin.h"

#include <GenericTraceActivity.h>
#include <ThreadUtil.h>
#include <TraceSpan.h>
#include <output_base.h>
#include <c10/util/Exception.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "device/clock.h"
#include "device/runtime.h"
#include "profiler/capture_clock.h"
#include "profiler/markers.h"

namespace xxnpu::profiler {
namespace {

using libkineto::ActivityType;

bool Has(const std::set<ActivityType>& types, ActivityType t) { return types.count(t) != 0; }

bool WantsDeviceWork(const std::set<ActivityType>& types) {
  return Has(types, ActivityType::CONCURRENT_KERNEL) || Has(types, ActivityType::GPU_MEMCPY) ||
         Has(types, ActivityType::GPU_MEMSET);
}

std::string DeviceLabel(int32_t device) {
  auto props = xxnpuGetDeviceProperties(device);
  return props.ok() ? props->name : std::string("xxnpu");
}

}  // namespace

// ------------------------------------------------------------------------------ session

XxnpuActivityProfilerSession::XxnpuActivityProfilerSession(const std::set<ActivityType>& types) {
  options_.kernels = Has(types, ActivityType::CONCURRENT_KERNEL);
  options_.memcpy = Has(types, ActivityType::GPU_MEMCPY);
  options_.memset = Has(types, ActivityType::GPU_MEMSET);
  options_.runtime = Has(types, ActivityType::PRIVATEUSE1_RUNTIME) || Has(types, ActivityType::PRIVATEUSE1_DRIVER);
  options_.user_annotations = Has(types, ActivityType::GPU_USER_ANNOTATION);
  options_.markers = true;
  options_.host_pid = libkineto::processId();
}

XxnpuActivityProfilerSession::~XxnpuActivityProfilerSession() {
  // A session torn down while recording must not leave the runtime tracing.
  if (started_ && !stopped_) {
    for (ActivityKind kind : enabled_by_us_) ActivityDisable(kind);
  }
}

std::vector<ActivityKind> XxnpuActivityProfilerSession::KindsFor() const {
  std::vector<ActivityKind> kinds;
  if (options_.kernels) kinds.push_back(ActivityKind::kKernel);
  if (options_.memcpy) kinds.push_back(ActivityKind::kMemcpy);
  if (options_.memset) kinds.push_back(ActivityKind::kMemset);
  if (options_.runtime) {
    kinds.push_back(ActivityKind::kRuntime);
    kinds.push_back(ActivityKind::kSynchronization);
    kinds.push_back(ActivityKind::kMemory);
  }
  if (options_.markers) kinds.push_back(ActivityKind::kMarker);
  return kinds;
}

void XxnpuActivityProfilerSession::start() {
  if (started_) return;
  // Records from before this capture (an earlier session, warmup steps) are not ours.
  ActivityClear();
  // Earlier captures' records were converted: their marker names can go.
  MarkerNewCapture();
  enabled_by_us_.clear();
  for (ActivityKind kind : KindsFor()) {
    if (ActivityEnabled(kind)) continue;  // someone else's: leave it on at stop
    ActivityEnable(kind);
    enabled_by_us_.push_back(kind);
  }
  start_clock_ = MeasureTraceClockPair();
  started_ = true;
  status_ = libkineto::TraceStatus::RECORDING;
}

void XxnpuActivityProfilerSession::stop() {
  if (!started_ || stopped_) return;
  for (ActivityKind kind : enabled_by_us_) ActivityDisable(kind);
  stop_clock_ = MeasureTraceClockPair();
  stopped_ = true;
  records_.clear();
  // As stamped: converted in processTrace, once torch has built its own converter.
  ActivityCollectTraceClock(&records_);
  dropped_ = ActivityTakeDroppedCount();
  status_ = libkineto::TraceStatus::PROCESSING;
  if (dropped_ > 0) {
    std::string msg = "xxnpu profiler: the device runtime dropped " + std::to_string(dropped_) +
                      " activity records (a per-thread trace ring was full); the xxnpu timeline and "
                      "device times are incomplete. Profile fewer steps per capture.";
    errors_.push_back(msg);
    status_ = libkineto::TraceStatus::WARNING;
    TORCH_WARN(msg);
  }
}

std::vector<std::string> XxnpuActivityProfilerSession::errors() { return errors_; }

void XxnpuActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(logger, nullptr, 0, 0);
}

void XxnpuActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger,
                                                libkineto::getLinkedActivityCallback getLinkedActivity,
                                                int64_t startTime, int64_t endTime) {
  if (!stopped_) stop();
  // Onto the trace's clock: torch's own conversion when it is there (capture_clock.h).
  CaptureClock clock = ChooseCaptureClock(start_clock_, stop_clock_);
  ActivityConvertTimes(records_.data(), records_.data() + records_.size(), clock.to_unix_ns);
  clock_source_ = clock.source;
  SetLastCaptureClock(std::move(clock));

  ConversionOptions options = options_;
  options.window_start_ns = startTime > 0 ? startTime : start_clock_.unix_ns;
  options.window_end_ns = endTime > 0 ? endTime : stop_clock_.unix_ns;

  buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  buffer_->span = libkineto::TraceSpan(options.window_start_ns, options.window_end_ns, "xxnpu");
  buffer_->span.iteration = 0;
  conversion_ = ConvertRecords(records_, options, getLinkedActivity, buffer_.get());
  buffer_->gpuOpCount = static_cast<int>(conversion_.activities);
  records_.clear();
  records_.shrink_to_fit();

  for (const auto& activity : buffer_->activities) logger.handleActivity(*activity);

  // getDeviceInfo() names one device row; name the others here.
  if (conversion_.devices.size() > 1) {
    for (auto it = std::next(conversion_.devices.begin()); it != conversion_.devices.end(); ++it) {
      logger.handleDeviceInfo({.id = *it,
                               .sortIndex = libkineto::kExceedMaxPid + *it,
                               .name = "xxnpu:" + std::to_string(*it),
                               .label = DeviceLabel(*it)},
                              options.window_start_ns);
    }
  }
  status_ = errors_.empty() ? libkineto::TraceStatus::READY : libkineto::TraceStatus::WARNING;
}

std::unique_ptr<libkineto::DeviceInfo> XxnpuActivityProfilerSession::getDeviceInfo() {
  if (conversion_.devices.empty()) return nullptr;
  const int32_t device = *conversion_.devices.begin();
  return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{.id = device,
                                                                       .sortIndex = libkineto::kExceedMaxPid + device,
                                                                       .name = "xxnpu:" + std::to_string(device),
                                                                       .label = DeviceLabel(device)});
}

std::vector<libkineto::ResourceInfo> XxnpuActivityProfilerSession::getResourceInfos() {
  std::vector<libkineto::ResourceInfo> infos;
  infos.reserve(conversion_.streams.size());
  for (const auto& [device, stream] : conversion_.streams) {
    infos.push_back(libkineto::ResourceInfo{
        .id = stream, .sortIndex = stream, .deviceId = device, .name = "stream " + std::to_string(stream)});
  }
  return infos;
}

std::unique_ptr<libkineto::CpuTraceBuffer> XxnpuActivityProfilerSession::getTraceBuffer() {
  if (buffer_ != nullptr && buffer_->activities.empty()) buffer_.reset();
  return std::move(buffer_);
}

void XxnpuActivityProfilerSession::pushCorrelationId(uint64_t id) {
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, id);
}
void XxnpuActivityProfilerSession::popCorrelationId() {
  ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault);
}
void XxnpuActivityProfilerSession::pushUserCorrelationId(uint64_t id) {
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kUser, id);
}
void XxnpuActivityProfilerSession::popUserCorrelationId() {
  ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser);
}

std::string XxnpuActivityProfilerSession::getDeviceProperties() {
  // Called before processTrace: the devices are those of the collected records.
  std::set<int32_t> devices;
  for (const ActivityRecord& r : records_) {
    if (r.device >= 0 && r.kind != ActivityKind::kRuntime && r.kind != ActivityKind::kMemory) devices.insert(r.device);
  }
  std::string json;
  for (int32_t device : devices) {
    auto props = xxnpuGetDeviceProperties(device);
    if (!props.ok()) continue;
    if (!json.empty()) json += ",";
    json += "{\"id\": " + std::to_string(device) + ", \"name\": \"" + props->name +
            "\", \"totalGlobalMem\": " + std::to_string(props->total_memory) +
            ", \"computeUnits\": " + std::to_string(props->compute_units) +
            ", \"maxThreadsPerBlock\": " + std::to_string(props->max_threads_per_block) + "}";
  }
  return json;
}

std::unordered_map<std::string, std::string> XxnpuActivityProfilerSession::getMetadata() {
  // Values are raw JSON.
  return {{"xxnpu_dropped_records", std::to_string(dropped_)}};
}

// ------------------------------------------------------------------------------ profiler

XxnpuActivityProfiler::XxnpuActivityProfiler() {
  available_ = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,          ActivityType::GPU_MEMSET,
                ActivityType::GPU_USER_ANNOTATION, ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER};
}

std::unique_ptr<libkineto::IActivityProfilerSession> XxnpuActivityProfiler::configure(
    const std::set<ActivityType>& activity_types, const libkineto::Config& config) {
  // A CPU-only capture also asks for PRIVATEUSE1_RUNTIME/DRIVER; without a device type
  // there is no xxnpu timeline to record.
  if (!WantsDeviceWork(activity_types)) return nullptr;
  if (!Has(activity_types, ActivityType::CPU_OP)) {
    // torch only pushes op correlation ids when it traces CPU ops: the device timeline is
    // complete, but no kernel can be linked to the op that launched it.
    TORCH_WARN_ONCE(
        "xxnpu profiler: ProfilerActivity.PrivateUse1 without ProfilerActivity.CPU records the xxnpu device "
        "timeline (kernels, copies, launches), but device time cannot be attributed to the ops that launched it "
        "(no 'Self XXNPU' per op, no launch-to-op links). Add ProfilerActivity.CPU to the activities for that.");
  }
  return std::make_unique<XxnpuActivityProfilerSession>(activity_types);
}

std::unique_ptr<libkineto::IActivityProfilerSession> XxnpuActivityProfiler::configure(
    int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<ActivityType>& activity_types,
    const libkineto::Config& config) {
  return configure(activity_types, config);
}

REGISTER_PRIVATEUSE1_PROFILER(XxnpuActivityProfiler);

}  // namespace xxnpu::profiler
