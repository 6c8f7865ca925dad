// A loaded Qwen2 model: configuration, weights (copied out of the safetensors file into
// huge-page memory, in their stored type unless a conversion was asked for: src/weights.h),
// activation buffers sized once from the config, and the thread pool that runs it. The
// forward pass itself lives in src/model.cpp.
//
// Usage:
//   Model model = Model::load("models/qwen2.5-0.5b-instruct");
//   KvCache cache = model.new_cache();
//   auto logits = model.forward(prompt_ids, cache);          // [1][vocab], last position
//   auto next   = model.forward({&token, 1}, cache);         // one decode step
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "nanoinfer/config.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer {

struct ModelOptions {
  // How the matrices are held in memory. AsStored keeps the file's type (bf16 is widened on
  // the fly by the kernels, so a decode step reads half the bytes; f16 is widened); F32 widens
  // every matrix at load (the exact path); BF16 narrows an f32 file at load, rounding to
  // nearest even. Norm weights and biases are always widened to f32 (they are tiny).
  enum class WeightMode { AsStored, F32, BF16 } weights = WeightMode::AsStored;
  int threads = 0;         // 0 = physical cores
  size_t max_context = 0;  // 0 = min(config max_position_embeddings, 4096)
  // Longest chunk pushed through the model at once; longer inputs are split. Sizes the
  // activation buffers: [max_batch][intermediate_size] and friends.
  size_t max_batch = 512;
};

// One named intermediate of the forward pass, handed to a debug tap. Names, in order:
// per layer L (0-based): "attn_norm", "q", "k", "v" (q and k after RoPE), "attn_out" (before
// o_proj), "attn_residual" (stream after o_proj + residual), "ffn_norm", "ffn_act"
// (silu(gate) * up), "layer_out" (stream after down + residual); then, with layer = -1:
// "embed" first and "final_norm" last. Only the positions that are computed are shown: for a
// forward without all_logits, "final_norm" covers the last position only.
struct TapEvent {
  std::string_view name;
  int layer;        // -1 outside the layers
  size_t position;  // position of the first row
  size_t n_tokens;  // rows
  size_t dim;       // floats per row
  const float* data;  // [n_tokens][dim]
};
using Tap = std::function<void(const TapEvent&)>;

class Model {
 public:
  // Reads model_dir/config.json and model_dir/model.safetensors. Throws Error naming a missing
  // file, a missing tensor or a tensor with the wrong shape or type.
  static Model load(const std::filesystem::path& model_dir, const ModelOptions& opts = {});

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const;
  const ModelOptions& options() const;  // with threads and max_context resolved
  size_t vocab_size() const;
  size_t max_context() const;
  DType weight_dtype() const;  // of the big matrices as held in memory (F32 or BF16)

  KvCache new_cache(size_t max_seq = 0) const;  // 0 = options().max_context

  // Pushes tokens at positions cache.length() .. +n through the model, extends the cache and
  // returns logits: [n][vocab] when all_logits, else [1][vocab] for the last token. The span
  // is owned by the model and valid until the next call. Throws Error (before touching the
  // cache) if the tokens would not fit in the cache, an id is out of range, the cache belongs
  // to a different shape of model, or tokens is empty.
  std::span<const float> forward(std::span<const int32_t> tokens, KvCache& cache, bool all_logits = false);

  uint64_t positions_pushed() const;  // work counter: total positions through the model
  size_t bytes_per_token() const;     // weight bytes read per decode step (for GB/s)
  size_t weight_bytes() const;        // bytes of all weights as held in memory

  // Installs (or, with an empty function, removes) a debug tap called with every named
  // intermediate; costs nothing when unset.
  void set_tap(Tap tap);

  ThreadPool& pool();

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanoinfer
