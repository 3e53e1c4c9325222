// How many key splits a decode launch takes (Flash-Decoding): a pure function of the
// launch's shape and the device's, so the rule can be read and tested without a GPU.
#pragma once

namespace kvf::exec::cuda {

struct SplitRuleInput {
  long pairs = 1;      // blocks per split: batch x KV heads x row blocks
  int sms = 1;         // multiprocessors
  int per_sm = 1;      // blocks per SM to fill: resident slots (SIMT) or the balance target (tensor cores)
  double want = 0.9;   // the fill of the last round that is good enough
  int span = 1;        // keys of the longest row
};

// Every block does equal work, so the time goes with the most work any unit gets: the
// fewest splits whose blocks fill their last round of sms x per_sm to `want` (else the best
// fill seen), with chunks of at least 128 keys and at most 8 rounds considered.
int choose_splits(const SplitRuleInput& in);

}  // namespace kvf::exec::cuda
