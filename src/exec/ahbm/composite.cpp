// Composite validation and the per-PE composite queue (composite.h).
#include "exec/ahbm/composite.h"

namespace kvf::ahbm {

const char* stage_op_name(StageOp op) {
  switch (op) {
    case StageOp::kDma: return "dma";
    case StageOp::kMatmul: return "mm";
    case StageOp::kVec: return "vec";
    case StageOp::kPush: return "push";
    case StageOp::kPop: return "pop";
    case StageOp::kBranch: return "branch";
  }
  return "?";
}

Status validate(const Composite& c) {
  const int n = static_cast<int>(c.stages.size());
  for (int i = 0; i < n; ++i) {
    const Stage& s = c.stages[static_cast<size_t>(i)];
    if (s.op == StageOp::kPop || s.op == StageOp::kBranch) {
      return unsupported("composite ", c.name, ": stage ", i, " (", s.name, ") is a ", stage_op_name(s.op),
                         "; composites execute decided work only, the kernel pops and branches (ADR §7)");
    }
    for (int d : s.deps) {
      if (d < 0 || d >= i) return internal_error("composite ", c.name, ": stage ", i, " depends on stage ", d, ", not an earlier one");
    }
    if (s.op == StageOp::kPush && (i != n - 1 || s.push_to == nullptr || !s.message)) {
      return internal_error("composite ", c.name, ": a push must be the last stage and name its target");
    }
  }
  return {};
}

Status CompositeQueue::submit(Composite c, std::function<void()> on_complete) {
  Status s = validate(c);
  if (!s) return s;
  ++submitted_;
  for (const Stage& st : c.stages) ++stage_counts_[static_cast<size_t>(st.op)];
  InFlight& f = live_.emplace_back();
  f.c = std::move(c);
  f.on_complete = std::move(on_complete);
  const size_t n = f.c.stages.size();
  f.pending.assign(n, 0);
  f.done.assign(n, false);
  f.remaining = static_cast<int>(n);
  auto prev = last_of_stream_.find(f.c.stream);
  InFlight* before = prev == last_of_stream_.end() ? nullptr : prev->second;
  for (size_t i = 0; i < n; ++i) {
    const Stage& st = f.c.stages[i];
    f.pending[i] = static_cast<int>(st.deps.size());
    if (!st.carried || before == nullptr) continue;
    for (size_t b = 0; b < before->c.stages.size(); ++b) {
      if (before->c.stages[b].name != st.name || before->done[b]) continue;
      ++f.pending[i];
      before->carried_waiter[static_cast<int>(b)] = {&f, static_cast<int>(i)};
    }
  }
  last_of_stream_[f.c.stream] = &f;
  if (n == 0) {
    finish(&f, -1);
    return {};
  }
  for (size_t i = 0; i < n; ++i) maybe_start(f, static_cast<int>(i));
  return {};
}

void CompositeQueue::maybe_start(InFlight& f, int stage) {
  if (f.pending[static_cast<size_t>(stage)] == 0) start(f, stage);
}

void CompositeQueue::start(InFlight& f, int stage) {
  Stage& s = f.c.stages[static_cast<size_t>(stage)];
  InFlight* fp = &f;
  auto done = [this, fp, stage] { finish(fp, stage); };
  switch (s.op) {
    case StageOp::kDma: chip_->dma(*pe_, s.bytes, done); break;
    case StageOp::kMatmul: chip_->matmul(*pe_, s.macs, done); break;
    case StageOp::kVec: chip_->vec(*pe_, s.elems, s.exps, done); break;
    case StageOp::kPush: chip_->push(*pe_, *s.push_to, s.message(), done); break;
    case StageOp::kPop:
    case StageOp::kBranch: break;  // rejected by validate()
  }
}

void CompositeQueue::finish(InFlight* f, int stage) {
  if (stage >= 0) {
    Stage& s = f->c.stages[static_cast<size_t>(stage)];
    if (s.compute) s.compute();
    f->done[static_cast<size_t>(stage)] = true;
    --f->remaining;
    for (size_t j = static_cast<size_t>(stage) + 1; j < f->c.stages.size(); ++j) {
      for (int d : f->c.stages[j].deps) {
        if (d == stage && --f->pending[j] == 0) start(*f, static_cast<int>(j));
      }
    }
    auto w = f->carried_waiter.find(stage);
    if (w != f->carried_waiter.end()) {
      auto [next, at] = w->second;
      if (--next->pending[static_cast<size_t>(at)] == 0) start(*next, at);
    }
  }
  if (f->remaining > 0) return;
  auto last = last_of_stream_.find(f->c.stream);
  if (last != last_of_stream_.end() && last->second == f) last_of_stream_.erase(last);
  std::function<void()> done = std::move(f->on_complete);
  for (auto it = live_.begin(); it != live_.end(); ++it) {
    if (&*it == f) {
      live_.erase(it);
      break;
    }
  }
  if (done) done();
}

}  // namespace kvf::ahbm
