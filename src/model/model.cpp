// The Qwen2 forward pass, in one file (the weights are loaded by weights.cpp).
//
//   x = embed[tokens]
//   per layer:  h = rmsnorm(x);  q, k, v = h Wq + bq, h Wk + bk, h Wv + bv
//               rope(q), rope(k) (k enters the cache rotated);  a = attention(q, cache)
//               x += a Wo
//               h = rmsnorm(x);  x += (silu(h Wgate) * h Wup) Wdown
//   logits = rmsnorm(x) Wlm   (Wlm = embed when the embeddings are tied)
//
// Every matrix product goes through `linear`, which dispatches on the weight's type; the
// forward never branches on it. Activation buffers are sized once, at load, for a chunk of
// up to max_batch tokens; longer inputs are pushed through in chunks.
#include "nanoinfer/model.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "nanoinfer/error.h"
#include "model/linear.h"
#include "model/ops.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace nanoinfer {
namespace {

constexpr size_t kDefaultMaxContext = 4096;

}  // namespace

struct Model::Impl {
  ModelConfig cfg;
  ModelOptions opts;
  ThreadPool pool;
  ModelWeights w;
  Rope rope;

  // Activations for one chunk of up to max_batch tokens.
  std::vector<float> x;       // [max_batch][hidden]  residual stream
  std::vector<float> xb;      // [max_batch][hidden]  normed input / projection output
  std::vector<float> q;       // [max_batch][q_dim]
  std::vector<float> att;     // [max_batch][q_dim]   attention output, before o_proj
  std::vector<float> gate;    // [max_batch][inter]
  std::vector<float> up;      // [max_batch][inter]
  std::vector<float> scores;  // [n_heads][max_context]
  // [rows][vocab]: one row, or every position of the largest all_logits request so far
  // (the caller asked for that much output; it is grown, never per token).
  std::vector<float> logits;

  uint64_t positions_pushed = 0;
  Tap tap;

  Impl(ModelConfig c, const ModelOptions& o) : cfg(std::move(c)), opts(o), pool(o.threads) {}

  size_t hidden() const { return static_cast<size_t>(cfg.hidden_size); }
  size_t q_dim() const { return static_cast<size_t>(cfg.num_attention_heads * cfg.head_dim()); }
  size_t kv_dim() const { return static_cast<size_t>(cfg.kv_dim()); }
  size_t inter() const { return static_cast<size_t>(cfg.intermediate_size); }
  size_t vocab() const { return static_cast<size_t>(cfg.vocab_size); }

  void allocate() {
    const size_t B = opts.max_batch;
    x.resize(B * hidden());
    xb.resize(B * hidden());
    q.resize(B * q_dim());
    att.resize(B * q_dim());
    gate.resize(B * inter());
    up.resize(B * inter());
    scores.resize(static_cast<size_t>(cfg.num_attention_heads) * opts.max_context);
    logits.resize(vocab());
    rope = Rope(static_cast<size_t>(cfg.head_dim()), cfg.rope_theta, opts.max_context);
  }

  void emit(std::string_view name, int layer, size_t pos, size_t n, size_t dim, const float* data) const {
    if (tap) tap(TapEvent{name, layer, pos, n, dim, data});
  }

  // out: [n][hidden], the embedding rows of the tokens, widened to f32.
  void embed_rows(const int32_t* tokens, size_t n, float* out) const {
    const size_t H = hidden();
    for (size_t t = 0; t < n; ++t) {
      const size_t row = static_cast<size_t>(tokens[t]) * H;
      float* dst = out + t * H;
      if (w.embed.dtype == DType::BF16) {
        const auto* src = static_cast<const uint16_t*>(w.embed.data) + row;
        for (size_t i = 0; i < H; ++i) dst[i] = bf16_to_f32(src[i]);
      } else {
        std::memcpy(dst, static_cast<const float*>(w.embed.data) + row, H * sizeof(float));
      }
    }
  }

  // One chunk of n <= max_batch tokens at positions cache.length() ...; writes the logits of
  // its last `out_rows` positions (0, 1 or n) to `out`: [out_rows][vocab].
  void forward_chunk(const int32_t* tokens, size_t n, KvCache& cache, size_t out_rows, float* out) {
    const size_t H = hidden(), Q = q_dim(), KV = kv_dim(), I = inter();
    const size_t pos = cache.length();
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    const AttentionShape shape{static_cast<size_t>(cfg.num_attention_heads),
                               static_cast<size_t>(cfg.num_key_value_heads), static_cast<size_t>(cfg.head_dim())};

    embed_rows(tokens, n, x.data());
    emit("embed", -1, pos, n, H, x.data());

    cache.begin_step(n);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& L = w.layers[l];
      const int il = static_cast<int>(l);

      // Attention block. k and v are projected straight into the cache's new rows, and k is
      // rotated there, once: the cache holds keys ready for every later query.
      rmsnorm(x.data(), L.attn_norm, eps, xb.data(), n, H);
      emit("attn_norm", il, pos, n, H, xb.data());
      const KvCache::Rows kv = cache.append(l);
      linear(pool, L.q, L.q_bias, xb.data(), q.data(), n);
      linear(pool, L.k, L.k_bias, xb.data(), kv.k, n);
      linear(pool, L.v, L.v_bias, xb.data(), kv.v, n);
      rope.apply(q.data(), n, shape.n_heads, pos);
      rope.apply(kv.k, n, shape.n_kv_heads, pos);
      emit("q", il, pos, n, Q, q.data());
      emit("k", il, pos, n, KV, kv.k);
      emit("v", il, pos, n, KV, kv.v);
      attention(pool, shape, q.data(), cache.keys(l), cache.values(l), att.data(), n, pos, scores.data());
      emit("attn_out", il, pos, n, Q, att.data());
      linear(pool, L.o, nullptr, att.data(), xb.data(), n);
      add_inplace(x.data(), xb.data(), n * H);
      emit("attn_residual", il, pos, n, H, x.data());

      // SwiGLU feed-forward block.
      rmsnorm(x.data(), L.ffn_norm, eps, xb.data(), n, H);
      emit("ffn_norm", il, pos, n, H, xb.data());
      linear(pool, L.gate, nullptr, xb.data(), gate.data(), n);
      linear(pool, L.up, nullptr, xb.data(), up.data(), n);
      silu_mul_inplace(gate.data(), up.data(), n * I);
      emit("ffn_act", il, pos, n, I, gate.data());
      linear(pool, L.down, nullptr, gate.data(), xb.data(), n);
      add_inplace(x.data(), xb.data(), n * H);
      emit("layer_out", il, pos, n, H, x.data());
    }
    cache.commit();
    positions_pushed += n;

