// Driver: many sequences over one paged KV cache (DESIGN.md §4). It owns the block pool,
// the prefix cache, each sequence's block table and sampler, and steps batches of rows of
// different lengths (prefill chunks and decodes together) through one ModelRunner. It does
// not decide who runs: that is the scheduler's job (scheduler.h). The calls, in order:
//   open(prompt, max_new, sampler) -> a sequence, or NoRoom(blocks needed)
//   reserve(seq, n)                -> blocks for the next n tokens, or NoRoom
//   step(rows)                     -> runs them; a row that reaches the end of what is
//                                     known samples the next token
//   commit(results)                -> appends the sampled tokens, marks finished ones
//   release(seq, reason)           -> gives the blocks back (a preempted sequence's state
//                                     comes back so it can resume by recompute)
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "llm/kv/block_pool.h"
#include "llm/kv/block_table.h"
#include "llm/kv/prefix_cache.h"
#include "llm/sampler.h"
#include "llm/step_runner.h"
#include "models/lora_trace.h"

namespace kvf::llm {

using SeqId = int64_t;

struct DriverOptions {
  int32_t pool_blocks = 256;   // 16-token blocks shared by every sequence
  int64_t max_seq_len = 0;     // longest prompt + generation (the read map's width); 0: the model's context, at most 4096
  DType kv_dtype = DType::kF32;
  ExecutorKind executor = ExecutorKind::kCpu;
  Compute compute = Compute::kAuto;  // what products compute from (RunnerOptions)
  int threads = 0;
  kv::WeightsIdentity identity;  // the weights the K/V come from: prefix hits never cross it
  bool prefix_cache = true;
  int32_t eos = -1;             // a sampled eos finishes the sequence (-1: none)
  // > 0: the StreamingLLM policy: every layer sees the first `sinks` and the last `window`
  // positions. With it, or a model whose every layer slides, blocks behind all windows go
  // back to the pool as a sequence moves on (cache relief, docs/kv.md).
  int64_t window = 0;
  int64_t sinks = 0;
  bool return_logits = false;  // each RowResult carries its row's last-token logits (tests, logprobs)
  // LoRA: the adapters steps hold (outliving the driver); a sequence opened with adapter i
  // (1-based; 0 the base model) computes through adapters[i - 1] and caches its blocks under
  // lora_identity(identity, adapter), so prefix hits never cross adapters.
  const models::LoraSet* lora = nullptr;
  // > 1: every step runs over this many tensor-parallel ranks (llm/parallel_group.h), each holding
  // its share of the weights and its KV heads' pools; the block tables are the driver's, one
  // for all ranks.
  int tp_ranks = 1;
  // > 1 (the CUDA executor): every step runs over this many context-parallel ranks
  // (ParallelGroup::context_parallel), each holding the whole model and its blocks of the
  // pools (pool block b on rank b mod cp_ranks), every attention reading the rank's keys of
  // each row; not with tp_ranks > 1.
  int cp_ranks = 1;
};

// The identity of K/V computed through `adapter` on weights of identity `base`: its content
// hash and its load serial folded in (a reload, even of the same bytes, is a new identity).
kv::WeightsIdentity lora_identity(kv::WeightsIdentity base, const models::LoraAdapter& adapter);

// How far back any layer of `cfg` sees under a StreamingLLM window (0: none): 0 when some
// layer sees the whole sequence, else the widest layer window. Blocks wholly behind it
// (sinks aside) are never read again.
int64_t attention_reach(const models::ModelConfig& cfg, int64_t window);
// The most blocks one sequence of up to `max_len` positions holds at once when steps take
// at most `chunk` of its tokens: all of them, or under windows the sinks' blocks plus a
// window and a chunk (the blocks behind every window go back).
int64_t max_blocks_held(const models::ModelConfig& cfg, int64_t window, int64_t sinks, int64_t max_len, int64_t chunk);

// Not enough free blocks: how many the call needed and how many were free.
struct NoRoom {
  int32_t needed = 0, free = 0;
};

struct Opened {
  std::optional<SeqId> seq;  // empty: no room
  NoRoom no_room;
  int64_t prefix_hit_tokens = 0;
};

// One row of a step: compute the sequence's next `tokens` known tokens (a prefill chunk,
// or 1 for a decode of the last sampled token).
struct RowRequest {
  SeqId seq = -1;
  int64_t tokens = 1;
};

struct RowResult {
  SeqId seq = -1;
  std::optional<int32_t> token;  // sampled when the row reached the end of the known tokens
  std::vector<float> logits;     // with DriverOptions::return_logits: after the row's last token
  std::optional<TokenLogprobs> logprobs;  // with the sampler's logprobs: the sampled token's
};

enum class ReleaseReason { kFinished, kPreempted, kCancelled };

// What a preempted sequence needs to resume: its tokens so far and its sampler (RNG state
// included), so the recomputation continues with exactly the tokens it would have drawn.
struct Suspended {
  std::vector<int32_t> prompt, generated;
  int64_t max_new = 0;
  Sampler sampler{SamplerConfig{}};
  int32_t adapter = 0;
};

class Driver {
 public:
  // A group of ranks that cannot open (tp_config's refusal, an executor without all_reduce)
  // is reported by opened(), and every step and warm_up returns it.
  Driver(const models::Model& model, DriverOptions opts);
  Status opened() const { return refused_ ? Status(*refused_) : Status(); }

