#include "device/simulator/env_config.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<RuntimeConfig> Parse(const std::map<std::string, std::string>& env) {
  return ParseRuntimeConfig([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(EnvConfigTest, Defaults) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device_count, 2);
  EXPECT_EQ(c->device_memory, size_t{8} << 30);
  EXPECT_GE(c->compute_threads, 1);
  EXPECT_FALSE(c->launch_blocking);
  EXPECT_FALSE(c->strict_memory);
  EXPECT_FALSE(c->memcheck);
  EXPECT_FALSE(c->device_memory_explicit);
  EXPECT_EQ(c->spin_us, 50);
  EXPECT_EQ(c->fetch_interval_ns, 2000);
}

TEST(EnvConfigTest, ReadsEveryVariable) {
  auto c = Parse({{"XXNPU_DEVICE_COUNT", "4"},
                  {"XXNPU_DEVICE_MEMORY", "512M"},
                  {"XXNPU_COMPUTE_THREADS", "3"},
                  {"XXNPU_LAUNCH_BLOCKING", "1"},
                  {"XXNPU_STRICT_MEMORY", "true"},
                  {"XXNPU_MEMCHECK", "on"},
                  {"XXNPU_SPIN_US", "25"},
                  {"XXNPU_FETCH_INTERVAL_NS", "0"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device_count, 4);
  EXPECT_EQ(c->device_memory, size_t{512} << 20);
  EXPECT_EQ(c->compute_threads, 3);
  EXPECT_TRUE(c->launch_blocking);
  EXPECT_TRUE(c->strict_memory);
  EXPECT_TRUE(c->memcheck);
  EXPECT_TRUE(c->device_memory_explicit);
  EXPECT_EQ(c->spin_us, 25);
  EXPECT_EQ(c->fetch_interval_ns, 0);
}

TEST(EnvConfigTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64k"), 65536u);
  EXPECT_EQ(*ParseByteSize("8GB"), size_t{8} << 30);
  EXPECT_EQ(*ParseByteSize(" 2G "), size_t{2} << 30);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("0").ok());
  EXPECT_FALSE(ParseByteSize("-1G").ok());
  EXPECT_FALSE(ParseByteSize("lots").ok());
}

TEST(EnvConfigTest, BadValuesNameTheVariableAndWhatIsAccepted) {
  auto count = Parse({{"XXNPU_DEVICE_COUNT", "0"}});
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(count.status().message(), HasSubstr("XXNPU_DEVICE_COUNT=\"0\": expected an integer in [1, 16]"));
  auto mem = Parse({{"XXNPU_DEVICE_MEMORY", "100K"}});
  EXPECT_THAT(mem.status().message(), HasSubstr("expected between 1M and 1T"));
  auto junk = Parse({{"XXNPU_DEVICE_MEMORY", "plenty"}});
  EXPECT_THAT(junk.status().message(), HasSubstr("XXNPU_DEVICE_MEMORY="));
  auto fetch = Parse({{"XXNPU_FETCH_INTERVAL_NS", "-5"}});
  EXPECT_THAT(fetch.status().message(), HasSubstr("XXNPU_FETCH_INTERVAL_NS=\"-5\": expected an integer in [0, 1000000]"));
  auto flag = Parse({{"XXNPU_STRICT_MEMORY", "maybe"}});
  EXPECT_THAT(flag.status().message(), HasSubstr("expected 1/true/yes/on or 0/false/no/off"));
}

}  // namespace
}  // namespace xxnpu
