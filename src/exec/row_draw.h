// A row's next token drawn where its logits are (Executor::run_sample): the host's sampler
// turns its settings and a sequence's history into a RowDraw and the edits of its logits;
// the backend applies them and draws, and only the token comes back.
//
// The draw: the edited logits of the row; greedy (exec::row_argmax) at temperature 0; else
// weights w = exp((logit - max) / temperature) held as integers (w·2^40, rounded: sums are
// exact and their order does not matter, so the draw is the same on every run), the
// candidates in order (larger logit first, a tie to the lower id) cut by top-k, then top-p
// (the shortest prefix whose weight reaches top_p of the top-k's), then min-p (weights of at
// least min_p of the largest; at least one token), and the token where the running sum of
// the kept weights, in id order, first exceeds uniform · their total.
// C++17 and CUDA-ready: the CUDA executor's kernel includes it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#if !defined(__CUDACC__)
#include "core/error.h"
#endif

#if defined(__CUDACC__)
#define KVF_HOST_DEVICE __host__ __device__
#else
#define KVF_HOST_DEVICE
#endif

namespace kvf::exec {

// What happens to one token's logit, in this order: a bias added, the repetition penalty
// (a positive logit divided by it, a negative one multiplied, in double as the CPU sampler
// does), a presence/frequency amount subtracted.
struct LogitEdit {
  enum : uint32_t { kAddBias = 1, kRepeatPenalty = 2, kSubtract = 4 };
  int32_t token = 0;
  uint32_t ops = 0;
  float bias = 0;
  float subtract = 0;
};

KVF_HOST_DEVICE inline float edited_logit(float l, const LogitEdit& e, double repeat_penalty) {
  if (e.ops & LogitEdit::kAddBias) l += e.bias;
  if (e.ops & LogitEdit::kRepeatPenalty) {
    l = l > 0 ? static_cast<float>(l / repeat_penalty) : static_cast<float>(l * repeat_penalty);
  }
  if (e.ops & LogitEdit::kSubtract) l -= e.subtract;
  return l;
}

struct RowDraw {
  float temperature = 0;  // <= 0: greedy
  int32_t top_k = 0;      // 0: off
  float top_p = 1;        // 1: off
  float min_p = 0;        // 0: off
  float uniform = 0;      // in [0, 1): the host's seeded draw for this row
  double repeat_penalty = 1;
  int32_t first_edit = 0;  // this row's edits: StepDraws::edits[first_edit, first_edit + edits)
  int32_t edits = 0;
};

// The weight scale: a weight below 2^-41 of the largest rounds to 0 and is never drawn.
inline constexpr double kDrawWeightOne = 1099511627776.0;  // 2^40

// The draws of a step's first rows.size() rows; each changed token of a row has one edit.
struct StepDraws {
  std::vector<RowDraw> rows;
  std::vector<LogitEdit> edits;
};

#if !defined(__CUDACC__)
// Every row's edits lie inside draws.edits, and at most `rows` rows are asked for.
Status check_draws(const StepDraws& draws, int64_t rows);

// The draw on the host, by a sort of the row: what a backend that keeps its logits in host
// memory answers, and the definition a device's draw is checked against. `logits` is the row
// before its edits.
int32_t draw_row(std::span<const float> logits, const RowDraw& draw, std::span<const LogitEdit> edits);
// draw_row of each of the first draws.rows.size() rows of `row` elements of x, into ids.
Status draw_rows(std::span<const float> x, int64_t row, const StepDraws& draws, std::vector<int32_t>& ids);
#endif

}  // namespace kvf::exec
