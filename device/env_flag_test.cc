#include "device/env_flag.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace xxnpu {
namespace {

TEST(EnvFlagTest, AcceptsTheTrueSpellingsInAnyCase) {
  for (const char* v : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", " true "}) {
    auto b = ParseEnvFlag("X", v, false);
    ASSERT_TRUE(b.ok()) << v;
    EXPECT_TRUE(*b) << v;
  }
}

TEST(EnvFlagTest, FalseMeansFalse) {
  // The bug this parser replaced: anything but "0" was true, so "false" enabled the flag.
  for (const char* v : {"0", "false", "FALSE", "False", "no", "NO", "off", "Off"}) {
    auto b = ParseEnvFlag("X", v, true);
    ASSERT_TRUE(b.ok()) << v;
    EXPECT_FALSE(*b) << v;
  }
}

TEST(EnvFlagTest, UnsetOrEmptyGivesTheFallback) {
  EXPECT_TRUE(*ParseEnvFlag("X", nullptr, true));
  EXPECT_FALSE(*ParseEnvFlag("X", nullptr, false));
  EXPECT_TRUE(*ParseEnvFlag("X", "", true));
  EXPECT_FALSE(*ParseEnvFlag("X", "  ", false));
}

TEST(EnvFlagTest, AnythingElseIsAnErrorNamingTheVariableAndTheAcceptedValues) {
  for (const char* v : {"2", "ture", "enabled", "y", "-1"}) {
    auto b = ParseEnvFlag("XXCCL_STAGING", v, false);
    ASSERT_FALSE(b.ok()) << v;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string m(b.status().message());
    EXPECT_NE(m.find("XXCCL_STAGING"), std::string::npos) << m;
    EXPECT_NE(m.find(v), std::string::npos) << m;
    EXPECT_NE(m.find("0/false/no/off"), std::string::npos) << m;
  }
}

TEST(EnvFlagTest, ReadsTheEnvironment) {
  setenv("XXNPU_ENV_FLAG_TEST", "off", 1);
  EXPECT_FALSE(*ReadEnvFlag("XXNPU_ENV_FLAG_TEST", true));
  unsetenv("XXNPU_ENV_FLAG_TEST");
  EXPECT_TRUE(*ReadEnvFlag("XXNPU_ENV_FLAG_TEST", true));
}

}  // namespace
}  // namespace xxnpu
