#include "llm/driver.h"

#include <algorithm>

#include "llm/parallel_group.h"

namespace kvf::llm {
namespace {

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

RunnerOptions runner_options(const DriverOptions& o) {
  RunnerOptions r;
  r.executor = o.executor;
  r.compute = o.compute;
  r.threads = o.threads;
  return r;
}

// A StepRunner, or for opts.tp_ranks or cp_ranks > 1 a ParallelGroup; a group that cannot
// open leaves its refusal in `refused` and a StepRunner in its place, which no step reaches.
std::unique_ptr<ModelRunner> open_runner(const models::Model& model, const DriverOptions& opts,
                                         std::optional<Error>& refused) {
  if (opts.tp_ranks != 1 || opts.cp_ranks != 1) {
    Result<std::unique_ptr<ParallelGroup>> group =
        ParallelGroup::open(model, opts.tp_ranks, opts.cp_ranks, runner_options(opts), "driver");
    if (group) return std::move(*group);
    refused = group.take_error();
  }
  return std::make_unique<StepRunner>(model, runner_options(opts));
}

}  // namespace

int64_t attention_reach(const models::ModelConfig& cfg, int64_t window) {
  int64_t reach = 0;
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    int64_t w = window;
    if (cfg.sliding_window > 0 && cfg.sliding(l)) w = w > 0 ? std::min(w, cfg.sliding_window) : cfg.sliding_window;
    if (w <= 0) return 0;
    reach = std::max(reach, w);
  }
  return reach;
}

int64_t max_blocks_held(const models::ModelConfig& cfg, int64_t window, int64_t sinks, int64_t max_len, int64_t chunk) {
  auto blocks = [](int64_t tokens) { return (tokens + kv::kBlockTokens - 1) / kv::kBlockTokens; };
  const int64_t reach = attention_reach(cfg, window);
  if (reach == 0) return blocks(max_len);
  return std::min(blocks(max_len), blocks(sinks) + blocks(reach + chunk) + 1);
}

int32_t Driver::Sequence::token_at(int64_t i) const {
  const auto np = static_cast<int64_t>(prompt.size());
  return i < np ? prompt[static_cast<size_t>(i)] : generated[static_cast<size_t>(i - np)];
}

std::vector<int32_t> Driver::Sequence::history_read() const {
  if (!sampler.reads_history()) return {};  // a copy of a 32k-token history per row and step, for nothing
  std::vector<int32_t> h = prompt;
  h.insert(h.end(), generated.begin(), generated.end());
  return h;
}

Driver::Driver(const models::Model& model, DriverOptions opts)
    : model_(model),
      opts_(opts),
      max_seq_len_(opts.max_seq_len > 0 ? opts.max_seq_len : std::min<int64_t>(model.config.context, 4096)),
      reach_(attention_reach(model.config, opts.window)),
      pool_(opts.pool_blocks),
      cache_(pool_),
      runner_(open_runner(model, opts, refused_)) {}

kv::WeightsIdentity lora_identity(kv::WeightsIdentity base, const models::LoraAdapter& adapter) {
  return kv::weights_identity(str_cat(base.value, "|lora|", adapter.content_hash, "|load=", adapter.serial));
}

bool Driver::has_lora() const { return opts_.lora != nullptr && !opts_.lora->empty(); }

kv::WeightsIdentity Driver::identity_of(int32_t adapter) const {
  if (adapter == 0) return opts_.identity;
  return lora_identity(opts_.identity, *opts_.lora->adapters()[static_cast<size_t>(adapter - 1)]);
}

Status Driver::set_lora(const models::LoraSet* lora) {
  for (const auto& [id, q] : seqs_) {
    if (q->adapter != 0) return invalid_input("driver: sequence ", id, " runs with adapter ", q->adapter, "; finish it first");
  }
  opts_.lora = lora;
  runner_->forget_steps();
  return {};
}

