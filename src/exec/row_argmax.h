// The greedy token of a row of logits, the one definition every backend and the sampler share.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvf::exec {

// The token a left-to-right scan keeping the first strictly larger logit picks: the first
// largest value; a NaN never wins, except at 0, where nothing beats it. 0 for an empty row.
int32_t row_argmax(std::span<const float> logits);

// row_argmax of each `row` elements of x (whole rows only), into ids.
void rows_argmax(std::span<const float> x, int64_t row, std::vector<int32_t>& ids);

}  // namespace kvf::exec
