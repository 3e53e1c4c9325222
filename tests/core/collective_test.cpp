// ThreadGroup: N threads all-reducing random data get, every one, the bits of the serial
// sum in rank order (f64, rounded once); gathers give every rank every rank's rows in rank
// order; calls repeat; disagreeing calls fail on every rank; a rank that aborts releases the
// others.
#include "core/collective.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "testing.h"

namespace kvf {
namespace {

// Runs body(rank) on one thread per rank of the group and returns each rank's status.
std::vector<Status> on_threads(ThreadGroup& group, const std::function<Status(Collective&)>& body) {
  std::vector<Status> status(static_cast<size_t>(group.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] { status[static_cast<size_t>(r)] = body(group.rank(r)); });
  }
  for (std::thread& t : threads) t.join();
  return status;
}

template <class T>
std::vector<std::vector<T>> random_rows(std::mt19937_64& rng, int ranks, size_t n) {
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  std::vector<std::vector<T>> rows(static_cast<size_t>(ranks), std::vector<T>(n));
  for (auto& row : rows) {
    for (T& x : row) x = static_cast<T>(u(rng) * std::pow(10.0, static_cast<int>(u(rng)) % 6));  // wide exponents
  }
  return rows;
}

template <class T>
std::vector<T> serial_sum(const std::vector<std::vector<T>>& rows) {
  std::vector<T> out(rows[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    double s = rows[0][i];
    for (size_t r = 1; r < rows.size(); ++r) s += rows[r][i];
    out[i] = static_cast<T>(s);
  }
  return out;
}

template <class T>
auto bits(T x) {
  if constexpr (sizeof(T) == 4) return std::bit_cast<uint32_t>(x);
  else return std::bit_cast<uint64_t>(x);
}

template <class T>
void expect_bits(const std::vector<T>& got, const std::vector<T>& want, int rank) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits(got[i]) != bits(want[i])) {
      ADD_FAILURE() << "rank " << rank << " element " << i << ": " << got[i] << " want " << want[i];
      return;
    }
  }
}

template <class T>
void check_sums(int ranks, size_t n, int calls) {
  SCOPED_TRACE(::testing::Message() << ranks << " ranks, " << n << " elements, " << sizeof(T) * 8 << " bits");
  std::mt19937_64 rng(testing::test_seed());
  ThreadGroup group(ranks);
  for (int call = 0; call < calls; ++call) {
    std::vector<std::vector<T>> rows = random_rows<T>(rng, ranks, n);
    const std::vector<T> want = serial_sum(rows);
    const std::vector<Status> status = on_threads(group, [&](Collective& c) {
      return c.all_reduce_sum(std::span<T>(rows[static_cast<size_t>(c.rank())]));
    });
    for (int r = 0; r < ranks; ++r) {
      EXPECT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].error().to_string();
      expect_bits(rows[static_cast<size_t>(r)], want, r);
    }
  }
}

TEST(ThreadGroup, SumsInRankOrderOnEveryRank) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}}) {
      check_sums<float>(ranks, n, 3);
      check_sums<double>(ranks, n, 2);
    }
  }
}

// Many calls in one thread each, back to back: no call may read a buffer the next one posts.
TEST(ThreadGroup, ManyCallsInARow) {
  ThreadGroup group(3);
  const int calls = 500;
  const std::vector<Status> status = on_threads(group, [&](Collective& c) -> Status {
    std::vector<float> x(7);
    for (int k = 0; k < calls; ++k) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(k * (c.rank() + 1) + static_cast<int>(i));
      Status s = c.all_reduce_sum(std::span<float>(x));
      if (!s) return s;
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] != static_cast<float>(6 * k + 3 * static_cast<int>(i))) return internal_error("call ", k, " element ", i);
      }
    }
    return {};
  });
  for (const Status& s : status) EXPECT_TRUE(s.ok()) << s.error().to_string();
}

TEST(ThreadGroup, DisagreeingCallsFailOnEveryRankAndChangeNothing) {
  ThreadGroup group(2);
  std::vector<float> a = {1, 2, 3}, b = {4, 5};
  std::vector<double> c = {1, 2, 3};
  std::vector<Status> status = on_threads(group, [&](Collective& g) {
    return g.rank() == 0 ? g.all_reduce_sum(std::span<float>(a)) : g.all_reduce_sum(std::span<float>(b));
  });
  for (const Status& s : status) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), ErrorCode::kInternal);
    EXPECT_NE(s.error().message().find("posts"), std::string::npos) << s.error().message();
  }
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  status = on_threads(group, [&](Collective& g) {
    return g.rank() == 0 ? g.all_reduce_sum(std::span<float>(a)) : g.all_reduce_sum(std::span<double>(c));
  });
  for (const Status& s : status) EXPECT_FALSE(s.ok());
  // The group still works: a failed call is a whole call.
  status = on_threads(group, [&](Collective& g) { return g.all_reduce_sum(std::span<float>(g.rank() == 0 ? a : b).first(2)); });
  for (const Status& s : status) EXPECT_TRUE(s.ok());
  EXPECT_EQ(a[0], 5);
  EXPECT_EQ(b[1], 7);
}

