// Turns the runtime's activity records (device/activity_trace.h) into Kineto activities.
//
// This is the whole of the plugin's translation logic, kept free of session state so it
// can be unit-tested with hand-made records:
//   kKernel                 -> CONCURRENT_KERNEL   on the device row (pid = device, tid = stream)
//   kMemcpy                 -> GPU_MEMCPY          on the device row
//   kMemset                 -> GPU_MEMSET          on the device row
//   kRuntime                -> PRIVATEUSE1_RUNTIME on the issuing host thread's row
//   kSynchronization (host) -> PRIVATEUSE1_RUNTIME "<api> (wait)" on the host thread's row
//   kSynchronization (device stream waiting on an event) -> CUDA_SYNC "Stream Wait Event" on
//                                 the device row, with Kineto's wait_on_stream and
//                                 wait_on_cuda_event_record_corr_id (the xxnpuEventRecord call)
//   kMemory (runtime segments) -> bytes/address/total metadata on the enclosing
//                                 xxnpuMalloc / xxnpuFree runtime event
//   kMarker range (subkind 0) -> PRIVATEUSE1_RUNTIME on the host thread's row, args.marker
//                                "range" (a CPU row in the table that nests like a
//                                record_function range), and, with user_annotations, a
//                                GPU_USER_ANNOTATION per stream that ran device work
//                                launched inside it (what NVTX ranges project onto the GPU)
//   kMarker mark (subkind 1)  -> a zero-length PRIVATEUSE1_RUNTIME event, args.marker "mark"
//   (torch drops child-profiler activities typed USER_ANNOTATION or CPU_INSTANT_EVENT from
//   its results with a warning: it assumes those came from itself.)
// Linking: every activity's `id` is the ATen op's correlation id (the record's
// external_id[kDefault], 0 if none) and `linked` is what the profiler's callback returns
// for it, which is how torch attributes device time to ops. The runtime's own correlation
// id (shared by a launch and its kernel) goes into args.correlation and is the id of the
// ac2g flow arrow from the launch to the device activity.
// args.stream is on device-row activities only (Kineto's convention: readers such as HTA
// take an event with args.stream for device work); host events that queue on or wait for a
// stream say so in args["target stream"], and GPU user annotations carry neither.
// Timestamps stay in Unix-epoch nanoseconds (Kineto's unit and clock).
#ifndef TORCH_XXNPU_PROFILER_RECORD_CONVERSION_H_
#define TORCH_XXNPU_PROFILER_RECORD_CONVERSION_H_

#include <libkineto.h>
#include <GenericTraceActivity.h>
#include <ITraceActivity.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "device/activity_trace.h"

namespace xxnpu::profiler {

struct ConversionOptions {
  // The capture window: records that start before or end after it are dropped (counted).
  int64_t window_start_ns = 0;
  int64_t window_end_ns = std::numeric_limits<int64_t>::max();
  // pid of host-side rows (runtime calls, waits): the process, as for torch's CPU ops.
  int32_t host_pid = 0;
  // Which record kinds become activities (mirrors the Kineto activity types requested).
  bool kernels = true;
  bool memcpy = true;
  bool memset = true;
  bool runtime = true;           // runtime calls, host waits, runtime memory metadata
  bool user_annotations = false; // GPU_USER_ANNOTATION spans of record_function / marker ranges
  bool markers = true;           // marker ranges and marks (torch.xxnpu.markers, emit_xxnpu)
};

struct ConversionResult {
  size_t activities = 0;     // activities appended to the buffer
  size_t out_of_window = 0;  // records dropped because they lie outside the window
  size_t device_unlinked = 0;  // device activities without an op to link to
  size_t flows = 0;          // launch -> device activity arrows
  size_t markers = 0;        // marker ranges and marks converted (host side)
  std::set<int32_t> devices;                    // devices that have device activities
  std::set<std::pair<int32_t, int32_t>> streams;  // (device, stream) rows used
};

using LinkedActivityFn = std::function<const libkineto::ITraceActivity*(int32_t)>;

// Appends one activity per converted record to `buffer->activities` (in record order,
// then the GPU user-annotation spans of record_function ranges, then those of marker
// ranges). Marker ranges that began before the window are clipped to its start (a range
// is recorded when it is popped, so one popped inside the capture is kept). `records` must be sorted by start time, as
// ActivityCollect returns them. `linked` may be empty (no linking).
ConversionResult ConvertRecords(const std::vector<ActivityRecord>& records, const ConversionOptions& options,
                                const LinkedActivityFn& linked, libkineto::CpuTraceBuffer* buffer);

}  // namespace xxnpu::profiler

#endif  // TORCH_XXNPU_PROFILER_RECORD_CONVERSION_H_
