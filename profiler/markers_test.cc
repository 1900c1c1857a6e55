// Marker names (issue 21): they are kept only for records actually written, released a
// capture later, and bounded within one capture.
#include "profiler/markers.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/activity_trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

constexpr int kNames = 100'000;
constexpr size_t kCap = size_t{16} << 20;  // markers.cc's bound per generation

std::string NameOf(int i) { return absl::StrCat("step ", i, " ", std::string(300, 'x')); }

TEST(MarkersTest, DistinctNamesOutsideACaptureKeepNothing) {
  ActivityDisableAll();
  const size_t before = MarkerInternedBytes();
  for (int i = 0; i < kNames; ++i) {
    ASSERT_EQ(MarkerRangePush(NameOf(i)), 0);
    MarkerMark(NameOf(i));
    ASSERT_EQ(MarkerRangePop(), 0);
  }
  EXPECT_EQ(MarkerInternedBytes(), before);
}

TEST(MarkersTest, OneCaptureKeepsAtMostTheBoundAndLaterNamesGetAPlaceholder) {
  ActivitySetBufferRecords(size_t{1} << 17);  // every record of the capture fits
  MarkerNewCapture();
  MarkerNewCapture();  // nothing left from earlier captures
  ASSERT_EQ(MarkerInternedBytes(), 0u);
  ActivityClear();
  ActivityEnable(ActivityKind::kMarker);
  for (int i = 0; i < kNames; ++i) {  // ~31 MB of distinct names
    MarkerRangePush(NameOf(i));
    MarkerRangePop();
  }
  ActivityDisable(ActivityKind::kMarker);
  std::vector<ActivityRecord> records;
  ActivityCollect(&records);
  ASSERT_EQ(records.size(), static_cast<size_t>(kNames));
  EXPECT_LE(MarkerInternedBytes(), kCap);
  EXPECT_GT(MarkerInternedBytes(), kCap / 2);
  EXPECT_EQ(std::string_view(records.front().name), NameOf(0));
  EXPECT_THAT(records.back().name, HasSubstr("name not kept"));
  // The first names of the capture are real, until the bound.
  int kept = 0;
  for (const ActivityRecord& r : records) kept += std::string_view(r.name).substr(0, 5) == "step ";
  EXPECT_GT(kept, kNames / 3);
  EXPECT_LT(kept, kNames);

  // A capture's names stay valid through the next capture, and are freed by the one after.
  MarkerNewCapture();
  EXPECT_EQ(std::string_view(records.front().name), NameOf(0));
  MarkerNewCapture();
  EXPECT_EQ(MarkerInternedBytes(), 0u);
}

TEST(MarkersTest, ARangeOpenedBeforeACaptureKeepsItsName) {
  ActivityDisableAll();
  MarkerRangePush("opened before");
  ActivityClear();
  ActivityEnable(ActivityKind::kMarker);
  MarkerRangePop();
  ActivityDisable(ActivityKind::kMarker);
  std::vector<ActivityRecord> records;
  ActivityCollect(&records);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(std::string_view(records[0].name), "opened before");
}

}  // namespace
}  // namespace xxnpu