TEST(ThreadGroup, AnAbortReleasesTheOthersUntilRestart) {
  ThreadGroup group(3);
  std::vector<Status> status = on_threads(group, [&](Collective& g) -> Status {
    if (g.rank() == 1) {
      g.abort();  // its step failed before the all-reduce
      return invalid_input("rank 1's own failure");
    }
    std::vector<float> x(4, 1.0f);
    Status first = g.all_reduce_sum(std::span<float>(x));
    if (first) return internal_error("an all-reduce without rank 1 succeeded");
    return g.all_reduce_sum(std::span<float>(x));  // and every later call fails at once
  });
  EXPECT_EQ(group.aborted_by(), 1);
  for (const Status& s : status) ASSERT_FALSE(s.ok());  // checked before error() is read
  EXPECT_EQ(status[0].error().code(), ErrorCode::kInternal);
  EXPECT_NE(status[0].error().message().find("rank 1 left the group"), std::string::npos) << status[0].error().message();
  EXPECT_EQ(status[1].error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(status[2].error().code(), ErrorCode::kInternal);
  ASSERT_TRUE(group.restart().ok());
  EXPECT_EQ(group.aborted_by(), -1);
  status = on_threads(group, [&](Collective& g) -> Status {
    std::vector<float> x(2, 1.0f);
    Status s = g.all_reduce_sum(std::span<float>(x));
    if (s && x[0] != 3.0f) return internal_error("sum ", x[0]);
    return s;
  });
  for (const Status& s : status) EXPECT_TRUE(s.ok()) << s.error().to_string();
}

TEST(ThreadGroup, GathersEveryRanksRowsInRankOrder) {
  std::mt19937_64 rng(testing::test_seed());
  for (int ranks = 1; ranks <= 4; ++ranks) {
    ThreadGroup group(ranks);
    for (size_t n : {size_t{0}, size_t{1}, size_t{37}}) {
      for (int call = 0; call < 3; ++call) {  // calls back to back on one group
        const std::vector<std::vector<float>> rows = random_rows<float>(rng, ranks, n);
        std::vector<std::vector<float>> all(static_cast<size_t>(ranks), std::vector<float>(n * ranks, -1.0f));
        const std::vector<Status> status = on_threads(group, [&](Collective& c) {
          const size_t r = static_cast<size_t>(c.rank());
          return c.all_gather(rows[r], all[r]);
        });
        std::vector<float> want;
        for (const auto& row : rows) want.insert(want.end(), row.begin(), row.end());
        for (int r = 0; r < ranks; ++r) {
          ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].error().to_string();
          expect_bits(all[static_cast<size_t>(r)], want, r);
        }
      }
    }
  }
}

TEST(ThreadGroup, AGatherRefusesDisagreeingCountsOnEveryRank) {
  ThreadGroup group(2);
  std::vector<float> a = {1, 2, 3}, b = {4, 5}, all_a(6, 0.0f), all_b(4, 0.0f);
  std::vector<Status> status = on_threads(group, [&](Collective& g) {
    return g.rank() == 0 ? g.all_gather(a, all_a) : g.all_gather(b, all_b);
  });
  for (const Status& s : status) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), ErrorCode::kInternal);
  }
  EXPECT_EQ(all_a, std::vector<float>(6, 0.0f));  // nothing written
  // A rank whose `all` is the wrong size is refused before it joins; it leaves the group.
  std::vector<float> short_all(3);
  status = on_threads(group, [&](Collective& g) -> Status {
    if (g.rank() == 1) {
      Status s = g.all_gather(std::span<const float>(a).first(2), short_all);
      g.abort();
      return s;
    }
    return g.all_gather(std::span<const float>(a).first(2), std::span<float>(all_a).first(4));
  });
  for (const Status& s : status) ASSERT_FALSE(s.ok());
  EXPECT_NE(status[1].error().message().find("into 3"), std::string::npos) << status[1].error().message();
  EXPECT_NE(status[0].error().message().find("rank 1 left the group"), std::string::npos) << status[0].error().message();
  ASSERT_TRUE(group.restart().ok());
  status = on_threads(group, [&](Collective& g) {
    return g.all_gather(std::span<const float>(g.rank() == 0 ? a : b).first(2),
                        g.rank() == 0 ? std::span<float>(all_a).first(4) : std::span<float>(all_b));
  });
  for (const Status& s : status) EXPECT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(all_b, (std::vector<float>{1, 2, 4, 5}));
}

// run() puts every rank on its own thread at once (an all-reduce inside needs them all), rank
// 0 on the caller's, and keeps the same threads from one run to the next.
TEST(ThreadGroup, RunsEachRankOnAThreadThatLivesAcrossRuns) {
  constexpr int kRanks = 3;
  ThreadGroup group(kRanks);
  std::vector<std::thread::id> first(kRanks), later(kRanks);
  for (int run = 0; run < 20; ++run) {
    std::vector<Status> status(kRanks);
    std::vector<float> sums(kRanks);
    group.run([&](int r) {
      (run == 0 ? first : later)[static_cast<size_t>(r)] = std::this_thread::get_id();
      std::vector<float> x(5, static_cast<float>(r + run));
      status[static_cast<size_t>(r)] = group.rank(r).all_reduce_sum(std::span<float>(x));
      sums[static_cast<size_t>(r)] = x[4];
    });
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].error().to_string();
      EXPECT_EQ(sums[static_cast<size_t>(r)], static_cast<float>(3 + 3 * run));
    }
    if (run > 0) {
      EXPECT_EQ(later, first) << "run " << run;
    }
  }
  EXPECT_EQ(first[0], std::this_thread::get_id());
  EXPECT_NE(first[1], first[2]);
  EXPECT_NE(first[1], first[0]);
}

}  // namespace
}  // namespace kvf
