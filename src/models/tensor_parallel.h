// Tensor parallelism over `size` ranks (Megatron's split): what rank r holds of a model.
//   - q, k, v (and their biases): output rows of whole heads, heads [r·h/size, (r+1)·h/size);
//     o: the input columns of those q heads. Each rank's attention is its heads' alone, and
//     the sum over ranks of o's products is the model's (one all-reduce).
//   - gate, up: output rows [r·f/size, ...); down: the same input columns (one all-reduce).
//   - the token embedding and the classifier: vocabulary rows [r·V/size, ...) rounded to
//     whole rows (a rank's embedding gives zeros for ids outside its rows: an all-reduce
//     adds the one rank's row; the classifier's rows placed at their offset in zeros: an
//     all-reduce gives every rank the whole logits).
//   - norms (and anything else of one axis) whole on every rank.
// A weight of another role (fused projections, experts, latent attention) is refused, as is
// a split that cuts a head count, the feed-forward width or a quantized block unevenly.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "models/model_config.h"
#include "models/weights.h"

namespace kvf::models {

struct TpRank {
  int rank = 0;
  int size = 1;
};

// The vocabulary rows [begin, end) rank r holds (the first vocab % size ranks one more).
std::pair<int64_t, int64_t> tp_vocab_rows(int64_t vocab, TpRank r);

// The rank's view of the config: n_heads, n_kv_heads and hidden_dim divided by size (vocab
// stays the model's: the ids and the gathered logits are the whole vocabulary's), tp_rank
// and tp_size set, so the family's tracer emits the all-reduces. Refuses (kUnsupported) a
// split the model does not allow, naming why: a family whose tracer does not split (the
// registry's tensor_parallel), experts, latent attention, counts that do not divide.
Result<ModelConfig> tp_config(const ModelConfig& c, TpRank r);

// The families whose tracers split, for messages: "llama, mistral, ...".
std::string tp_families();

// The rank's weights under the model's names, each cut as above (copies).
Result<Weights> tp_weights(const ModelConfig& c, const Weights& w, TpRank r);

}  // namespace kvf::models
