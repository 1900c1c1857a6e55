// C++ tests of the c10 integration (no Python): the guard, streams, events, the
// allocator adapter and its statistics, hooks, and tensors on xxnpu through libtorch.
// Links the registrations and the core ops like the extension does.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstdlib>

#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

const c10::Device kDev0(c10::DeviceType::PrivateUse1, 0);
const c10::Device kDev1(c10::DeviceType::PrivateUse1, 1);

c10::impl::VirtualGuardImpl Guard() { return c10::impl::VirtualGuardImpl(c10::DeviceType::PrivateUse1); }

TEST(GuardTest, DevicesAndDeviceGuard) {
  auto g = Guard();
  EXPECT_EQ(g.deviceCount(), 2);
  EXPECT_EQ(g.getDevice(), kDev0);
  {
    c10::DeviceGuard guard(kDev1);
    EXPECT_EQ(g.getDevice(), kDev1);
    EXPECT_EQ(*xxnpuGetDevice(), 1);
  }
  EXPECT_EQ(g.getDevice(), kDev0);
  EXPECT_THROW(g.setDevice(c10::Device(c10::DeviceType::PrivateUse1, 5)), c10::AcceleratorError);
}

TEST(StreamTest, DefaultPoolAndCurrentStreams) {
  const XxnpuStream def = GetDefaultXxnpuStream(0);
  EXPECT_EQ(def.id(), 0);
  EXPECT_EQ(GetCurrentXxnpuStream(0), def);
  const XxnpuStream a = GetStreamFromPool(false, 0);
  const XxnpuStream b = GetStreamFromPool(false, 0);
  EXPECT_NE(a, b);  // round robin
  EXPECT_NE(a.id(), 0);
  EXPECT_EQ(GetStreamFromPool(true, 1).priority(), -1);
  {
    c10::StreamGuard guard(a.unwrap());
    EXPECT_EQ(GetCurrentXxnpuStream(0), a);
    // Work queued now goes to `a`.
    at::Tensor t = at::ones({1000}, at::TensorOptions().device(kDev0));
    a.synchronize();
    EXPECT_TRUE(a.query());
  }
  EXPECT_EQ(GetCurrentXxnpuStream(0), def);
  // Streams of device 1 resolve to device-1 handles even from a device-0 thread.
  EXPECT_EQ(*xxnpuStreamGetDevice(GetDefaultXxnpuStream(1).handle()), 1);
  EXPECT_THROW(HandleOf(c10::Stream(c10::Stream::UNSAFE, kDev0, 987654)), c10::Error);
}