Result<Opened> Driver::open(std::vector<int32_t> prompt, int64_t max_new, SamplerConfig sampler, int32_t adapter) {
  if (prompt.empty()) return invalid_input("driver: a sequence needs at least one prompt token");
  if (max_new < 0) return invalid_input("driver: max_new ", max_new, " is negative");
  return admit(std::move(prompt), {}, max_new, Sampler(sampler), adapter);
}

Result<Opened> Driver::resume(Suspended s) {
  return admit(std::move(s.prompt), std::move(s.generated), s.max_new, std::move(s.sampler), s.adapter);
}

Result<Opened> Driver::admit(std::vector<int32_t> prompt, std::vector<int32_t> generated, int64_t max_new,
                             Sampler sampler, int32_t adapter) {
  const int64_t adapters = has_lora() ? static_cast<int64_t>(opts_.lora->adapters().size()) : 0;
  if (adapter < 0 || adapter > adapters) {
    return invalid_input("driver: adapter ", adapter, " is not loaded (", adapters, " adapters; 0 is the base model)");
  }
  const auto known = static_cast<int64_t>(prompt.size() + generated.size());
  const int64_t longest = static_cast<int64_t>(prompt.size()) + max_new;
  if (longest > max_seq_len_) {
    return invalid_input("driver: prompt ", prompt.size(), " + max_new ", max_new, " exceeds the longest sequence ",
                         max_seq_len_);
  }
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  for (int32_t t : all) {
    if (t < 0 || t >= model_.config.vocab) {
      return invalid_input("driver: token id ", t, " is outside the vocabulary of ", model_.config.vocab);
    }
  }
  // The last known token is always computed: its logits choose the next one.
  const kv::WeightsIdentity identity = identity_of(adapter);
  kv::BlockTable table = opts_.prefix_cache ? cache_.open(all, identity) : kv::BlockTable(pool_, identity);
  const int64_t hit = table.num_tokens();
  // A sequence under a window holds a window's worth of blocks at a time: its prompt is
  // appended as it is computed (reserve), not all at once.
  const int64_t admitted = reach_ > 0 ? std::min(known, hit + reach_) : known;
  const int32_t needed = table.blocks_needed(admitted - hit);
  if (needed > pool_.free_count()) {
    const NoRoom no{needed, pool_.free_count()};
    Status s = table.release();
    if (!s) return s.take_error();
    return Opened{std::nullopt, no, 0};
  }
  Status s = table.append(std::span<const int32_t>(all).subspan(static_cast<size_t>(hit), static_cast<size_t>(admitted - hit)));
  if (!s) return s.take_error();
  auto seq = std::make_unique<Sequence>(Sequence{std::move(prompt), std::move(generated), max_new, std::move(sampler),
                                                 std::move(table), hit, false, 0, adapter});
  seq->finished = static_cast<int64_t>(seq->generated.size()) >= max_new;
  const SeqId id = next_id_++;
  seqs_.emplace(id, std::move(seq));
  note_usage();
  return Opened{id, {}, hit};
}

Result<Driver::Sequence*> Driver::find(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return invalid_input("driver: no sequence ", seq);
  return it->second.get();
}

const Driver::Sequence* Driver::find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : it->second.get();
}

Result<std::optional<NoRoom>> Driver::reserve(SeqId id, int64_t n) {
  Result<Sequence*> s = find(id);
  if (!s) return s.take_error();
  Sequence& q = **s;
  if (n < 1 || q.computed + n > q.known()) {
    return invalid_input("driver: sequence ", id, " has ", q.known() - q.computed, " tokens to compute, not ", n);
  }
  const int64_t have = q.table.num_tokens(), want = q.computed + n;
  if (want <= have) return std::optional<NoRoom>{};
  std::vector<int32_t> add;
  for (int64_t i = have; i < want; ++i) add.push_back(q.token_at(i));
  const int32_t needed = q.table.blocks_needed(static_cast<int64_t>(add.size()));
  if (needed > pool_.free_count()) return std::optional<NoRoom>{NoRoom{needed, pool_.free_count()}};
  Status st = q.table.append(add);
  if (!st) return st.take_error();
  note_usage();
  return std::optional<NoRoom>{};
}

