// The transformer's small operations, on f32 activations laid out row per token. The matrix
// products are not here: they go through `linear` (nanoinfer/linear.h), the one seam that
// dispatches on weight type and instruction set.
//
// Each op computes every output element in a fixed order that depends neither on the thread
// count nor on how many tokens are processed together, so results are bitwise reproducible
// across thread counts and cache chunkings.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "model/linear.h"
#include "nanoinfer/config.h"
#include "nanoinfer/dtype.h"

namespace nanoinfer {

// y = x / sqrt(mean(x^2) + eps) * weight, per row. x, y: [n][dim] (may alias); weight: [dim].
void rmsnorm(const float* x, const float* weight, float eps, float* y, size_t n, size_t dim);

// The index of the first element of v[0 .. count) that is NaN or of magnitude above `limit`,
// or count when there is none. One pass over the floats.
size_t first_beyond(const float* v, size_t count, float limit);
// first_beyond with the largest finite float as the limit: the first NaN or infinity.
size_t first_non_finite(const float* v, size_t count);

// x += y, elementwise over count floats.
void add_inplace(float* x, const float* y, size_t count);

// The rows of a q/k/v product, qkv: [n][q_dim | kv_dim | kv_dim], copied apart into
// q: [n][q_dim], k: [n][kv_dim], v: [n][kv_dim] (attention and the cache read them dense).
void split_qkv(const float* qkv, size_t n, size_t q_dim, size_t kv_dim, float* q, float* k, float* v);

// out = silu(gate) * up, elementwise; silu(g) = g / (1 + exp(-g)), on the kernel table's
// vector exp (relative error <= 2^-21, kernels/kernels.h). out may be gate.
void silu_mul(const Compute& c, const float* gate, const float* up, float* out, size_t count);

// Rotary position embedding in the half-split convention of Hugging Face's Qwen2: within each
// head, element i pairs with element i + head_dim/2 and the pair is rotated by the angle
// pos * inv_freq[i], inv_freq[i] = theta^(-2i/head_dim) (rope_inv_freq: Llama 3's scaling
// changes the low frequencies). Angles are computed in double and rounded once.
class Rope {
 public:
  Rope() = default;
  Rope(size_t head_dim, double theta, size_t max_positions);
  // inv_freq: [head_dim / 2] angular frequencies, as rope_inv_freq makes them.
  Rope(const std::vector<double>& inv_freq, size_t max_positions);

  // x: [n][n_heads][head_dim], rows at positions pos0 .. pos0+n-1.
  void apply(float* x, size_t n, size_t n_heads, size_t pos0) const;
  size_t max_positions() const { return max_positions_; }

