// The metrics text: every family with its HELP and TYPE, histograms with cumulative
// buckets ending in +Inf, _sum and _count, counters that only add.
#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace kvf {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, RendersGaugesCountersAndHistograms) {
  serve::Metrics m;
  m.set_state(3, 2, 0.25, 1, 100, 40);
  m.add_prompt_tokens(12);
  m.add_generation_tokens(5);
  m.add_generation_tokens(2);
  m.finished("stop");
  m.finished("cancelled");
  m.finished("cancelled");
  m.time_to_first_token(0.003);
  m.time_to_first_token(0.2);
  m.time_to_first_token(1000);
  const std::string t = m.render();
  EXPECT_TRUE(has_line(t, "# TYPE kvforge_requests_running gauge"));
  EXPECT_TRUE(has_line(t, "kvforge_requests_running 3"));
  EXPECT_TRUE(has_line(t, "kvforge_requests_waiting 2"));
  EXPECT_TRUE(has_line(t, "kvforge_kv_cache_usage_ratio 0.25"));
  EXPECT_TRUE(has_line(t, "# TYPE kvforge_prefix_cache_hits_total counter"));
  EXPECT_TRUE(has_line(t, "kvforge_prefix_cache_queries_total 100"));
  EXPECT_TRUE(has_line(t, "kvforge_prefix_cache_hits_total 40"));
  EXPECT_TRUE(has_line(t, "kvforge_prompt_tokens_total 12"));
  EXPECT_TRUE(has_line(t, "kvforge_generation_tokens_total 7"));
  EXPECT_TRUE(has_line(t, "kvforge_preemptions_total 1"));
  EXPECT_TRUE(has_line(t, "kvforge_request_finished_total{finish_reason=\"stop\"} 1"));
  EXPECT_TRUE(has_line(t, "kvforge_request_finished_total{finish_reason=\"cancelled\"} 2"));
  EXPECT_TRUE(has_line(t, "kvforge_request_finished_total{finish_reason=\"error\"} 0"));
  EXPECT_TRUE(has_line(t, "# TYPE kvforge_time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has_line(t, "kvforge_time_to_first_token_seconds_bucket{le=\"0.001\"} 0"));
  EXPECT_TRUE(has_line(t, "kvforge_time_to_first_token_seconds_bucket{le=\"0.005\"} 1"));
  EXPECT_TRUE(has_line(t, "kvforge_time_to_first_token_seconds_bucket{le=\"0.25\"} 2"));
  EXPECT_TRUE(has_line(t, "kvforge_time_to_first_token_seconds_bucket{le=\"80\"} 2"));
  EXPECT_TRUE(has_line(t, "kvforge_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3"));
  EXPECT_TRUE(has_line(t, "kvforge_time_to_first_token_seconds_count 3"));
  EXPECT_TRUE(has_line(t, "kvforge_inter_token_latency_seconds_count 0"));
  EXPECT_TRUE(has_line(t, "kvforge_e2e_request_latency_seconds_sum 0"));
}

}  // namespace
}  // namespace kvf
