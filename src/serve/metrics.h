// Metrics: the server's counters, gauges and latency histograms, rendered in the Prometheus
// text format (version 0.0.4) for GET /metrics. The engine thread records; any thread
// renders. Names follow Prometheus' conventions (base units, _total for counters).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kvf::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, increasing; +Inf is implied
  void observe(double x);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // The engine's state after a step.
  void set_state(int64_t running, int64_t waiting, double kv_usage, int64_t preemptions, int64_t prefix_queries,
                 int64_t prefix_hits);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  void finished(const std::string& reason);  // stop, length, cancelled, error
  void time_to_first_token(double seconds);
  void inter_token_latency(double seconds);
  void e2e_latency(double seconds);

  std::string render() const;

 private:
  mutable std::mutex mu_;
  int64_t running_ = 0, waiting_ = 0, preemptions_ = 0, prefix_queries_ = 0, prefix_hits_ = 0;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  double kv_usage_ = 0;
  std::map<std::string, int64_t> finished_;
  Histogram ttft_, itl_, e2e_;
};

}  // namespace kvf::serve
