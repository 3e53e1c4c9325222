// Stop strings across piece boundaries: generation stops at the first piece that completes
// a stop string, with the text before it; nothing is held back for good, and nothing is
// emitted that a stop string could still start in.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "serve/stop_matcher.h"
#include "test_seed.h"

namespace kvf {
namespace {

// Feeds `pieces` and returns what came out, and whether it stopped.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  serve::StopMatcher m(stops);
  std::string out;
  for (const std::string& p : pieces) {
    serve::StopMatcher::Out o = m.feed(p);
    out += o.text;
    if (o.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopMatcher, FindsAStopStringSplitAcrossPieces) {
  EXPECT_EQ(run({"END"}, {"abc E", "N", "D tail"}), (std::pair<std::string, bool>{"abc ", true}));
  EXPECT_EQ(run({"\n\n"}, {"line\n", "\nnext"}), (std::pair<std::string, bool>{"line", true}));
  EXPECT_EQ(run({"xyz", "b"}, {"a", "b", "xyz"}), (std::pair<std::string, bool>{"a", true}));
}

TEST(StopMatcher, HoldsBackOnlyWhatCouldStillStartAStop) {
  serve::StopMatcher m({"STOP"});
  EXPECT_EQ(m.feed("hello ST").text, "hello ");
  EXPECT_EQ(m.feed("O").text, "");
  EXPECT_EQ(m.feed("Y").text, "STOY");
  EXPECT_EQ(m.feed("XST").text, "X");
  EXPECT_EQ(m.feed("A").text, "STA");
  EXPECT_EQ(m.feed("S").text, "");
  EXPECT_EQ(m.flush(), "S");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, NoStopsPassEverythingAtOnce) {
  serve::StopMatcher m({});
  EXPECT_EQ(m.feed("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, RandomSplitsStopWhereTheTextFirstHoldsAStopString) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const std::string alphabet = "ab\n";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    for (int i = 0; i < 30; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    for (uint64_t k = 0, n = 1 + rng() % 3; k < n; ++k) {
      std::string s;
      for (uint64_t i = 0, len = 1 + rng() % 4; i < len; ++i) s += alphabet[rng() % alphabet.size()];
      stops.push_back(s);
    }
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 5, text.size() - i);
      pieces.push_back(text.substr(i, len));
      i += len;
    }
    // The reference: at the first piece after which some stop string is in the text, the
    // text before the earliest-starting one there.
    size_t first = std::string::npos, seen = 0;
    for (const std::string& p : pieces) {
      seen += p.size();
      for (const std::string& s : stops) first = std::min(first, text.substr(0, seen).find(s));
      if (first != std::string::npos) break;
    }
    const auto [out, stopped] = run(stops, pieces);
    ASSERT_EQ(stopped, first != std::string::npos) << text;
    ASSERT_EQ(out, stopped ? text.substr(0, first) : text) << text;
  }
}

}  // namespace
}  // namespace kvf
