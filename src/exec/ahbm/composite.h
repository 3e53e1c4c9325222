// Composite commands (ADR §3, §8): one fused multi-stage command executed as a unit. Stages
// name their unit and their work; `deps` orders stages inside the composite and `carried`
// chains a stage to the same stage of the stream's previous composite (the running m, l, O
// registers). A composite may push to an IPCQ direction as its tail action; it may never
// pop or branch on data: validate() rejects both, and so does submit().
#pragma once

#include <array>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "exec/ahbm/chip.h"

namespace kvf::ahbm {

enum class StageOp {
  kDma,     // bytes from the PE's memory into SRAM
  kMatmul,  // macs on the MM unit
  kVec,     // elems elementwise + exps exponentials on the VEC unit
  kPush,    // a Message to push_to's inbound queue (tail action only)
  kPop,     // not expressible in hardware: a composite cannot wait on a queue (ADR §7)
  kBranch,  // not expressible in hardware: a composite cannot branch on data (ADR §7)
};
const char* stage_op_name(StageOp op);

struct Stage {
  StageOp op = StageOp::kVec;
  std::string name{};
  int64_t bytes = 0;                   // kDma
  int64_t macs = 0;                    // kMatmul
  int64_t elems = 0, exps = 0;         // kVec
  std::vector<int> deps{};             // earlier stages of this composite
  bool carried = false;                // waits for the stage of this name in the stream's previous composite
  std::function<void()> compute{};     // the stage's values, computed when it completes
  Pe* push_to = nullptr;               // kPush
  std::function<Message()> message{};  // kPush: built when the stage starts
};

struct Composite {
  std::string name;
  int stream = 0;  // composites of one stream share carried state and run in order
  std::vector<Stage> stages;
};

// Ok, or kUnsupported naming the stage that pops or branches, or kInternal for a malformed
// dependency (not earlier in the composite) or a push that is not the last stage.
Status validate(const Composite& c);

// The composite queue of one PE: stages start as soon as their dependencies are done and
// then wait for their unit, so stages of different composites overlap.
class CompositeQueue {
 public:
  CompositeQueue(Chip& chip, Pe& pe) : chip_(&chip), pe_(&pe) {}
  CompositeQueue(const CompositeQueue&) = delete;
  CompositeQueue& operator=(const CompositeQueue&) = delete;

  Status submit(Composite c, std::function<void()> on_complete);
  int in_flight() const { return static_cast<int>(live_.size()); }
  int64_t submitted() const { return submitted_; }
  // Stages accepted so far, by StageOp (pop and branch stay zero: submit refuses them).
  const std::array<int64_t, 6>& stage_counts() const { return stage_counts_; }

 private:
  struct InFlight {
    Composite c;
    std::function<void()> on_complete;
    std::vector<int> pending;                  // unfinished dependencies per stage
    std::vector<bool> done;
    int remaining = 0;
    std::map<int, std::pair<InFlight*, int>> carried_waiter;  // my stage -> (next composite, its stage)
  };
  void maybe_start(InFlight& f, int stage);
  void start(InFlight& f, int stage);
  void finish(InFlight* f, int stage);

  Chip* chip_;
  Pe* pe_;
  std::list<InFlight> live_;
  std::map<int, InFlight*> last_of_stream_;
  int64_t submitted_ = 0;
  std::array<int64_t, 6> stage_counts_{};
};

}  // namespace kvf::ahbm