models::StepSpec Driver::step_spec(int64_t t, int64_t cap, int64_t rows) const {
  models::StepSpec spec;
  spec.n_tokens = t;
  spec.capacity = cap;
  spec.cached = true;
  spec.last_logits = true;
  spec.kv_dtype = opts_.kv_dtype;
  spec.pool_slots = pool_.pool_slots();
  spec.rows = rows;
  spec.window = opts_.window;
  spec.sinks = opts_.sinks;
  spec.lora = has_lora() ? opts_.lora : nullptr;
  return spec;
}

// Every decode shape (rows and read-map widths in powers of two) and the first prefill
// chunk of one prompt, so that no step of a server stalls on compiling its shape.
Status Driver::warm_up(int max_rows, int64_t max_chunk) {
  if (refused_) return *refused_;
  const int64_t widest = pow2_at_least(max_seq_len_);
  for (int64_t rows = 1; rows <= pow2_at_least(max_rows); rows *= 2) {
    for (int64_t cap = kv::kBlockTokens; cap <= widest; cap *= 2) {
      if (Status s = runner_->prepare(step_spec(1, cap, rows)); !s) return s;
    }
  }
  for (int64_t t = 2; t <= std::min(pow2_at_least(max_chunk), max_seq_len_); t *= 2) {
    if (Status s = runner_->prepare(step_spec(t, std::max<int64_t>(t, kv::kBlockTokens), 1)); !s) return s;
  }
  return {};
}

Result<Driver::StepInput> Driver::step_input(const std::vector<RowRequest>& rows, int64_t t, int64_t padded_rows) {
  // The read map is compact (a row lists the positions its table still holds), so its
  // width follows the live positions, in powers of two so that few step shapes are traced.
  int64_t live = kv::kBlockTokens;
  for (const RowRequest& r : rows) live = std::max(live, seqs_.at(r.seq)->table.live_positions());
  const int64_t cap = std::max(pow2_at_least(live), t);
  std::vector<int32_t> ids, pos, write, adapter, read(static_cast<size_t>(padded_rows * cap), 0);
  std::vector<int32_t> key_pos(read.size(), kv::kNoKey);
  for (size_t r = 0; r < static_cast<size_t>(padded_rows); ++r) {
    if (r >= rows.size()) {  // a bucket's spare row: reads slot 0 as position 0, writes nothing
      ids.insert(ids.end(), static_cast<size_t>(t), 0);
      pos.insert(pos.end(), static_cast<size_t>(t), 0);
      write.insert(write.end(), static_cast<size_t>(t), -1);
      adapter.insert(adapter.end(), static_cast<size_t>(t), 0);
      key_pos[r * static_cast<size_t>(cap)] = 0;
      continue;
    }
    const Sequence& q = *seqs_.at(rows[r].seq);
    const int64_t n = rows[r].tokens;
    for (int64_t j = 0; j < t; ++j) {  // a shorter row repeats its last token; the copies write nothing
      const int64_t p = q.computed + std::min(j, n - 1);
      ids.push_back(q.token_at(p));
      pos.push_back(static_cast<int32_t>(p));
      write.push_back(j < n ? q.table.slot(p) : -1);
      adapter.push_back(q.adapter);
    }
    const auto row = [&](std::vector<int32_t>& m) {
      return std::span<int32_t>(m).subspan(r * static_cast<size_t>(cap), static_cast<size_t>(cap));
    };
    Status s = q.table.fill_read_row(row(read), row(key_pos));
    if (!s) return s.take_error();
  }
  exec::SlotValues slots;  // moved in: a 64-row step's maps are 64 KB each
  slots[ir::Slot::kToken] = std::move(ids);
  slots[ir::Slot::kPos] = std::move(pos);
  slots[ir::Slot::kWriteMap] = std::move(write);
  slots[ir::Slot::kSlotMap] = std::move(read);
  slots[ir::Slot::kKeyPos] = std::move(key_pos);
  if (has_lora()) slots[ir::Slot::kAdapter] = std::move(adapter);
  return StepInput{step_spec(t, cap, padded_rows), std::move(slots)};
}