TEST(EventTest, RecordBlockQueryAndElapsedTime) {
  c10::Event start(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
  c10::Event end(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
  const XxnpuStream s = GetStreamFromPool(false, 0);
  EXPECT_TRUE(start.query());  // never recorded
  start.record(s.unwrap());
  at::Tensor t;
  {
    c10::StreamGuard guard(s.unwrap());
    t = at::empty({1 << 20}, at::TensorOptions().device(kDev0)).normal_();
  }
  end.record(s.unwrap());
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GT(start.elapsedTime(end), 0.0);
  // Another stream waits for `end` before its own work.
  const XxnpuStream other = GetStreamFromPool(false, 0);
  end.block(other.unwrap());
  other.synchronize();
}

TEST(EventTest, TimingRequiresTimingEvents) {
  c10::Event a(c10::DeviceType::PrivateUse1, c10::EventFlag::PYTORCH_DEFAULT);
  c10::Event b(c10::DeviceType::PrivateUse1, c10::EventFlag::PYTORCH_DEFAULT);
  const XxnpuStream s = GetDefaultXxnpuStream(0);
  a.record(s.unwrap());
  b.record(s.unwrap());
  b.synchronize();
  EXPECT_THROW(a.elapsedTime(b), c10::Error);
}

TEST(TensorTest, CreateCopyAndReadBack) {
  at::Tensor host = at::arange(24, at::kFloat).reshape({4, 6});
  at::Tensor dev = host.to(kDev0);
  EXPECT_EQ(dev.device(), kDev0);
  EXPECT_TRUE(IsDevicePointer(dev.data_ptr()));
  EXPECT_TRUE(at::equal(dev.cpu(), host));
  // Strided and casting copies run the device copy kernel.
  at::Tensor t = dev.t().contiguous();
  EXPECT_TRUE(at::equal(t.cpu(), host.t().contiguous()));
  at::Tensor d = dev.to(at::kDouble);
  EXPECT_EQ(d.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::allclose(d.cpu(), host.to(at::kDouble)));
  // Across devices.
  at::Tensor on1 = dev.to(kDev1);
  EXPECT_EQ(on1.device(), kDev1);
  EXPECT_TRUE(at::equal(on1.cpu(), host));
  EXPECT_FLOAT_EQ(dev[2][3].item<float>(), 15.0f);
}

TEST(TensorTest, FillResizeAndSet) {
  at::Tensor t = at::empty({3}, at::TensorOptions().device(kDev0).dtype(at::kInt));
  t.fill_(7);
  t.resize_({5});
  t.narrow(0, 3, 2).fill_(9);
  EXPECT_TRUE(at::equal(t.cpu(), at::tensor({7, 7, 7, 9, 9}, at::kInt)));
  at::Tensor u = at::empty({0}, t.options());
  u.set_(t);
  EXPECT_TRUE(u.is_alias_of(t));
  t.zero_();
  EXPECT_EQ(u.sum().item<int>(), 0);
}

TEST(AllocatorTest, StatisticsFollowTensors) {
  c10::DeviceAllocator* alloc = c10::getDeviceAllocator(c10::DeviceType::PrivateUse1);
  ASSERT_TRUE(alloc->initialized());
  const auto before = alloc->getDeviceStats(0).allocated_bytes[0].current;
  {
    at::Tensor t = at::empty({1000}, at::TensorOptions().device(kDev0));  // 4000 B -> 4096 B block
    EXPECT_EQ(alloc->getDeviceStats(0).allocated_bytes[0].current, before + 4096);
  }
  EXPECT_EQ(alloc->getDeviceStats(0).allocated_bytes[0].current, before);
  alloc->resetPeakStats(0);
  EXPECT_EQ(alloc->getDeviceStats(0).allocated_bytes[0].peak, before);
  auto [free, total] = alloc->getMemoryInfo(0);
  EXPECT_GT(total, 0u);
  EXPECT_LE(free, total);
  alloc->emptyCache();
}

TEST(AllocatorTest, OutOfMemoryIsTorchOutOfMemoryError) {
  auto [free, total] = c10::getDeviceAllocator(c10::DeviceType::PrivateUse1)->getMemoryInfo(0);
  try {
    at::Tensor t = at::empty({static_cast<int64_t>(total) + 1}, at::TensorOptions().device(kDev0).dtype(at::kByte));
    FAIL() << "allocated more than the device has";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("xxnpu"));
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(total + 1)));
  }
  // The device goes on.
  at::Tensor ok = at::ones({16}, at::TensorOptions().device(kDev0));
  EXPECT_EQ(ok.sum().item<float>(), 16.0f);
}

TEST(HooksTest, AvailabilityPointersAndPinnedMemory) {
  const auto& hooks = at::detail::getPrivateUse1Hooks();
  EXPECT_TRUE(hooks.isAvailable());
  EXPECT_EQ(hooks.deviceCount(), 2);
  at::Tensor d = at::empty({8}, at::TensorOptions().device(kDev1));
  EXPECT_EQ(hooks.getDeviceFromPtr(d.data_ptr()), kDev1);
  at::Tensor pinned = at::empty({1024}).pin_memory(kDev0);
  EXPECT_TRUE(pinned.is_pinned(kDev0));
  EXPECT_TRUE(hooks.isPinnedPtr(pinned.data_ptr()));
  at::Tensor plain = at::empty({1024});
  EXPECT_FALSE(hooks.isPinnedPtr(plain.data_ptr()));
  // Generators: one default per device, seeded reproducibly.
  at::Generator g0 = hooks.getDefaultGenerator(0);
  g0.set_current_seed(123);
  at::Tensor r1 = at::empty({64}, at::TensorOptions().device(kDev0)).normal_();
  g0.set_current_seed(123);
  at::Tensor r2 = at::empty({64}, at::TensorOptions().device(kDev0)).normal_();
  EXPECT_TRUE(at::equal(r1.cpu(), r2.cpu()));
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  setenv("XXNPU_DEVICE_MEMORY", "512M", 1);
  testing::InitGoogleTest(&argc, argv);
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  return RUN_ALL_TESTS();
}
