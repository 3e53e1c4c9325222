#include "cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace kvf::cli {
namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return str_cat(s / 3600, ":", (s / 60 % 60) / 10, (s / 60 % 60) % 10, ":", (s % 60) / 10, s % 10);
  return str_cat(s / 60, ":", (s % 60) / 10, s % 10);
}

std::string amount(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, x >= 100 || x == std::floor(x) ? "%.0f" : "%.1f", x);
  return buf;
}

}  // namespace

Progress::Progress(std::string what, std::string unit, double scale, bool enabled)
    : what_(std::move(what)), unit_(std::move(unit)), scale_(scale), enabled_(enabled) {}

Progress::~Progress() { finish(); }

void Progress::finish() {
  if (drawn_) std::fputs("\r\033[K", stderr);  // the finished work leaves no line behind
  drawn_ = false;
  enabled_ = false;
}

bool Progress::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

std::string Progress::line(const std::string& what, const std::string& unit, double done, double total,
                           double seconds) {
  std::string s = what;
  if (total > 0) s += str_cat(" ", static_cast<int>(std::floor(100.0 * done / total)), "%");
  s += str_cat(" ", amount(done), total > 0 ? "/" + amount(total) : std::string(), " ", unit);
  if (seconds <= 0 || done <= 0) return s;
  const double rate = done / seconds;
  s += str_cat("  ", amount(rate), " ", unit, "/s");
  if (total > done) s += str_cat("  ", clock_text((total - done) / rate), " left");
  return s;
}

void Progress::update(int64_t done, int64_t total) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const std::string text = line(what_, unit_, static_cast<double>(done) / scale_, static_cast<double>(total) / scale_, seconds);
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

std::function<void(int64_t, int64_t)> Progress::callback() {
  return [this](int64_t done, int64_t total) { update(done, total); };
}

}  // namespace kvf::cli