bool Driver::draws_on_device(const Sequence& q) const {
  return runner_->samples_on_device() && !opts_.return_logits && q.sampler.config().logprobs < 0;
}

Driver::Readback Driver::readback(const std::vector<RowRequest>& rows) const {
  if (opts_.return_logits) return Readback::kLogits;
  bool greedy = true, drawn = true;
  for (const RowRequest& r : rows) {
    const Sequence& q = *seqs_.at(r.seq);
    if (!q.samples_after(r.tokens)) continue;
    greedy = greedy && q.sampler.plain_greedy();
    drawn = drawn && draws_on_device(q);
  }
  return greedy ? Readback::kGreedyIds : drawn ? Readback::kDrawnIds : Readback::kLogits;
}

// A row that samples nothing this step still has a (greedy) draw: its token is not read.
exec::StepDraws Driver::draws_of(const std::vector<RowRequest>& rows) {
  exec::StepDraws d;
  for (const RowRequest& r : rows) {
    Sequence& q = *seqs_.at(r.seq);
    const auto vocab = static_cast<size_t>(model_.config.vocab);
    d.rows.push_back(q.samples_after(r.tokens) ? q.sampler.device_draw(q.history_read(), q.prompt.size(), vocab, d.edits)
                                               : exec::RowDraw{});
  }
  return d;
}

// The next query of q is at position q.computed: it sees keys after computed - reach, and
// the sinks. Blocks wholly before that go back to the pool (once offered to the prefix
// cache, which may still serve them to a later prompt).
Status Driver::drop_behind_window(Sequence& q) {
  if (reach_ == 0) return {};
  int32_t end = static_cast<int32_t>(std::max<int64_t>(q.computed - reach_ + 1, 0) / kv::kBlockTokens);
  if (opts_.prefix_cache) end = std::min(end, q.table.committed_blocks());
  const auto sink_blocks = static_cast<int32_t>((opts_.sinks + kv::kBlockTokens - 1) / kv::kBlockTokens);
  for (int32_t b = std::max(q.dropped_to, sink_blocks); b < end; ++b) {
    Status s = q.table.drop_block(b);
    if (!s) return s;
  }
  q.dropped_to = std::max(q.dropped_to, end);
  return {};
}

