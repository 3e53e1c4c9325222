#include "llm/scheduler.h"

#include <algorithm>
#include <array>
#include <span>

namespace kvf::llm {
namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Scheduler::Scheduler(Driver& driver, SchedulerOptions opts) : driver_(driver), opts_(opts) {}

void Scheduler::submit(Request r) {
  Tracked t;
  t.req = std::move(r);
  t.submitted = Clock::now();
  waiting_.push_back(std::move(t));
}

// Opens the request (or resumes it after a preemption); false when the pool has no room.
Result<bool> Scheduler::admit(Tracked& t) {
  Result<Opened> o = t.suspended ? driver_.resume(*t.suspended)  // a copy: NoRoom must not lose it
                                 : driver_.open(t.req.prompt, t.req.max_tokens, t.req.sampler, t.req.adapter);
  if (!o) return o.take_error().context("request ", t.req.id);
  if (!o->seq) return false;
  t.seq = *o->seq;
  t.suspended.reset();
  if (t.prefix_hit_tokens < 0) t.prefix_hit_tokens = o->prefix_hit_tokens;
  return true;
}

// The newest running sequence gives its blocks back and waits at the head of the queue.
Status Scheduler::preempt_newest(std::vector<RowRequest>& rows) {
  Tracked t = std::move(running_.back());
  running_.pop_back();
  std::erase_if(rows, [&](const RowRequest& r) { return r.seq == t.seq; });
  Result<std::optional<Suspended>> s = driver_.release(t.seq, ReleaseReason::kPreempted);
  if (!s) return s.take_error();
  t.suspended = std::move(**s);
  t.seq = -1;
  ++t.preemptions;
  ++preemptions_;
  waiting_.push_front(std::move(t));
  return {};
}

// Reserves the running sequence's next tokens within the budget, preempting newer ones
// (or, when it is the newest, itself) until they fit. False: it was preempted.
Result<bool> Scheduler::place(Tracked& t, int64_t& budget, std::vector<RowRequest>& rows, bool& preempted) {
  const int64_t n = std::min(driver_.pending_tokens(t.seq), budget);
  if (n <= 0) return true;
  for (;;) {
    Result<std::optional<NoRoom>> r = driver_.reserve(t.seq, n);
    if (!r) return r.take_error();
    if (!*r) break;
    preempted = true;
    const bool newest = running_.back().seq == t.seq;
    Status s = preempt_newest(rows);
    if (!s) return s.take_error();
    if (newest) return false;
  }
  rows.push_back({t.seq, n});
  budget -= n;
  return true;
}

Completion Scheduler::complete(Tracked& t) {
  Completion c;
  c.id = t.req.id;
  c.ids = driver_.generated(t.seq);
  c.stop = static_cast<int64_t>(c.ids.size()) < t.req.max_tokens ? "eos" : "length";
  c.ttft_ms = t.has_first ? ms_between(t.submitted, t.first_token) : 0.0;
  const double decode_ms = t.has_first ? ms_between(t.first_token, t.last_token) : 0.0;
  c.tokens_per_s = c.ids.size() > 1 && decode_ms > 0 ? static_cast<double>(c.ids.size() - 1) * 1e3 / decode_ms : 0.0;
  c.prefix_hit_tokens = std::max<int64_t>(t.prefix_hit_tokens, 0);
  c.preemptions = t.preemptions;
  return c;
}

bool Scheduler::in_phase(const Tracked& t, Phase phase) const {
  if (phase == Phase::kAny) return true;
  return (driver_.pending_tokens(t.seq) > 1) == (phase == Phase::kPrefill);
}

// The running sequences of the phase, oldest first, then (unless decoding) admissions,
// within the step's token budget and rows.
Status Scheduler::pick_rows(Phase phase, std::vector<RowRequest>& rows, bool& preempted) {
  int64_t budget = opts_.max_batch_tokens;
  const auto room = [&] { return budget > 0 && static_cast<int>(rows.size()) < opts_.max_rows; };
  for (size_t i = 0; i < running_.size() && room(); ++i) {
    if (!in_phase(running_[i], phase)) continue;
    Result<bool> kept = place(running_[i], budget, rows, preempted);
    if (!kept) return kept.take_error();
  }
  while (phase != Phase::kDecode && !preempted && room() && !waiting_.empty()) {
    Result<bool> in = admit(waiting_.front());
    if (!in) return in.take_error();
    if (!*in) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    Tracked& t = running_.back();
    if (driver_.finished(t.seq)) continue;  // max_tokens 0: nothing to compute
    Result<bool> kept = place(t, budget, rows, preempted);
    if (!kept) return kept.take_error();
  }
  return {};
}

Result<std::vector<Completion>> Scheduler::step() {
  const Clock::time_point entry = Clock::now();
  bool steady = false;  // a steady decode step: its whole time counts
  std::vector<RowRequest> rows;
  bool preempted = false;
  // Unmixed, the kind that did not run last goes first; the other if it has no rows.
  static constexpr std::array<Phase, 1> kMixed{Phase::kAny};
  const std::array<Phase, 2> unmixed = last_was_prefill_ ? std::array{Phase::kDecode, Phase::kPrefill}
                                                         : std::array{Phase::kPrefill, Phase::kDecode};
  const std::span<const Phase> order = opts_.mix_prefill_and_decode ? std::span<const Phase>(kMixed) : unmixed;
  for (Phase phase : order) {
    Status s = pick_rows(phase, rows, preempted);
    if (!s) return s.take_error();
    last_was_prefill_ = phase == Phase::kPrefill;
    if (!rows.empty() || preempted) break;
  }
  std::vector<Completion> done;
  if (!rows.empty()) {
    const bool decodes = all_decodes(rows);
    const int64_t shapes = driver_.runner().shapes_prepared();
    const double run_before = driver_.runner().run_seconds();
    Result<std::vector<RowResult>> results = driver_.step(rows);
    if (!results) return results.take_error();
    Status s = driver_.commit(*results);
    if (!s) return s.take_error();
    ++steps_;
    const Clock::time_point now = Clock::now();
    if (decodes && driver_.runner().shapes_prepared() == shapes) {
      steady = true;
      ++steady_decode_.steps;
      steady_decode_.tokens += static_cast<int64_t>(rows.size());
      steady_decode_.executor_seconds += driver_.runner().run_seconds() - run_before;
    }
    for (const RowResult& r : *results) {
      if (!r.token) continue;
      Tracked& t = running(r.seq);
      if (!t.has_first) t.first_token = now;
      t.has_first = true;
      t.last_token = now;
      if (opts_.on_token) opts_.on_token(t.req.id, r);
    }
  } else if (running_.empty() && !waiting_.empty()) {
    const Request& head = waiting_.front().req;
    return capacity("scheduler: request ", head.id, " (", head.prompt.size(), " prompt tokens) does not fit in the pool of ",
                    driver_.total_blocks(), " blocks even alone");
  }
  for (size_t i = 0; i < running_.size();) {
    if (!driver_.finished(running_[i].seq)) {
      ++i;
      continue;
    }
    done.push_back(complete(running_[i]));
    Result<std::optional<Suspended>> r = driver_.release(running_[i].seq, ReleaseReason::kFinished);
    if (!r) return r.take_error();
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (steady) steady_decode_.seconds += std::chrono::duration<double>(Clock::now() - entry).count();
  return done;
}

Scheduler::Tracked& Scheduler::running(SeqId seq) {
  return *std::find_if(running_.begin(), running_.end(), [&](const Tracked& t) { return t.seq == seq; });
}

// Every row one token past the ones it has generated (not a prompt's last token).
bool Scheduler::all_decodes(const std::vector<RowRequest>& rows) {
  return std::all_of(rows.begin(), rows.end(), [&](const RowRequest& r) { return r.tokens == 1 && running(r.seq).has_first; });
}

Result<bool> Scheduler::cancel(const std::string& id) {
  const auto is = [&](const Tracked& t) { return t.req.id == id; };
  if (auto w = std::find_if(waiting_.begin(), waiting_.end(), is); w != waiting_.end()) {
    waiting_.erase(w);
    return true;
  }
  auto r = std::find_if(running_.begin(), running_.end(), is);
  if (r == running_.end()) return false;
  Result<std::optional<Suspended>> s = driver_.release(r->seq, ReleaseReason::kCancelled);
  if (!s) return s.take_error();
  running_.erase(r);
  return true;
}

Result<std::vector<Completion>> Scheduler::run() {
  std::vector<Completion> all;
  while (!idle()) {
    Result<std::vector<Completion>> d = step();
    if (!d) return d.take_error();
    for (Completion& c : *d) all.push_back(std::move(c));
  }
  return all;
}

}  // namespace kvf::llm
