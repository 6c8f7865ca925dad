// A loaded Qwen2 model and the sequences that run on it.
//
// The Model is immutable once loaded: configuration, weights (read from the file into one
// huge-page arena, in their stored type or converted/quantized at load: src/model/weights.h),
// RoPE tables, the thread pool and the kernel table of the ISA it was opened with. Everything
// that changes while text is generated — the KV cache, activation buffers, logits, the debug
// tap, work counters — belongs to a Sequence (a batched decode step runs in the buffers of its
// first sequence). Any number of sequences can run on one model; their steps may be
// interleaved freely and each gets bitwise the logits it would get alone. The one thing calls
// share is the model's thread pool, which runs one job at a time, so calls into one model are
// still serialized: a call from another thread waits for the pool, not for any other state.
//
// Usage (models are opened through nanoinfer/open_model.h, which reads each file once):
//   Model model = open_model_alone("models/qwen2.5-0.5b-instruct");
//   Sequence seq = model.new_sequence();
//   auto logits = model.forward(prompt_ids, seq);          // [1][vocab], last position
//   auto next   = model.forward({&token, 1}, seq);         // one decode step
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "nanoinfer/config.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/tuning.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

struct ModelOptions {
  // How the matrices are held in memory: nullopt keeps the file's types (bf16 stays bf16, a
  // quantized file's blocks stay blocks, f16 is widened to f32: there is no f16 kernel). f32
  // or bf16 converts every matrix at load (f32 widens exactly, bf16 rounds to nearest even,
  // blocks are dequantized first). int8/int4 quantize a float file round-to-nearest by the
  // quantization scheme (src/model/quant_scheme.h: the matrix computing the logits in int8),
  // exactly what `nanoinfer quantize --method rtn` writes; a quantized file keeps its blocks.
  // Norm weights and biases are always f32 (they are tiny).
  std::optional<WeightType> weights;
  std::optional<Isa> isa;  // nullopt = best_isa(); an unsupported ISA is refused at load
  int threads = 0;         // 0 = physical cores
  // 0 = the config's max_position_embeddings (32,768 for Qwen2.5). A sequence reserves address
  // space for its whole context and commits KV memory as positions are used (nanoinfer/kv_cache.h).
  size_t max_context = 0;
  // Element type of the KV cache: f16 (the default: half of f32's bytes, 11 significant bits,
  // F16C widening), bf16 (half, 8 significant bits) or f32 (exact: the reference).
  DType kv_type = DType::F16;
  // Longest chunk pushed through the model at once; longer inputs are split. Bounds the
  // activation buffers of a sequence: [max_batch][intermediate_size] and friends.
  size_t max_batch = 512;
  // Lay out q/k/v as one stacked matrix and gate/up as one interleaved matrix where their
  // types allow, so each group is one product (src/model/linear.h). false keeps every matrix
  // apart, as a file mixing types within a group gets them: the logits are bitwise the same
  // (tests hold the two to each other); only the speed differs.
  bool fuse_products = true;
  // Rewrite int8/int4 matrices at load into the layout of the ISA's packed product where it
  // has one (16 rows interleaved block by block; kernels/quant_blocks.h): the same bytes in
  // another order, bitwise the same logits; false keeps the file's row order (for A/B runs).
  bool pack_weights = true;
  // How each product shape is split across the pool (nanoinfer/tuning.h: what `bench tune`
  // measured on this machine, read from its cache by open_model). nullptr: the defaults. Only
  // the split changes, never a result: the logits are bitwise those of the defaults.
  std::shared_ptr<const Tuning> tuning;
  // Under mpirun (a world of more than one rank: nanoinfer/comm.h), split the model over the
  // ranks, tensor-parallel (docs/SCALING.md): rank 0 runs the calls, the others follow (follow()).
  // false keeps the whole model on this rank (a speculative draft, which only rank 0 runs).
  // Without mpirun there is one rank and nothing changes.
  bool tensor_parallel = true;
};