Result<std::vector<RowResult>> Driver::step(const std::vector<RowRequest>& rows) {
  if (refused_) return *refused_;
  if (rows.empty()) return invalid_input("driver: a step needs at least one row");
  int64_t t = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Result<Sequence*> s = find(rows[i].seq);
    if (!s) return s.take_error();
    const Sequence& q = **s;
    for (size_t j = 0; j < i; ++j) {
      if (rows[j].seq == rows[i].seq) return invalid_input("driver: sequence ", rows[i].seq, " is in the step twice");
    }
    if (rows[i].tokens < 1 || q.computed + rows[i].tokens > q.table.num_tokens()) {
      return invalid_input("driver: sequence ", rows[i].seq, " has ", q.table.num_tokens() - q.computed,
                           " reserved tokens, the step asks for ", rows[i].tokens);
    }
    t = std::max(t, rows[i].tokens);
  }
  // Shapes in powers of two, so that a few compiled steps serve every batch.
  // (A row never holds more than max_seq_len tokens, so neither does the padded step.)
  const int64_t padded_t = std::min(pow2_at_least(t), max_seq_len_);
  const int64_t padded_rows = pow2_at_least(static_cast<int64_t>(rows.size()));
  Result<StepInput> in = step_input(rows, padded_t, padded_rows);
  if (!in) return in.take_error();
  // Rows that need only their token: a GPU then sends back ids, not a batch of logits.
  std::span<const float> logits;
  std::span<const int32_t> ids;
  const Readback what = readback(rows);
  if (what != Readback::kLogits) {
    Result<std::span<const int32_t>> got = what == Readback::kGreedyIds
                                               ? runner_->run_argmax(in->spec, in->slots)
                                               : runner_->run_sample(in->spec, in->slots, draws_of(rows));
    if (!got) return got.take_error();
    ids = *got;
  } else {
    Result<std::span<const float>> l = runner_->run(in->spec, in->slots);
    if (!l) return l.take_error();
    logits = *l;
  }
  const int64_t vocab = model_.config.vocab;
  std::vector<RowResult> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    Sequence& q = *seqs_.at(rows[r].seq);
    q.computed += rows[r].tokens;
    RowResult res{rows[r].seq, std::nullopt, {}, std::nullopt};
    const bool samples = q.samples_after(0);
    if (logits.empty()) {
      if (samples) res.token = ids[r];
    } else {
      const std::span<const float> row_logits = logits.subspan(r * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      if (opts_.return_logits) res.logits.assign(row_logits.begin(), row_logits.end());
      if (samples && draws_on_device(q)) {
        std::vector<exec::LogitEdit> edits;
        const exec::RowDraw d = q.sampler.device_draw(q.history_read(), q.prompt.size(), static_cast<size_t>(vocab), edits);
        res.token = exec::draw_row(row_logits, d, edits);
      } else if (samples) {
        res.token = q.sampler.sample(row_logits, q.history_read(), q.prompt.size());
        const int top = q.sampler.config().logprobs;
        if (top >= 0) res.logprobs = token_logprobs(row_logits, *res.token, top);
      }
    }
    // Full blocks whose K/V are now all written become findable by later prompts.
    if (opts_.prefix_cache && q.computed == q.table.num_tokens()) {
      Result<int32_t> c = cache_.commit(q.table);
      if (!c) return c.take_error();
    }
    if (Status d = drop_behind_window(q); !d) return d.take_error();
    out.push_back(res);
  }
  return out;
}

Status Driver::commit(const std::vector<RowResult>& results) {
  for (const RowResult& r : results) {
    if (!r.token) continue;
    Result<Sequence*> s = find(r.seq);
    if (!s) return s.take_error();
    Sequence& q = **s;
    q.generated.push_back(*r.token);
    if (static_cast<int64_t>(q.generated.size()) >= q.max_new || *r.token == opts_.eos) q.finished = true;
  }
  return {};
}

Result<std::optional<Suspended>> Driver::release(SeqId id, ReleaseReason why) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return invalid_input("driver: no sequence ", id);
  Sequence& q = *it->second;
  Status s = q.table.release();
  if (!s) return s.take_error();
  std::optional<Suspended> back;
  if (why == ReleaseReason::kPreempted) {
    back = Suspended{std::move(q.prompt), std::move(q.generated), q.max_new, std::move(q.sampler), q.adapter};
  }
  seqs_.erase(it);
  return back;
}

bool Driver::finished(SeqId seq) const {
  const Sequence* q = find(seq);
  return q && q->finished;
}

int64_t Driver::pending_tokens(SeqId seq) const {
  const Sequence* q = find(seq);
  return q ? q->known() - q->computed : 0;
}

int64_t Driver::computed_tokens(SeqId seq) const {
  const Sequence* q = find(seq);
  return q ? q->computed : 0;
}

std::vector<int32_t> Driver::generated(SeqId seq) const {
  const Sequence* q = find(seq);
  return q ? q->generated : std::vector<int32_t>{};
}

int32_t Driver::blocks_needed(SeqId seq, int64_t n) const {
  const Sequence* q = find(seq);
  if (!q) return 0;
  const int64_t beyond = q->computed + n - q->table.num_tokens();
  return beyond > 0 ? q->table.blocks_needed(beyond) : 0;
}

std::vector<SeqId> Driver::sequences() const {
  std::vector<SeqId> ids;
  for (const auto& [id, q] : seqs_) ids.push_back(id);
  return ids;
}

}  // namespace kvf::llm
