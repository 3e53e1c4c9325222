#include "exec/executor.h"

#include "exec/row_argmax.h"

namespace kvf::exec {

Result<std::span<const int32_t>> Executor::run_argmax(const SlotValues& slots, const std::string& name, int64_t row) {
  Status s = run(slots);
  if (!s) return s.take_error();
  const std::span<const float> out = output(name);
  if (row < 1 || out.empty() || out.size() % static_cast<size_t>(row) != 0) {
    return invalid_input("executor: output '", name, "' of ", out.size(), " elements is not rows of ", row);
  }
  rows_argmax(out, row, argmax_ids_);
  return std::span<const int32_t>(argmax_ids_);
}

}  // namespace kvf::exec
