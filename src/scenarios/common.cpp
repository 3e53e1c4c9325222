#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "scenarios/scenarios.h"
#include "exec/state.h"

namespace kvf::bench {

Result<HostTensor> random_tensor(Shape shape, DType dtype, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : v) x = u(rng);
  if (dtype == DType::kF32) return HostTensor::from_f32(std::move(shape), v);
  Result<HostTensor> t = HostTensor::zeros(DType::kF16, std::move(shape));
  if (!t) return t;
  auto* bits = static_cast<uint16_t*>(t->raw_mut());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_f16_bits(v[i]);
  return t;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string Table::text() const {
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      s += std::string(width[c] - std::min(width[c], cells[c].size()), ' ') + cells[c] + (c + 1 < cells.size() ? "  " : "");
    }
    return s + "\n";
  };
  std::string s = title.empty() ? "" : "# " + title + "\n";
  s += line(columns);
  for (const auto& r : rows) s += line(r);
  return s;
}

std::string Table::csv() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) s += (c ? "," : "") + cells[c];
    return s + "\n";
  };
  std::string s = line(columns);
  for (const auto& r : rows) s += line(r);
  return s;
}

Result<double> median_seconds(int repeats, const std::function<Status()>& fn, bool warmup) {
  if (warmup) {
    Status s = fn();
    if (!s) return s.take_error();
  }
  std::vector<double> t;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = fn();
    if (!s) return s.take_error();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Result<std::pair<double, double>> paired_median_seconds(int repeats, const std::function<Status()>& a,
                                                        const std::function<Status()>& b) {
  for (const auto* fn : {&a, &b}) {
    Status s = (*fn)();
    if (!s) return s.take_error();
  }
  std::vector<double> ta, tb;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    for (auto [fn, t] : {std::pair{&a, &ta}, std::pair{&b, &tb}}) {
      const auto t0 = std::chrono::steady_clock::now();
      Status s = (*fn)();
      if (!s) return s.take_error();
      t->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return std::pair{ta[ta.size() / 2], tb[tb.size() / 2]};
}

double memory_read_gbps(ThreadPool& pool, int64_t bytes, int repeats) {
  exec::HostBuffer buf(bytes);
  std::memset(buf.data(), 1, static_cast<size_t>(bytes));
  const auto* words = static_cast<const uint64_t*>(buf.data());
  const int64_t n = bytes / 8;
  volatile uint64_t sink = 0;
  Result<double> t = median_seconds(repeats, [&]() -> Status {
    std::vector<uint64_t> part(static_cast<size_t>(pool.size()) * 8, 0);
    pool.parallel_for(pool.size(), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t lo = n * t / pool.size(), hi = n * (t + 1) / pool.size();
        uint64_t a = 0, b = 0, c = 0, d = 0;  // integer sums vectorize without reassociation flags
        for (int64_t i = lo; i + 4 <= hi; i += 4) {
          a += words[i];
          b += words[i + 1];
          c += words[i + 2];
          d += words[i + 3];
        }
        part[static_cast<size_t>(t) * 8] = a + b + c + d;
      }
    });
    for (uint64_t p : part) sink = sink + p;
    return {};
  });
  return t.ok() ? static_cast<double>(bytes) / *t / 1e9 : 0.0;
}

}  // namespace kvf::bench
