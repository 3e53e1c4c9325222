#include "serve/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvf::serve {
namespace {

// Prometheus floats: shortest round-trip form, "+Inf" for infinity.
std::string num(double x) {
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double v) {
  header(out, name, type, help);
  out += name + " " + num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double x) {
  size_t i = 0;
  while (i < bounds_.size() && x > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += x;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    out += name + "_bucket{le=\"" + num(le) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480}) {}

void Metrics::set_state(int64_t running, int64_t waiting, double kv_usage, int64_t preemptions, int64_t prefix_queries,
                        int64_t prefix_hits) {
  std::lock_guard lock(mu_);
  running_ = running;
  waiting_ = waiting;
  kv_usage_ = kv_usage;
  preemptions_ = preemptions;
  prefix_queries_ = prefix_queries;
  prefix_hits_ = prefix_hits;
}

void Metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += n;
}

void Metrics::add_generation_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  generation_tokens_ += n;
}

void Metrics::finished(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++finished_[reason];
}

void Metrics::time_to_first_token(double s) {
  std::lock_guard lock(mu_);
  ttft_.observe(s);
}

void Metrics::inter_token_latency(double s) {
  std::lock_guard lock(mu_);
  itl_.observe(s);
}

void Metrics::e2e_latency(double s) {
  std::lock_guard lock(mu_);
  e2e_.observe(s);
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  scalar(out, "kvforge_requests_running", "gauge", "Requests whose sequences are in the running batch.", static_cast<double>(running_));
  scalar(out, "kvforge_requests_waiting", "gauge", "Requests queued for admission.", static_cast<double>(waiting_));
  scalar(out, "kvforge_kv_cache_usage_ratio", "gauge", "Fraction of KV-cache blocks held by sequences (0 to 1).", kv_usage_);
  scalar(out, "kvforge_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         static_cast<double>(prefix_queries_));
  scalar(out, "kvforge_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
         static_cast<double>(prefix_hits_));
  scalar(out, "kvforge_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", static_cast<double>(prompt_tokens_));
  scalar(out, "kvforge_generation_tokens_total", "counter", "Tokens generated.", static_cast<double>(generation_tokens_));
  scalar(out, "kvforge_preemptions_total", "counter", "Sequences preempted to free KV blocks.", static_cast<double>(preemptions_));
  header(out, "kvforge_request_finished_total", "counter", "Finished requests by finish reason.");
  for (const char* reason : {"stop", "length", "cancelled", "error"}) {
    auto it = finished_.find(reason);
    out += std::string("kvforge_request_finished_total{finish_reason=\"") + reason + "\"} " +
           std::to_string(it == finished_.end() ? 0 : it->second) + "\n";
  }
  ttft_.render(out, "kvforge_time_to_first_token_seconds", "Time from a request's arrival to its first token.");
  itl_.render(out, "kvforge_inter_token_latency_seconds", "Time between two tokens of one sequence.");
  e2e_.render(out, "kvforge_e2e_request_latency_seconds", "Time from a request's arrival to its end.");
  return out;
}

}  // namespace kvf::serve
