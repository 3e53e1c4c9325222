#include "serve/stop_matcher.h"

#include <algorithm>

namespace kvf::serve {

StopMatcher::Out StopMatcher::feed(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    Out out{held_.substr(0, first), true};
    held_.clear();
    return out;
  }
  // The longest tail of held_ that some stop string begins with stays behind.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  Out out{held_.substr(0, held_.size() - keep), false};
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace kvf::serve
