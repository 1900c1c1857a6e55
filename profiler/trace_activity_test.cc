#include "profiler/trace_activity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

namespace xxnpu::profiler {
namespace {

class TraceActivityTest : public ::testing::Test {
 protected:
  libkineto::TraceSpan span_{0, 100, "test"};
  TraceActivity a_{span_, libkineto::ActivityType::CONCURRENT_KERNEL, "xxnpu::add"};
};

TEST_F(TraceActivityTest, JsonKeepsTheOrderFieldsWereAdded) {
  a_.Add("device", int32_t{1});
  a_.Add("stream", int32_t{3});
  a_.Add("correlation", uint64_t{18446744073709551615ull});
  a_.AddJson("grid", "[64, 1, 1]");
  a_.Add("bytes", int64_t{-4096});
  a_.Add("achieved GB/s", 16.857);
  a_.AddQuoted("wait", "stream");
  EXPECT_EQ(a_.metadataJson(),
            "\"device\": 1, \"stream\": 3, \"correlation\": 18446744073709551615, \"grid\": [64, 1, 1], "
            "\"bytes\": -4096, \"achieved GB/s\": 16.857, \"wait\": \"stream\"");
}

TEST_F(TraceActivityTest, ValuesReadBackAsGenericTraceActivityGivesThem) {
  a_.Add("device", int32_t{1});
  a_.AddJson("grid", "[64, 2, 1]");
  a_.Add("flops", uint64_t{1000});
  a_.AddQuoted("address", "0x1000");
  a_.Add("ratio", 0.5);
  EXPECT_EQ(a_.getMetadataValue("device"), "1");
  EXPECT_EQ(a_.getMetadataValue("grid"), "[64, 2, 1]");
  EXPECT_EQ(a_.getMetadataValue("flops"), "1000");
  EXPECT_EQ(a_.getMetadataValue("address"), "0x1000");  // unquoted, like the base class
  EXPECT_EQ(a_.getMetadataValue("ratio"), "0.5");
  EXPECT_EQ(a_.getMetadataValue("hidden"), "");  // torch asks every activity for this one

  // Through the interface torch and Kineto use.
  const libkineto::ITraceActivity& base = a_;
  EXPECT_EQ(base.getMetadataValue("flops"), "1000");
  EXPECT_EQ(base.metadataJson(), a_.metadataJson());
}

TEST_F(TraceActivityTest, FirstValueOfAKeyWins) {
  a_.Add("bytes", int64_t{1});
  a_.Add("bytes", int64_t{2});
  a_.AddQuoted("bytes", "three");
  EXPECT_EQ(a_.metadataJson(), "\"bytes\": 1");
  EXPECT_EQ(a_.getMetadataValue("bytes"), "1");
}

TEST_F(TraceActivityTest, KeysMatchOnlyWholeFields) {
  // "bytes" is a suffix of "total bytes", and a string value may contain key-like text.
  a_.Add("total bytes", int64_t{7});
  a_.AddQuoted("note", "x, \"bytes\": 5");
  EXPECT_EQ(a_.getMetadataValue("bytes"), "");
  a_.Add("bytes", int64_t{9});
  EXPECT_EQ(a_.getMetadataValue("bytes"), "9");
  EXPECT_EQ(a_.getMetadataValue("total bytes"), "7");
  EXPECT_EQ(a_.getMetadataValue("note"), "x, \"bytes\": 5");  // escaped in, unescaped out
  EXPECT_EQ(a_.metadataJson(), "\"total bytes\": 7, \"note\": \"x, \\\"bytes\\\": 5\", \"bytes\": 9");
}

TEST_F(TraceActivityTest, DoublesAreExactAndJsonSafe) {
  a_.Add("a", 123456.789);  // absl's %g would give 123457
  a_.Add("b", 3.0);
  a_.Add("c", 1e-9);
  a_.Add("d", std::numeric_limits<double>::infinity());
  a_.Add("e", std::nan(""));
  EXPECT_EQ(a_.getMetadataValue("a"), "123456.789");
  EXPECT_EQ(a_.getMetadataValue("b"), "3");
  EXPECT_EQ(std::stod(a_.getMetadataValue("c")), 1e-9);
  EXPECT_EQ(a_.metadataJson().substr(a_.metadataJson().find("\"d\"")), "\"d\": \"inf\", \"e\": \"nan\"");
}

TEST_F(TraceActivityTest, EmptyUntilAFieldIsAdded) {
  EXPECT_EQ(a_.metadataJson(), "");
  EXPECT_EQ(a_.getMetadataValue("device"), "");
}

TEST_F(TraceActivityTest, OwnedAsAGenericTraceActivity) {
  // The plugin's CpuTraceBuffer holds unique_ptr<GenericTraceActivity>: the override must
  // survive that (virtual dispatch, no slicing) and the delete through the base.
  std::unique_ptr<libkineto::GenericTraceActivity> owned =
      std::make_unique<TraceActivity>(span_, libkineto::ActivityType::GPU_MEMCPY, "Memcpy HtoD");
  static_cast<TraceActivity&>(*owned).Add("bytes", int64_t{64});
  EXPECT_EQ(owned->metadataJson(), "\"bytes\": 64");
  EXPECT_EQ(owned->getMetadataValue("bytes"), "64");
  EXPECT_EQ(owned->name(), "Memcpy HtoD");
}

}  // namespace
}  // namespace xxnpu::profiler
