#include "models/gguf_names.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>

namespace kvf::models {
namespace {

constexpr const char* kKinds[] = {"gate", "up", "down"};

// "blk.N.ffn_<kind>_exps.weight" -> "blk.N.ffn_<kind>_exp." (the per-expert names' stem), or "".
std::string stacked_stem(const std::string& name) {
  for (const char* kind : kKinds) {
    const std::string tail = str_cat(".ffn_", kind, "_exps.weight");
    if (name.starts_with("blk.") && name.ends_with(tail)) return name.substr(0, name.size() - tail.size()) + str_cat(".ffn_", kind, "_exp.");
  }
  return "";
}

// "blk.N.ffn_<kind>_exp.<e>.weight" -> ("blk.N.ffn_<kind>_exps.weight", e), or ("", -1).
std::pair<std::string, int64_t> expert_of(const std::string& name) {
  for (const char* kind : kKinds) {
    const std::string mid = str_cat(".ffn_", kind, "_exp.");
    const size_t at = name.find(mid);
    if (!name.starts_with("blk.") || at == std::string::npos || !name.ends_with(".weight")) continue;
    const char* first = name.data() + at + mid.size();
    const char* last = name.data() + name.size() - std::strlen(".weight");
    int64_t e = -1;
    const auto [end, err] = std::from_chars(first, last, e);
    if (err != std::errc() || end != last || e < 0) continue;
    return {name.substr(0, at) + str_cat(".ffn_", kind, "_exps.weight"), e};
  }
  return {"", -1};
}

}  // namespace

Status add_gguf_tensor(Weights& w, const std::string& name, const HostTensor& t) {
  const std::string stem = stacked_stem(name);
  if (stem.empty()) {
    w.add(name, t);
    return {};
  }
  if (t.rank() != 3) return invalid_input("tensor ", name, ": stacked experts must be [experts, rows, cols], got ", shape_str(t.shape()));
  for (int64_t e = 0; e < t.shape()[0]; ++e) {
    Result<HostTensor> one = t.index0(e);
    if (!one) return one.take_error().context("tensor ", name);
    w.add(str_cat(stem, e, ".weight"), std::move(*one));
  }
  return {};
}

Result<std::vector<GgufTensorSource>> gguf_sources(const Weights& w) {
  std::vector<GgufTensorSource> out;
  std::map<std::string, std::map<int64_t, std::pair<std::string, const HostTensor*>>> stacks;
  for (const auto& [name, t] : w.tensors()) {
    const auto [stacked, e] = expert_of(name);
    if (e < 0) out.push_back({name, {{name, &t}}});
    else stacks[stacked][e] = {name, &t};
  }
  for (const auto& [name, experts] : stacks) {
    const HostTensor& first = *experts.begin()->second.second;
    const auto n = static_cast<int64_t>(experts.size());
    if (experts.rbegin()->first != n - 1) return invalid_input(name, ": experts are not numbered 0..", n - 1);
    GgufTensorSource src{name, {}};
    for (const auto& [e, part] : experts) {
      const HostTensor& t = *part.second;
      if (t.dtype() != first.dtype() || t.shape() != first.shape()) {
        return invalid_input(name, ": expert ", e, " is ", dtype_name(t.dtype()), shape_str(t.shape()), ", expert 0 ",
                             dtype_name(first.dtype()), shape_str(first.shape()));
      }
      src.parts.push_back(part);
    }
    out.push_back(std::move(src));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<HostTensor> stack(std::span<const HostTensor> parts) {
  if (parts.empty()) return invalid_input("stack of no tensors");
  const HostTensor& first = parts.front();
  Shape shape{static_cast<int64_t>(parts.size())};
  shape.insert(shape.end(), first.shape().begin(), first.shape().end());
  Result<HostTensor> all = HostTensor::zeros(first.dtype(), shape);
  if (!all) return all.take_error();
  const int64_t bytes = first.nbytes();
  for (size_t i = 0; i < parts.size(); ++i) {
    const HostTensor& t = parts[i];
    if (t.dtype() != first.dtype() || t.shape() != first.shape() || !t.is_contiguous()) {
      return invalid_input("stack: part ", i, " is ", dtype_name(t.dtype()), shape_str(t.shape()), ", part 0 ",
                           dtype_name(first.dtype()), shape_str(first.shape()));
    }
    std::memcpy(all->data<char>() + static_cast<int64_t>(i) * bytes, t.raw(), static_cast<size_t>(bytes));
  }
  return all;
}

}  // namespace kvf::models
