// Tensor parallelism (Megatron style, docs/SCALING.md): which slice of a model one rank of a
// world holds, and the model file as that rank's loader sees it.
//
// A rank holds whole attention heads (q rows and the o_proj columns that read them; the KV
// heads those heads attend with), a run of whole quantization blocks of the feed-forward's
// intermediate dimension (gate/up rows, down_proj columns) and a run of vocabulary rows (the
// embedding and the LM head). Norms, RoPE and the rest are replicated. The slice is itself a
// smaller model of the same architecture (local_config): the loader and the forward pass run
// it unchanged; the forward adds one all-reduce after o_proj and one after down_proj, sums
// the embedding rows and gathers the logits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/weight_source.h"
#include "nanoinfer/config.h"
#include "nanoinfer/model.h"

namespace nanoinfer {

struct ShardPlan {
  int rank = 0;
  int size = 1;
  size_t head_begin = 0, head_end = 0;  // attention heads
  size_t kv_begin = 0, kv_end = 0;      // KV heads (shared by ranks whose heads use the same one)
  size_t inter_begin = 0, inter_end = 0;
  size_t vocab_begin = 0, vocab_end = 0;
  std::vector<size_t> vocab_counts;  // [size]: the vocabulary rows of every rank, in rank order
};

// The slice of rank `rank` of `size`. Throws Error naming the reason when the model cannot be
// split so: more ranks than heads, heads of several KV groups that cannot stay together, or
// an o_proj / down_proj whose quantization blocks would be cut (`target`: the type the
// matrices are held in, ModelOptions::weights).
ShardPlan plan_shards(const ModelConfig& cfg, const WeightSource& src, std::optional<WeightType> target, int rank,
                      int size);

// The configuration of the slice: its heads, KV heads, intermediate size and vocabulary.
ModelConfig local_config(const ModelConfig& cfg, const ShardPlan& plan);

// `src` as the slice's loader sees it: every tensor cut to the slice (shapes those of
// local_config), read through `src` (which must outlive it) at the slice's rows and columns.
WeightSource slice_source(const WeightSource& src, const ModelConfig& cfg, const ShardPlan& plan);

// What every rank must agree on: the configuration, every tensor's name, type, shape, size and
// first bytes, the file's size, and the options that change results or shapes. Not the
// thread count or the ISA (a rank's own business).
uint64_t model_fingerprint(const ModelConfig& cfg, const WeightSource& src, const ModelOptions& options);

}  // namespace nanoinfer

namespace nanoinfer {

class Comm;

// What rank 0 tells the other ranks before each step and each cache copy, so that they run the
// same step on their slices (the followers' loop: Model::follow). Sequences are named by ids
// rank 0 gives them; a follower holds a mirror of each, made at its first mention with the
// same capacity. A truncation or clear needs no message: a step names the position it starts
// at, and a mirror longer than that is cut to it. A copy between caches (KvCache::extend_from)
// is a message of its own. Ids of sequences rank 0 destroyed ride along in `freed`.
struct StepMessage {
  enum class Op : uint64_t { Step = 1, Copy = 2, Stop = 3 };
  struct Part {
    uint64_t id, capacity, pos, n, out;
  };
  Op op = Op::Step;
  bool head = true;  // Step: the logits are computed (gathered on rank 0)
  std::vector<Part> parts;
  std::vector<int32_t> tokens;
  std::vector<uint64_t> freed;
  // Copy: positions [from, to) of sequence src into sequence dst (whose length was from).
  uint64_t dst = 0, dst_capacity = 0, from = 0, src = 0, src_capacity = 0, to = 0;

  void send(Comm& comm);     // rank 0
  void receive(Comm& comm);  // every other rank

 private:
  std::vector<uint64_t> wire_;  // reused: a decode step allocates nothing
};

}  // namespace nanoinfer