// One named intermediate of the forward pass, handed to a debug tap. Names, in order:
// per layer L (0-based): "attn_norm", "q", "k", "v" (q and k after RoPE), "attn_weights",
// "attn_out" (before o_proj), "attn_residual" (stream after o_proj + residual), "ffn_norm",
// "ffn_act" (silu(gate) * up), "layer_out" (stream after down + residual); then, with
// layer = -1: "embed" first and "final_norm" last. Only the positions that are computed are
// shown: for a forward without all_logits, "final_norm" covers the last position only.
// "attn_weights" has dim = n_heads * K with K = position + n_tokens, the keys of the chunk's
// last row: row t is [n_heads][K], head h's softmax weights over positions 0 .. K-1, exactly
// those that weighted the values; weights past the causal limit (j > position + t) are 0.
// Computing them costs a [n_tokens][n_heads][K] buffer, allocated only while a tap is set.
struct TapEvent {
  std::string_view name;
  int layer;          // -1 outside the layers
  size_t position;    // position of the first row
  size_t n_tokens;    // rows
  size_t dim;         // floats per row
  const float* data;  // [n_tokens][dim]
};
using Tap = std::function<void(const TapEvent&)>;

class Model;
class Comm;          // nanoinfer/comm.h
class WeightSource;  // src/model/weight_source.h: a model file's tensors, whatever its format

// The state of one sequence on a model: its KV cache, activation buffers (grown to the
// largest chunk it has pushed, or the largest batched step it came first in, then reused: a
// decode step allocates nothing), logits, tap and counters. Move-only. Must not outlive the
// model it came from.
class Sequence {
 public:
  Sequence();
  Sequence(Sequence&&) noexcept;
  Sequence& operator=(Sequence&&) noexcept;
  ~Sequence();

  KvCache& cache();
  const KvCache& cache() const;
  size_t length() const { return cache().length(); }  // positions in the cache
  uint64_t positions_pushed() const;                  // work counter: positions through the model
  uint64_t kv_rows_read() const;                      // work counter: K/V rows attention read
  uint64_t attention_flops() const;                   // work counter: 4 head_dim per causal (query head, key) pair
  double attention_seconds() const;                   // wall time its attention took (a timing, not a count)
  // The logits of the last decode() step: [rows][vocab], one row per token the sequence pushed
  // in it. (forward() returns its own span.)
  std::span<const float> logits() const;

  // Installs (or, with an empty function, removes) a debug tap called with every named
  // intermediate of this sequence's forward passes; costs nothing when unset.
  void set_tap(Tap tap);

 private:
  friend class Model;
  struct State;
  std::unique_ptr<State> state_;
};

class Model {
 public:
  // Loads the weights of an opened file (the engine opens it and reads its config once:
  // nanoinfer/open_model.h). The ISA is checked first, before any of its code runs or any weight is
  // read. Throws Error naming a missing tensor or a tensor with the wrong shape or type, or an
  // unsupported ISA.
  static Model load(const ModelConfig& cfg, const WeightSource& weights, const ModelOptions& opts);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const;
  const ModelOptions& options() const;  // with isa, threads and max_context resolved
  Isa isa() const { return *options().isa; }
  size_t vocab_size() const;
  size_t max_context() const;
  WeightType weight_type() const;     // of the layer matrices as held in memory
  WeightType embedding_type() const;  // of the embedding table (and the tied LM head)

  Sequence new_sequence(size_t max_seq = 0) const;  // 0 = options().max_context

  // Pushes tokens at positions seq.length() .. +n through the model, extends the sequence's
  // cache and returns logits: [n][vocab] when all_logits, else [1][vocab] for the last token.
  // The span is owned by the sequence and valid until its next forward. Throws Error (before
  // touching the cache) if the tokens would not fit, an id is out of range, the sequence
  // belongs to a different model, or tokens is empty.
  std::span<const float> forward(std::span<const int32_t> tokens, Sequence& seq, bool all_logits = false) const;
  // forward(tokens, seq, true) without the logits: every position goes through the final norm
  // (a tap sees "final_norm" for all of them) but not through the head. For calibration,
  // which reads the inputs of every matrix, the head's own included, and never the logits
  // (for Qwen2.5-0.5B the head is a quarter of the weights).
  void forward_hidden(std::span<const int32_t> tokens, Sequence& seq) const;

