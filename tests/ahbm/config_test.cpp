// The AHBM configuration: the shipped default_config.json equals the built-in defaults
// (docs/ahbm.md argues each number once), and a bad file is a typed error naming the key.
#include <gtest/gtest.h>

#include <string>

#include "exec/ahbm/config.h"
#include "testing.h"

namespace kvf::ahbm {
namespace {

TEST(AhbmConfig, DefaultFileEqualsBuiltInDefaults) {
  Result<AhbmConfig> c = load_config(testing::source_dir() + "/src/exec/ahbm/default_config.json");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const AhbmConfig d;
  EXPECT_EQ(config_json(*c), config_json(d));
  // The written form reads back to the same configuration.
  Result<AhbmConfig> again = parse_config(config_json(d), "written");
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(config_json(*again), config_json(d));
  EXPECT_EQ(d.hw.dma_bytes_per_cycle(), 128.0);  // 1024 GB/s at 1 GHz over 8 PEs
}

TEST(AhbmConfig, PartialFileKeepsDefaults) {
  Result<AhbmConfig> c = parse_config(R"({"pe": {"dma": {"latency_cycles": 7}}, "kernel": {"prefetch": 3}})", "t.json");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->hw.dma.latency_cycles, 7);
  EXPECT_EQ(c->kernel.prefetch, 3);
  AhbmConfig expected;
  expected.hw.dma.latency_cycles = 7;
  expected.kernel.prefetch = 3;
  EXPECT_EQ(config_json(*c), config_json(expected));
}

TEST(AhbmConfig, BadFilesAreTypedErrors) {
  Result<AhbmConfig> typo = parse_config(R"({"pe": {"dma": {"latency": 7}}})", "t.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(typo.error().message().find("t.json.pe.dma.latency: unknown key"), std::string::npos) << typo.error().message();

  Result<AhbmConfig> type = parse_config(R"({"cubes": "eight"})", "t.json");
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.error().message().find("t.json.cubes: expected an integer"), std::string::npos);
  Result<AhbmConfig> flag = parse_config(R"({"kernel": {"gqa_batch": 1}})", "t.json");
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.error().message().find("t.json.kernel.gqa_batch: expected true or false"), std::string::npos);

  Result<AhbmConfig> zero = parse_config(R"({"pe": {"ipcq": {"depth": 0}}})", "t.json");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message().find("pe.ipcq.depth must be positive"), std::string::npos);

  Result<AhbmConfig> missing = load_config("/nonexistent/ahbm.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace kvf::ahbm