  // A new sequence: a prefix-cache hit covers what it can, blocks for the rest of the
  // prompt are allocated now (all or nothing). kInvalidInput for an empty or too long
  // prompt or a token outside the vocabulary.
  // `adapter`: the LoRA adapter it runs with (DriverOptions::lora, 1-based; 0 none);
  // kInvalidInput past the set.
  Result<Opened> open(std::vector<int32_t> prompt, int64_t max_new, SamplerConfig sampler, int32_t adapter = 0);
  // A preempted sequence back: its prompt and generated tokens are the new prompt.
  Result<Opened> resume(Suspended s);
  // Blocks for the sequence's next n known tokens; NoRoom leaves everything as it was.
  Result<std::optional<NoRoom>> reserve(SeqId seq, int64_t n);
  // Runs the rows as one paged step (a sequence at most once, every row reserved).
  Result<std::vector<RowResult>> step(const std::vector<RowRequest>& rows);
  // Appends the sampled tokens; a sequence that reached max_new or eos is finished.
  Status commit(const std::vector<RowResult>& results);
  // Gives the sequence's blocks back. For kPreempted, returns its state for resume().
  Result<std::optional<Suspended>> release(SeqId seq, ReleaseReason why);

  // Compiles the step shapes a server meets most now rather than at their first step:
  // every decode of up to max_rows rows, and a prompt's first chunk of up to max_chunk.
  Status warm_up(int max_rows, int64_t max_chunk);

  // The weights changed (a reload, another adapter): later sequences compute and cache
  // under the new identity, and blocks cached under the old one never serve them.
  void set_identity(kv::WeightsIdentity id) { opts_.identity = id; }
  // The adapter set changed (an adapter loaded, unloaded or reloaded): later steps are traced
  // over `lora`. Refused (kInvalidInput) while a sequence runs with an adapter, whose id
  // could now name another.
  Status set_lora(const models::LoraSet* lora);

  // Queries a scheduler needs.
  bool finished(SeqId seq) const;
  int64_t pending_tokens(SeqId seq) const;  // known tokens whose K/V are not computed yet
  int64_t computed_tokens(SeqId seq) const;
  std::vector<int32_t> generated(SeqId seq) const;
  int32_t blocks_needed(SeqId seq, int64_t n) const;
  int32_t free_blocks() const { return pool_.free_count(); }
  int32_t total_blocks() const { return pool_.num_blocks(); }
  int32_t peak_used_blocks() const { return peak_used_; }  // the most blocks held at once
  int64_t max_seq_len() const { return max_seq_len_; }
  const kv::PrefixCache& prefix_cache() const { return cache_; }
  int64_t state_bytes() const { return runner_->state_bytes(); }
  const ModelRunner& runner() const { return *runner_; }
  std::vector<SeqId> sequences() const;

 private:
  struct Sequence {
    std::vector<int32_t> prompt, generated;
    int64_t max_new = 0;
    Sampler sampler;
    kv::BlockTable table;
    int64_t computed = 0;  // tokens whose K/V are in the pools
    bool finished = false;
    int32_t dropped_to = 0;  // blocks below this, sinks aside, are behind every window
    int32_t adapter = 0;
    int64_t known() const { return static_cast<int64_t>(prompt.size() + generated.size()); }
    int32_t token_at(int64_t i) const;
    // The prompt, then the generated tokens, when the sampler reads them (else empty).
    std::vector<int32_t> history_read() const;
    // Whether computing `tokens` more reaches the last known token: the step samples the next.
    bool samples_after(int64_t tokens) const { return computed + tokens == known() && !finished; }
  };

  Result<Opened> admit(std::vector<int32_t> prompt, std::vector<int32_t> generated, int64_t max_new, Sampler sampler,
                       int32_t adapter);
  kv::WeightsIdentity identity_of(int32_t adapter) const;
  bool has_lora() const;
  Result<Sequence*> find(SeqId seq);
  const Sequence* find(SeqId seq) const;
  models::StepSpec step_spec(int64_t t, int64_t cap, int64_t rows) const;
  // The step of `rows` padded to t tokens and padded_rows rows: its shape and slots.
  struct StepInput {
    models::StepSpec spec;
    exec::SlotValues slots;
  };
  Result<StepInput> step_input(const std::vector<RowRequest>& rows, int64_t t, int64_t padded_rows);
  // What of a step's logits comes back: only the greedy tokens when no row reads more, only
  // the drawn tokens when every sampling row draws where the logits are, else the logits.
  enum class Readback { kGreedyIds, kDrawnIds, kLogits };
  Readback readback(const std::vector<RowRequest>& rows) const;
  // Whether q draws its tokens as exec/row_draw.h does (on the GPU, or on the host from a
  // step whose logits came back for another row); else its Sampler's own walk. Fixed for a
  // sequence's life, so that its tokens do not depend on its batch.
  bool draws_on_device(const Sequence& q) const;
  exec::StepDraws draws_of(const std::vector<RowRequest>& rows);
  Status drop_behind_window(Sequence& q);

  const models::Model& model_;
  DriverOptions opts_;
  int64_t max_seq_len_;
  int64_t reach_;  // attention_reach: 0 keeps every block
  kv::BlockPool pool_;
  kv::PrefixCache cache_;
  std::optional<Error> refused_;         // the group's refusal (tp_ranks > 1), set as runner_ is made
  std::unique_ptr<ModelRunner> runner_;
  std::map<SeqId, std::unique_ptr<Sequence>> seqs_;
  SeqId next_id_ = 0;
  int32_t peak_used_ = 0;
  void note_usage() { peak_used_ = std::max(peak_used_, pool_.num_blocks() - pool_.free_count()); }
};

}  // namespace kvf::llm