    // Only the rows whose logits are wanted go through the final norm and the head (for
    // Qwen2.5-0.5B the head is a quarter of the weights).
    if (out_rows == 0) return;
    const size_t first = n - out_rows;
    rmsnorm(x.data() + first * H, w.final_norm, eps, xb.data(), out_rows, H);
    emit("final_norm", -1, pos + first, out_rows, H, xb.data());
    linear(pool, w.lm_head, nullptr, xb.data(), out, out_rows);
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::filesystem::path& model_dir, const ModelOptions& opts) {
  const auto config_path = model_dir / "config.json";
  const auto weights_path = model_dir / "model.safetensors";
  if (!std::filesystem::is_directory(model_dir)) fail("model directory '{}' does not exist", model_dir.string());
  if (!std::filesystem::exists(config_path)) fail("model directory '{}' has no config.json", model_dir.string());
  if (!std::filesystem::exists(weights_path)) {
    fail("model directory '{}' has no model.safetensors", model_dir.string());
  }
  ModelConfig cfg = ModelConfig::load(config_path);
  if (opts.max_batch == 0) fail("model options: max_batch must be positive");

  ModelOptions resolved = opts;
  if (resolved.max_context == 0) {
    resolved.max_context = std::min(static_cast<size_t>(cfg.max_position_embeddings), kDefaultMaxContext);
  }
  resolved.max_batch = std::min(resolved.max_batch, resolved.max_context);
  auto impl = std::make_unique<Impl>(std::move(cfg), resolved);
  impl->opts.threads = impl->pool.size();
  // The file is mapped only while its tensors are copied out (see weights.h for why).
  impl->w = load_weights(SafetensorsFile::open(weights_path), impl->cfg, resolved.weights, impl->pool);
  impl->allocate();
  return Model(std::move(impl));
}

const ModelConfig& Model::config() const { return impl_->cfg; }
const ModelOptions& Model::options() const { return impl_->opts; }
size_t Model::vocab_size() const { return impl_->vocab(); }
size_t Model::max_context() const { return impl_->opts.max_context; }
DType Model::weight_dtype() const { return impl_->w.layers.empty() ? impl_->w.embed.dtype : impl_->w.layers[0].q.dtype; }
uint64_t Model::positions_pushed() const { return impl_->positions_pushed; }
size_t Model::bytes_per_token() const { return impl_->w.bytes_per_token; }
size_t Model::weight_bytes() const { return impl_->w.weight_bytes; }
void Model::set_tap(Tap tap) { impl_->tap = std::move(tap); }
ThreadPool& Model::pool() { return impl_->pool; }

KvCache Model::new_cache(size_t max_seq) const {
  if (max_seq > impl_->opts.max_context) {
    fail("a cache of {} positions exceeds the model's context of {} (raise max_context)", max_seq,
         impl_->opts.max_context);
  }
  return KvCache(impl_->w.layers.size(), max_seq == 0 ? impl_->opts.max_context : max_seq, impl_->kv_dim());
}

std::span<const float> Model::forward(std::span<const int32_t> tokens, KvCache& cache, bool all_logits) {
  Impl& m = *impl_;
  const size_t n = tokens.size();
  const size_t V = m.vocab();
  if (n == 0) fail("forward: no tokens");
  if (cache.n_layers() != m.w.layers.size() || cache.kv_dim() != m.kv_dim()) {
    fail("forward: the cache has {} layers of width {}, the model {} of width {}", cache.n_layers(),
         cache.kv_dim(), m.w.layers.size(), m.kv_dim());
  }
  if (cache.step_open()) fail("forward: the cache has an uncommitted step");
  if (n > cache.capacity() - cache.length()) {
    fail("{} tokens do not fit in the context: {} of {} positions are in use", n, cache.length(),
         cache.capacity());
  }
  if (cache.length() + n > m.rope.max_positions()) {
    fail("positions up to {} exceed the model's context of {}", cache.length() + n, m.rope.max_positions());
  }
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= V) {
      fail("token id {} at index {} is out of range for a vocabulary of {}", tokens[i], i, V);
    }
  }

  const size_t out_rows = all_logits ? n : 1;
  if (m.logits.size() < out_rows * V) m.logits.resize(out_rows * V);
  try {
    for (size_t begin = 0; begin < n; begin += m.opts.max_batch) {
      const size_t count = std::min(m.opts.max_batch, n - begin);
      const bool last = begin + count == n;
      // Intermediate chunks produce logits only when all of them were asked for.
      const size_t rows = all_logits ? count : (last ? 1 : 0);
      m.forward_chunk(tokens.data() + begin, count, cache, rows, m.logits.data() + (all_logits ? begin * V : 0));
    }
  } catch (...) {
    cache.abort_step();
    throw;
  }
  return {m.logits.data(), out_rows * V};
}

}  // namespace nanoinfer