  // One decode step for several sequences at once, the way a server batches concurrent
  // requests: tokens[i] is pushed into *seqs[i] at that sequence's own position, every weight
  // matrix is streamed once for the whole batch, and each sequence's logits (Sequence::logits)
  // are bitwise those forward({&tokens[i], 1}, *seqs[i]) would give. The step's activations
  // are seqs[0]'s buffers, grown to the batch once (so a sequence that often comes first holds
  // [batch] rows of them); each sequence's tap sees its own row. Throws Error before any work
  // if a sequence is full, repeated or from another model.
  void decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) const;
  // The same step with counts[i] >= 1 tokens for *seqs[i] (speculative verification: a
  // sequence's pending token and its drafts), the next counts[i] of `tokens` in order: every
  // weight matrix is still streamed once for all rows, and each sequence's logits
  // (Sequence::logits, [counts[i]][vocab]) are bitwise those forward(its tokens, *seqs[i],
  // true) gives, which are those of pushing its tokens one at a time.
  void decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, std::span<const size_t> counts) const;
  // The general step, of which both are cases: counts[i] >= 1 tokens for *seqs[i], and only the
  // last outputs[i] <= counts[i] of its rows get logits (Sequence::logits: [outputs[i]][vocab],
  // empty for 0). A prompt chunk rides in a decode step this way (serve's mixed steps): its
  // rows go through every weight matrix in the same pass as the decoding sequences' rows (the
  // weights are streamed once for all), it attends over its own cache, and it asks for no
  // logits, or for its last row's when it ends the prompt. Each sequence's logits and cache
  // rows are bitwise what forward() of its tokens alone gives, whatever else rides in the step.
  void decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, std::span<const size_t> counts,
              std::span<const size_t> outputs) const;

  // The same step without the head, for embeddings: counts[i] >= 1 tokens for *seqs[i], every
  // row through every layer and the final norm, written to `hidden` ([tokens][hidden_size],
  // part after part, exactly the "final_norm" rows a tap sees). Several inputs ride in one
  // pass (the weights are streamed once for all); each sequence's cache grows by its rows.
  void hidden_states(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, std::span<const size_t> counts,
                     std::span<float> hidden) const;

  uint64_t positions_pushed() const;  // work counter: positions through the model, all sequences
  // Work counter: forward passes so far (each streams every weight matrix once): one per
  // decode() call, one per chunk of max_batch positions of a forward().
  uint64_t passes() const;
  size_t bytes_per_token() const;  // weight bytes read per decode step (for GB/s)
  // Work counter: thread-pool fork-joins (barriers) so far, loading included; the difference
  // across a decode step is its barrier count (ThreadPool::joins()).
  uint64_t barriers() const;
  // Work counter: the chunks those fork-joins were cut into (ThreadPool::chunks()).
  uint64_t pool_chunks() const;
  // Work counters of the matrix products, all sequences (loading and tune() excluded): FLOPs,
  // 2 per weight per token through it, and activation bytes, the f32 rows each product reads
  // (its input) and writes (its output: q|k|v, o, gate|up's 2 x intermediate, down, logits).
  uint64_t product_flops() const;
  uint64_t activation_bytes() const;
  size_t weight_bytes() const;  // bytes of all weights as held in memory
  int threads() const;

  // Measures, per product shape of this model (q/k/v, o, gate/up, down, logits; decode and
  // prefill), which split of the work across its pool is fastest (nanoinfer/tuning.h). Runs
  // the products on random inputs with the model's own weights; the rules the model was
  // opened with are not used and not changed. Calls into the model wait meanwhile.
  std::vector<TunedShape> tune(const TuneOptions& options) const;

  // Tensor-parallel runs (docs/SCALING.md). Every rank loads its slice (Model::load checks
  // that all ranks opened the same files with the same options, and refuses otherwise). Rank 0
  // is the model the program uses: every call, and every copy between sequences' caches, is
  // first sent to the other ranks, which run the same step on their slices. Those ranks are
  // followers: follow() runs rank 0's steps until rank 0's model is destroyed. A step that
  // fails on any rank ends the whole job with one line (its ranks cannot continue apart).
  bool follower() const;
  void follow() const;
  int ranks() const;  // 1 unless split

 private:
  std::span<const float> push(std::span<const int32_t> tokens, Sequence& seq, bool all_logits, bool head) const;
  void decode_rows(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, const size_t* counts,
                   const size_t* outputs, float* hidden = nullptr) const;
  static void agree_on_model(Comm& comm, const ModelConfig& cfg, const WeightSource& weights,
                             const ModelOptions& options);
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanoinfer
