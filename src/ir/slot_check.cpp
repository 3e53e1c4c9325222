#include "ir/slot_check.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace kvf::ir {
namespace {

// "row 2, position 17" for a [rows, cap] read map; "token 5" for a flat write map.
std::string where(const Value& slot, size_t i) {
  const Shape& s = slot.type.shape;
  if (s.size() == 2 && s[1] > 0) {
    const auto cap = static_cast<size_t>(s[1]);
    return str_cat("row ", i / cap, ", position ", i % cap);
  }
  return str_cat("token ", i);
}

}  // namespace

Status check_slot(const Value& slot, std::span<const int32_t> words) {
  if (slot.kind != ValueKind::kSlot || slot.slot_bound <= 0) return {};
  const int64_t pool = slot.slot_bound;
  if (slot.slot == Slot::kAdapter) {
    for (size_t i = 0; i < words.size(); ++i) {
      if (words[i] < 0 || words[i] >= pool) {
        return invalid_input("adapter ids: token ", i, " names adapter ", words[i], "; the step has ", pool - 1,
                             " (0 is the base model)");
      }
    }
    return {};
  }
  if (slot.slot == Slot::kSlotMap) {
    for (size_t i = 0; i < words.size(); ++i) {
      if (words[i] < 0 || words[i] >= pool) {
        return invalid_input("read map: ", where(slot, i), " names slot ", words[i], ", outside the pool of ", pool,
                             " slots");
      }
    }
    return {};
  }
  std::vector<std::pair<int32_t, size_t>> named;  // (slot, token): sorted, a repeat is adjacent
  for (size_t i = 0; i < words.size(); ++i) {
    const int32_t w = words[i];
    if (w == -1) continue;
    if (w < -1 || w >= pool) {
      return invalid_input("write map: ", where(slot, i), " names slot ", w, ", outside the pool of ", pool,
                           " slots (-1 writes nothing)");
    }
    named.emplace_back(w, i);
  }
  std::sort(named.begin(), named.end());
  for (size_t i = 1; i < named.size(); ++i) {
    if (named[i].first == named[i - 1].first) {
      return invalid_input("write map: slot ", named[i].first, " is named twice (tokens ", named[i - 1].second, " and ",
                           named[i].second, ")");
    }
  }
  return {};
}

}  // namespace kvf::ir
