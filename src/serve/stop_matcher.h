// StopMatcher: finds the first of a request's stop strings in text that arrives a piece at
// a time, across token boundaries. It emits only text that no stop string can start in,
// holding back the longest tail that is still the beginning of one; once a stop string is
// found, the text before it is all that is ever emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvf::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  struct Out {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found: nothing comes after `text`
  };
  Out feed(std::string_view piece);
  // The end of the text: what was held back is not the start of a stop string after all.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace kvf::serve
