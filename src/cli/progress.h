// A progress line on stderr for long work (checking a checkpoint's weights, converting one,
// a batch, a benchmark): what, done of total, the rate and the time left, redrawn at most
// ten times a second. Drawn only when stderr is a terminal, so pipes, logs and --json runs
// see nothing of it; the line is cleared when the work ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace kvf::cli {

class Progress {
 public:
  // `unit` names what is counted ("tokens", "MiB"); `scale` divides the counts for display
  // (1 << 20 shows bytes as MiB). Off unless `enabled` (default: stderr is a terminal).
  Progress(std::string what, std::string unit, double scale = 1.0, bool enabled = stderr_is_terminal());
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(int64_t done, int64_t total);
  // Clears the line (before the command prints its results); the destructor does it too.
  void finish();
  // A callback for lower layers that report (done, total).
  std::function<void(int64_t, int64_t)> callback();

  static bool stderr_is_terminal();

 private:
  // "what 40% 4/10 unit  2.0 unit/s  0:03 left"
  static std::string line(const std::string& what, const std::string& unit, double done, double total,
                          double seconds);

  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  double scale_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_ = Clock::now(), last_draw_{};
};

}  // namespace kvf::cli
