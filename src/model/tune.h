// The search behind Model::tune (nanoinfer/tuning.h): per product shape of a model, the split
// rules tried, timed alternately, and the fastest kept only when it beats the default beyond
// the spread.
#pragma once

#include <vector>

#include "model/linear.h"
#include "model/weights.h"
#include "nanoinfer/tuning.h"

namespace nanoinfer {

// The candidate rules for a product (the default first): never split; split always, at 1, 2,
// 4, 8, 16 and 32 chunks per thread (the default's own behaviour skipped); for the fused gate/up
// product also the epilogue at 16 and 256 KiB. Empty with one thread: there is nothing to split.
std::vector<SplitRule> split_candidates(int threads, bool default_splits, bool gate_up);

// Times every distinct product shape of `w` on c.pool under each candidate (c.tuning is
// ignored), `options.rounds` rounds, each candidate once per round in turn.
std::vector<TunedShape> tune_products(const Compute& c, const ModelWeights& w, const TuneOptions& options);

}  // namespace nanoinfer
