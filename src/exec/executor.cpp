#include "exec/executor.h"

#include <cstdint>

#include "exec/row_argmax.h"

namespace kvf::exec {

Result<std::span<const int32_t>> Executor::run_argmax(const SlotValues& slots, const std::string& name, int64_t row) {
  Status s = run(slots);
  if (!s) return s.take_error();
  const std::span<const float> out = output(name);
  if (row < 1 || out.empty() || out.size() % static_cast<size_t>(row) != 0) {
    return invalid_input("executor: output '", name, "' of ", out.size(), " elements is not rows of ", row);
  }
  rows_argmax(out, row, ids_);
  return std::span<const int32_t>(ids_);
}

Result<std::span<const int32_t>> Executor::run_sample(const SlotValues& slots, const std::string& name, int64_t row,
                                                     const StepDraws& draws) {
  Status s = check_draws(draws, INT64_MAX);  // refused before the step writes any state
  if (s) s = run(slots);
  if (s) s = draw_rows(output(name), row, draws, ids_);
  if (!s) return s.take_error();
  return std::span<const int32_t>(ids_);
}

}  // namespace kvf::exec
