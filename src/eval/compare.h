// How far a result is from the oracle's: the relative L2 error every backend and test is
// held to (DESIGN.md §7). NaN never passes. Comparison only; nothing here evaluates.
#pragma once

#include <span>

namespace kvf::eval {

// ‖a − b‖ / ‖b‖ (0 when both are zero); NaN anywhere, or different sizes, give +inf.
double rel_error(std::span<const double> a, std::span<const double> b);

}  // namespace kvf::eval
