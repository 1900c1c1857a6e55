// xxnpu streams as c10::Streams: per-device stream pools, the current stream of each
// host thread, and external streams (the torch-facing twin of c10/cuda/CUDAStream.h).
//
// A c10::StreamId names a runtime stream: 0 is the device's default stream, any other id
// is the runtime's own stream id (xxnpuStreamGetId), which is unique in the process and
// never 0 for a created stream. Ids are registered when a stream is handed to c10, so
// HandleOf() can find the runtime handle again.
#ifndef TORCH_XXNPU_DEVICE_C10_XXNPU_STREAM_H_
#define TORCH_XXNPU_DEVICE_C10_XXNPU_STREAM_H_

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <ostream>

#include "device/runtime.h"

namespace xxnpu {

constexpr c10::DeviceType kXxnpuDeviceType = c10::DeviceType::PrivateUse1;
constexpr int kStreamsPerPool = 32;

// The index of the current device when `device` is -1 (after validating it otherwise).
c10::DeviceIndex ResolveDeviceIndex(c10::DeviceIndex device);
c10::DeviceIndex XxnpuDeviceCount();

class XxnpuStream {
 public:
  // `stream` must be an xxnpu stream.
  explicit XxnpuStream(c10::Stream stream);

  c10::Stream unwrap() const { return stream_; }
  operator c10::Stream() const { return stream_; }
  c10::StreamId id() const { return stream_.id(); }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::Device device() const { return stream_.device(); }
  // The runtime handle (never nullptr: the default stream is named explicitly).
  xxnpuStream_t handle() const;
  int priority() const;
  // True when all work queued on the stream has completed. Reports a sticky error.
  bool query() const;
  void synchronize() const;

  bool operator==(const XxnpuStream& other) const { return stream_ == other.stream_; }
  bool operator!=(const XxnpuStream& other) const { return !(*this == other); }

 private:
  c10::Stream stream_;
};

std::ostream& operator<<(std::ostream& os, const XxnpuStream& s);

XxnpuStream GetDefaultXxnpuStream(c10::DeviceIndex device = -1);
XxnpuStream GetCurrentXxnpuStream(c10::DeviceIndex device = -1);
// GetCurrentXxnpuStream(device).handle() without building the c10::Stream: what every
// kernel launch and allocation asks for.
xxnpuStream_t CurrentXxnpuStreamHandle(c10::DeviceIndex device = -1);
// Makes `stream` current on its device for this thread; returns the previous one.
XxnpuStream SetCurrentXxnpuStream(XxnpuStream stream);
// Round-robin over the device's pool of 32 streams per priority, created on first use.
XxnpuStream GetStreamFromPool(bool high_priority = false, c10::DeviceIndex device = -1);
// Wraps a stream created outside c10 (e.g. by a library calling the runtime directly).
XxnpuStream GetStreamFromExternal(xxnpuStream_t handle, c10::DeviceIndex device);
// The runtime handle behind a c10 stream of this backend.
xxnpuStream_t HandleOf(c10::Stream stream);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_C10_XXNPU_STREAM_H_
