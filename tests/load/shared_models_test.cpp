// The rule every model-gated test relies on (tests/testing.h, model_file and
// KVF_SKIP_MISSING): a missing shared input is a skip on a developer's machine and a failure
// under KVF_REQUIRE_MODELS=1 (CI), so no skipped test can pass CI silently.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "testing.h"

namespace kvf {
namespace {

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(SharedModels, MissingFileFailsWhenModelsAreRequired) {
  ScopedEnv require("KVF_REQUIRE_MODELS", "1");
  EXPECT_NONFATAL_FAILURE(EXPECT_FALSE(testing::model_file("no/such/model.gguf")),
                          "required model file is missing");
}

TEST(SharedModels, MissingFileIsNulloptWithoutTheRequirement) {
  ScopedEnv require("KVF_REQUIRE_MODELS", nullptr);
  EXPECT_FALSE(testing::model_file("no/such/model.gguf"));
}

void skip_for_a_missing_input() { KVF_SKIP_MISSING("no/such/input" << " not present"); }

TEST(SharedModels, SkipForAMissingInputFailsWhenModelsAreRequired) {
  ScopedEnv require("KVF_REQUIRE_MODELS", "1");
  EXPECT_FATAL_FAILURE(skip_for_a_missing_input(), "KVF_REQUIRE_MODELS=1: no/such/input not present");
}

}  // namespace
}  // namespace kvf