 private:
  size_t half_ = 0;
  size_t max_positions_ = 0;
  std::vector<float> cos_;  // [max_positions][head_dim/2]
  std::vector<float> sin_;  // [max_positions][head_dim/2]
};

// The frequencies of RoPE for a head of head_dim: theta^(-2i/head_dim) for i < head_dim / 2;
// with Llama 3's scaling (nanoinfer/config.h), by each frequency's wavelength 2 pi / f against
// the original context L: above L / low_freq_factor divided by factor, below
// L / high_freq_factor kept, between them blended: (1 - s) f / factor + s f with
// s = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor).
std::vector<double> rope_inv_freq(size_t head_dim, double theta, const std::optional<RopeScaling>& scaling);

struct AttentionShape {
  size_t n_heads;
  size_t n_kv_heads;  // divides n_heads; KV head h serves query heads h*g .. h*g+g-1
  size_t head_dim;
};

// n_heads * n * (pos0 + n) * head_dim below which attention runs on the calling thread: half
// kMinParallelLinearWork, as each counted step is two multiply-adds (score and weighted sum).
// The default model (4 heads of 64, at most 256 positions) never reaches it.
inline constexpr size_t kMinParallelAttentionWork = kMinParallelLinearWork / 2;

// A layer's cache rows as attention reads them: element (position j, column i) of K at
// k[j * stride + i] (likewise V), in the cache's element type (f32, bf16 or f16).
struct KvView {
  const void* k;
  const void* v;
  DType type;
  size_t stride;  // elements between positions: the cache's kv_dim
};

// Query rows (positions x the heads sharing a KV head) of one attention work unit: a query
// block is max(1, kAttentionQueryRows / group) positions. Each unit reads (and widens) every
// K/V row its last query sees, so larger blocks read the cache fewer times; 128 rows (18
// positions of Qwen2.5-0.5B, ~100 KiB of scratch) against 32 gave pp4096 bf16 ~372-384 against
// ~285-368 tok/s on Zen 5, 2 threads (bench generate -p 4096 -n 16 -r 1, alternated, noisy).
inline constexpr size_t kAttentionQueryRows = 128;
size_t attention_query_block(const AttentionShape& shape);

// Causal grouped-query attention of n queries at positions pos0 .. pos0+n-1 over the keys and
// values at positions 0 .. pos0+n-1 (query i sees keys j <= pos0+i), tiled: the work units are
// (KV head, query block) pairs split across the pool (above kMinParallelAttentionWork), each
// one pass over its keys in blocks with an online softmax (kernels::AttentionTile): the K/V
// rows are read once per query block for all the query heads sharing them, and no buffer of
// scores grows with the context. Per row the result is bitwise independent of n, pos0's
// chunking and the thread count.
//   q:   [n][n_heads][head_dim]
//   kv:  rows 0 .. pos0+n-1 (RoPE applied to K)
//   out: [n][n_heads][head_dim]
//   work: null (scratch allocated for the call), or the caller's scratch, grown to
//         attention_scratch_size and reused (so a decode step allocates nothing), and its
//         counter of the K/V rows the kernels read
struct AttentionWork {
  std::vector<float> scratch;  // one kernels::attention_scratch_floats region per pool chunk
  uint64_t kv_rows_read = 0;   // work counter
  // Work counter: FLOPs of the causal (query head, key) pairs, 4 head_dim each (the score's
  // multiply-adds and the weighted sum's): query row t at position pos0 + t sees pos0 + t + 1 keys.
  uint64_t flops = 0;
  uint64_t nanoseconds = 0;  // wall time in attention, for `bench generate` (the model times it)
};
size_t attention_scratch_size(const Compute& c, const AttentionShape& shape, size_t n, size_t pos0);
void attention(const Compute& c, const AttentionShape& shape, const float* q, const KvView& kv, float* out, size_t n,
               size_t pos0, AttentionWork* work = nullptr);

// The exact path attention had before tiling, kept as its reference: for each (token, head)
// all scores into `scores` ([n_heads][>= pos0+n]), softmax in f32 with the maximum subtracted
// and std::exp, then the weighted sum; f32 keys and values, [>= pos0+n][n_kv_heads][head_dim].
//   probs: null, or [n][n_heads][pos0+n]: the softmax weights, 0 past the causal limit.
void attention_exact(const Compute& c, const AttentionShape& shape, const float* q, const float* keys,
                     const float* values, float* out, size_t n, size_t pos0, float* scores, float* probs = nullptr);

// The weights attention gives each key, for the debug tap: probs [n][n_heads][pos0+n], row
// (t, h) the softmax over keys 0 .. pos0+t of the scores against the cache's rows (widened to
// f32), computed as attention_exact does (f32, maximum subtracted, std::exp); 0 past the causal
// limit. They are the weights the tiled path applies up to its rounding (its exp and its
// blockwise sums), not bit for bit.
void attention_weights(const Compute& c, const AttentionShape& shape, const float* q, const KvView& kv, size_t n,
                       size_t pos0, float* probs);

// The log-softmax of a row of logits [n >= 1], the one every scorer uses (perplexity, KL
// divergence, logprobs, viz): the row's max (a float) and sum(exp(logits - max)) in double.
// log p(x) is computed directly as x - max - log(sum): never the log of a rounded probability.
struct LogSoftmax {
  float max;
  double sum;      // sum of exp(x - max) over the row
  double log_sum;  // log(sum)
  // log p of a logit x of the row
  double at(float x) const { return static_cast<double>(x) - max - log_sum; }
  // log(sum(exp(logits)))
  double logsumexp() const { return max + log_sum; }
};
LogSoftmax log_softmax(const float* logits, size_t n);

// log p(index) under softmax(logits): log_softmax(logits, n).at(logits[index]).
double log_softmax_at(const float* logits, size_t n, size_t index);

}  // namespace nanoinfer
