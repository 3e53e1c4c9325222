// Shared oracles for the libFuzzer targets: a failure must be a typed kvf::Error that
// names what is wrong, and a tokenizer built from fuzzed input must encode and decode sanely.
// Anything else aborts, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "load/tokenizer.h"

namespace kvf::fuzz {

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "FUZZ ORACLE: %s\n", what.c_str());
  std::abort();
}

// Malformed input may give kInvalidInput, kUnsupported or kCapacity, with a message.
// kInternal ("a kvforge bug") or kValidation from a reader is a finding.
inline void check_error(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidInput: case ErrorCode::kUnsupported: case ErrorCode::kCapacity: break;
    default: die("unexpected error code: " + e.to_string());
  }
  if (e.message().empty()) die("error without a message: " + e.to_string());
}

// Looks at a Result: true with a value, false after checking the error.
template <class T>
bool ok_or_typed(const Result<T>& r) {
  if (r.ok()) return true;
  check_error(r.error());
  return false;
}
inline bool ok_or_typed(const Status& s) {
  if (s.ok()) return true;
  check_error(s.error());
  return false;
}

// Text with ASCII, spaces, digits, accents, an emoji, control-looking pieces and a stray byte.
inline const std::string& sample_text() {
  static const std::string t = "Hello world!  12345 h\xc3\xa9llo \xf0\x9f\x99\x82 <s></s><|endoftext|>\n\t x\xff";
  return t;
}

// Builds a tokenizer from v (a typed error is fine), then encodes and decodes: every id in
// range, streaming concatenates to decode(), and every token's bytes are reachable.
inline void exercise_vocab(load::Vocab v) {
  Result<std::unique_ptr<load::Tokenizer>> tok = load::Tokenizer::create(std::move(v));
  if (!ok_or_typed(tok)) return;
  const load::Tokenizer& t = **tok;
  const int32_t n = t.vocab().size();
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = t.encode(sample_text(), special);
    for (int32_t id : ids) {
      if (id < 0 || id >= n) die("encode gave id " + std::to_string(id) + " outside a vocabulary of " + std::to_string(n));
    }
    const std::string text = t.decode(ids);
    load::StreamDecoder stream(t);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (streamed != text) die("streamed decode differs from decode");
  }
  std::vector<int32_t> all;
  for (int32_t id = -1; id <= n && id < 4096; ++id) all.push_back(id);  // -1 and n: out of range
  (void)t.decode(all);
  (void)t.encode("", true);
}

}  // namespace kvf::fuzz
