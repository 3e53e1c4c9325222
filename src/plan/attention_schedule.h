// Picks the attention schedule for a device (seed 000: "The streaming schedule",
// "Split-KV decode") or refuses with a typed error naming what the device lacks.
#pragma once

#include "plan/device_caps.h"
#include "plan/request.h"

namespace kvf::plan {

// Fills schedule, lanes, splits, chunk and scratch_floats of `req`.
Status choose_attention_schedule(AttentionRequest& req, const DeviceCaps& caps);

}  // namespace kvf::plan
