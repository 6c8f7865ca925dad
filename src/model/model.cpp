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
// forward never branches on it. Products that read the same input are one call each: q, k
// and v are one stacked matrix (output [n][q | k | v]), and gate and up one interleaved
// matrix whose product applies SwiGLU as it goes (model/linear.h). Activation buffers are
// sized once, at load, for a chunk of up to max_batch tokens; longer inputs are pushed
// through in chunks.
#include "nanoinfer/model.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/linear.h"
#include "model/ops.h"
#include "model/weights.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

constexpr size_t kDefaultMaxContext = 4096;

}  // namespace

// ---- per-sequence state ---------------------------------------------------------------------

struct Sequence::State {
  const void* owner = nullptr;  // the Model::Impl this sequence belongs to
  size_t vocab = 0;
  KvCache cache;
  // Activations for one chunk of up to `rows` tokens, grown to the largest chunk pushed.
  size_t rows = 0;
  std::vector<float> x;        // [rows][hidden]  residual stream
  std::vector<float> xb;       // [rows][hidden]  normed input / projection output
  std::vector<float> qkv;      // [rows][q_dim + 2 kv_dim]  q | k | v, before RoPE
  std::vector<float> q;        // [rows][q_dim]
  std::vector<float> att;      // [rows][q_dim]   attention output, before o_proj
  std::vector<float> gate_up;  // [rows][2 inter] gate and up rows, interleaved (scratch)
  std::vector<float> act;      // [rows][inter]   silu(gate) * up
  std::vector<float> scores;  // [n_heads][capacity]
  std::vector<float> probs;   // [rows][n_heads][keys] attention weights; used only while a tap is set
  // [rows][vocab]: one row, or every position of the largest all_logits request so far
  // (the caller asked for that much output; it is grown, never per token).
  std::vector<float> logits;
  uint64_t positions_pushed = 0;
  Tap tap;

  void emit(std::string_view name, int layer, size_t pos, size_t n, size_t dim, const float* data) const {
    if (tap) tap(TapEvent{name, layer, pos, n, dim, data});
  }
};

Sequence::Sequence() : state_(std::make_unique<State>()) {}
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;
Sequence::~Sequence() = default;
KvCache& Sequence::cache() { return state_->cache; }
const KvCache& Sequence::cache() const { return state_->cache; }
uint64_t Sequence::positions_pushed() const { return state_->positions_pushed; }
void Sequence::set_tap(Tap tap) { state_->tap = std::move(tap); }

// ---- the model ------------------------------------------------------------------------------

struct Model::Impl {
  ModelConfig cfg;
  ModelOptions opts;
  mutable ThreadPool pool;
  Compute compute;
  ModelWeights w;
  Rope rope;
  mutable std::mutex busy;  // one forward at a time: they share the pool
  // Activations of a batched decode step ([batch] rows of each buffer), used under `busy`.
  mutable Sequence::State batch;
  mutable std::vector<Sequence::State*> batch_states;  // decode()'s list, reused under `busy`
  mutable std::atomic<uint64_t> positions_pushed{0};

  Impl(ModelConfig c, const ModelOptions& o) : cfg(std::move(c)), opts(o), pool(o.threads) {}

  size_t hidden() const { return static_cast<size_t>(cfg.hidden_size); }
  size_t q_dim() const { return static_cast<size_t>(cfg.num_attention_heads * cfg.head_dim()); }
  size_t kv_dim() const { return static_cast<size_t>(cfg.kv_dim()); }
  size_t inter() const { return static_cast<size_t>(cfg.intermediate_size); }
  size_t vocab() const { return static_cast<size_t>(cfg.vocab_size); }

  void reserve(Sequence::State& s, size_t n) const {
    if (s.rows >= n) return;
    s.x.resize(n * hidden());
    s.xb.resize(n * hidden());
    s.qkv.resize(n * (q_dim() + 2 * kv_dim()));
    s.q.resize(n * q_dim());
    s.att.resize(n * q_dim());
    s.gate_up.resize(n * 2 * inter());
    s.act.resize(n * inter());
    s.rows = n;
  }

  // One chunk of n <= max_batch tokens at positions cache.length() ...; writes the logits of
  // its last `out_rows` positions (0, 1 or n) to `out`: [out_rows][vocab].
  void forward_chunk(const int32_t* tokens, size_t n, Sequence::State& s, size_t out_rows, float* out) const {
    const size_t H = hidden(), Q = q_dim(), KV = kv_dim(), I = inter();
    KvCache& cache = s.cache;
    const size_t pos = cache.length();
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    const AttentionShape shape{static_cast<size_t>(cfg.num_attention_heads),
                               static_cast<size_t>(cfg.num_key_value_heads), static_cast<size_t>(cfg.head_dim())};
    float *x = s.x.data(), *xb = s.xb.data(), *qkv = s.qkv.data(), *q = s.q.data(), *att = s.att.data();
    float *gate_up = s.gate_up.data(), *act = s.act.data();

    embed_rows(w.embed, tokens, n, x);
    s.emit("embed", -1, pos, n, H, x);

    cache.begin_step(n);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& L = w.layers[l];
      const int il = static_cast<int>(l);

      // Attention block. k and v go into the cache's new rows, and k is rotated there, once:
      // the cache holds keys ready for every later query.
      rmsnorm(x, L.attn_norm, eps, xb, n, H);
      s.emit("attn_norm", il, pos, n, H, xb);
      linear(compute, L.qkv, xb, qkv, n);
      const KvCache::Rows kv = cache.append(l);
      split_qkv(qkv, n, Q, KV, q, kv.k, kv.v);
      rope.apply(q, n, shape.n_heads, pos);
      rope.apply(kv.k, n, shape.n_kv_heads, pos);
      s.emit("q", il, pos, n, Q, q);
      s.emit("k", il, pos, n, KV, kv.k);
      s.emit("v", il, pos, n, KV, kv.v);
      float* probs = nullptr;  // the weights are kept only for a tap: no cost otherwise
      if (s.tap) {
        s.probs.resize(n * shape.n_heads * (pos + n));
        probs = s.probs.data();
      }
      attention(compute, shape, q, cache.keys(l), cache.values(l), att, n, pos, s.scores.data(), probs);
      if (probs) s.emit("attn_weights", il, pos, n, shape.n_heads * (pos + n), probs);
      s.emit("attn_out", il, pos, n, Q, att);
      linear(compute, L.o, nullptr, att, xb, n);
      add_inplace(x, xb, n * H);
      s.emit("attn_residual", il, pos, n, H, x);

      // SwiGLU feed-forward block.
      rmsnorm(x, L.ffn_norm, eps, xb, n, H);
      s.emit("ffn_norm", il, pos, n, H, xb);
      linear_swiglu(compute, L.gate_up, xb, gate_up, act, n);
      s.emit("ffn_act", il, pos, n, I, act);
      linear(compute, L.down, nullptr, act, xb, n);
      add_inplace(x, xb, n * H);
      s.emit("layer_out", il, pos, n, H, x);
    }
    cache.commit();
    s.positions_pushed += n;
    positions_pushed.fetch_add(n, std::memory_order_relaxed);

    // Only the rows whose logits are wanted go through the final norm and the head (for
    // Qwen2.5-0.5B the head is a quarter of the weights).
    if (out_rows == 0) return;
    const size_t first = n - out_rows;
    rmsnorm(x + first * H, w.final_norm, eps, xb, out_rows, H);
    s.emit("final_norm", -1, pos + first, out_rows, H, xb);
    linear(compute, w.lm_head, nullptr, xb, out, out_rows);
  }

  // One decode step of B sequences: token b goes into seqs[b] at its own position. Every
  // matrix is streamed once for the whole batch; attention runs per sequence over its own
  // cache. Each row meets exactly the operations forward() gives it (the kernels are bitwise
  // independent of batching), so each sequence gets the logits it would get alone.
  void decode_batch(Sequence::State* const* seqs, const int32_t* tokens, size_t B) const {
    const size_t H = hidden(), Q = q_dim(), KV = kv_dim(), V = vocab();
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    const AttentionShape shape{static_cast<size_t>(cfg.num_attention_heads),
                               static_cast<size_t>(cfg.num_key_value_heads), static_cast<size_t>(cfg.head_dim())};
    Sequence::State& s = batch;
    reserve(s, B);
    if (s.logits.size() < B * V) s.logits.resize(B * V);
    float *x = s.x.data(), *xb = s.xb.data(), *qkv = s.qkv.data(), *q = s.q.data(), *att = s.att.data();
    float *gate_up = s.gate_up.data(), *act = s.act.data();

    embed_rows(w.embed, tokens, B, x);
    for (size_t b = 0; b < B; ++b) seqs[b]->cache.begin_step(1);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& L = w.layers[l];
      rmsnorm(x, L.attn_norm, eps, xb, B, H);
      linear(compute, L.qkv, xb, qkv, B);
      for (size_t b = 0; b < B; ++b) {
        KvCache& cache = seqs[b]->cache;
        const size_t pos = cache.length();
        const KvCache::Rows rows = cache.append(l);
        split_qkv(qkv + b * (Q + 2 * KV), 1, Q, KV, q + b * Q, rows.k, rows.v);
        rope.apply(q + b * Q, 1, shape.n_heads, pos);
        rope.apply(rows.k, 1, shape.n_kv_heads, pos);
        attention(compute, shape, q + b * Q, cache.keys(l), cache.values(l), att + b * Q, 1, pos,
                  seqs[b]->scores.data());
      }
      linear(compute, L.o, nullptr, att, xb, B);
      add_inplace(x, xb, B * H);
      rmsnorm(x, L.ffn_norm, eps, xb, B, H);
      linear_swiglu(compute, L.gate_up, xb, gate_up, act, B);
      linear(compute, L.down, nullptr, act, xb, B);
      add_inplace(x, xb, B * H);
    }
    for (size_t b = 0; b < B; ++b) {
      seqs[b]->cache.commit();
      seqs[b]->positions_pushed += 1;
    }
    positions_pushed.fetch_add(B, std::memory_order_relaxed);
    rmsnorm(x, w.final_norm, eps, xb, B, H);
    linear(compute, w.lm_head, nullptr, xb, s.logits.data(), B);
    for (size_t b = 0; b < B; ++b) std::memcpy(seqs[b]->logits.data(), s.logits.data() + b * V, V * sizeof(float));
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::filesystem::path& model_dir, const ModelOptions& opts) {
  if (!std::filesystem::is_directory(model_dir)) fail("model directory '{}' does not exist", model_dir.string());
  for (const char* name : {"config.json", "model.safetensors"}) {
    if (!std::filesystem::exists(model_dir / name)) fail("model directory '{}' has no {}", model_dir.string(), name);
  }
  return load(ModelConfig::load(model_dir / "config.json"), model_dir / "model.safetensors", opts);
}

Model Model::load(const ModelConfig& cfg, const std::filesystem::path& weights_file, const ModelOptions& opts) {
  if (opts.max_batch == 0) fail("model options: max_batch must be positive");
  ModelOptions resolved = opts;
  // The ISA is checked before anything else: no code of an unsupported ISA ever runs.
  resolved.isa = opts.isa.value_or(best_isa());
  const kernels::Kernels& table = kernels::table(*resolved.isa);
  if (resolved.max_context == 0) {
    resolved.max_context = std::min(static_cast<size_t>(cfg.max_position_embeddings), kDefaultMaxContext);
  }
  resolved.max_batch = std::min(resolved.max_batch, resolved.max_context);
  auto impl = std::make_unique<Impl>(cfg, resolved);
  impl->opts.threads = static_cast<int>(impl->pool.size());
  impl->compute = Compute{&impl->pool, &table};
  if (weights_file.extension() == ".gguf") {
    const GgufFile file = GgufFile::open(weights_file);
    impl->w = load_weights(gguf_source(file), impl->cfg, resolved.weights, impl->pool, resolved.fuse_products,
                           resolved.pack_weights ? &table : nullptr);
  } else {
    const SafetensorsFile file = SafetensorsFile::open(weights_file);
    impl->w = load_weights(safetensors_source(file), impl->cfg, resolved.weights, impl->pool, resolved.fuse_products,
                           resolved.pack_weights ? &table : nullptr);
  }
  impl->rope = Rope(static_cast<size_t>(cfg.head_dim()), cfg.rope_theta, resolved.max_context);
  return Model(std::move(impl));
}

const ModelConfig& Model::config() const { return impl_->cfg; }
const ModelOptions& Model::options() const { return impl_->opts; }
size_t Model::vocab_size() const { return impl_->vocab(); }
size_t Model::max_context() const { return impl_->opts.max_context; }
WeightType Model::weight_type() const {
  return impl_->w.layers.empty() ? impl_->w.embed.type : impl_->w.layers[0].qkv.parts[0].type;  // q's type
}
WeightType Model::embedding_type() const { return impl_->w.embed.type; }
uint64_t Model::positions_pushed() const { return impl_->positions_pushed.load(std::memory_order_relaxed); }
size_t Model::bytes_per_token() const { return impl_->w.bytes_per_token; }
uint64_t Model::barriers() const { return impl_->pool.joins(); }
size_t Model::weight_bytes() const { return impl_->w.weight_bytes; }
int Model::threads() const { return impl_->opts.threads; }

Sequence Model::new_sequence(size_t max_seq) const {
  const Impl& m = *impl_;
  if (max_seq > m.opts.max_context) {
    fail("a sequence of {} positions exceeds the model's context of {} (raise max_context)", max_seq, m.opts.max_context);
  }
  Sequence seq;
  Sequence::State& s = *seq.state_;
  s.owner = &m;
  s.vocab = m.vocab();
  s.cache = KvCache(m.w.layers.size(), max_seq == 0 ? m.opts.max_context : max_seq, m.kv_dim());
  s.scores.resize(static_cast<size_t>(m.cfg.num_attention_heads) * s.cache.capacity());
  s.logits.resize(m.vocab());
  m.reserve(s, 1);  // decode steps never allocate
  return seq;
}

std::span<const float> Model::forward(std::span<const int32_t> tokens, Sequence& seq, bool all_logits) const {
  const Impl& m = *impl_;
  Sequence::State& s = *seq.state_;
  KvCache& cache = s.cache;
  const size_t n = tokens.size();
  const size_t V = m.vocab();
  if (n == 0) fail("forward: no tokens");
  if (s.owner != &m) fail("forward: the sequence belongs to a different model");
  if (cache.step_open()) fail("forward: the cache has an uncommitted step");
  if (n > cache.capacity() - cache.length()) {
    fail("{} tokens do not fit in the context: {} of {} positions are in use", n, cache.length(), cache.capacity());
  }
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= V) {
      fail("token id {} at index {} is out of range for a vocabulary of {}", tokens[i], i, V);
    }
  }

  const std::lock_guard<std::mutex> lock(m.busy);
  const size_t out_rows = all_logits ? n : 1;
  if (s.logits.size() < out_rows * V) s.logits.resize(out_rows * V);
  m.reserve(s, std::min(n, m.opts.max_batch));
  try {
    for (size_t begin = 0; begin < n; begin += m.opts.max_batch) {
      const size_t count = std::min(m.opts.max_batch, n - begin);
      const bool last = begin + count == n;
      // Intermediate chunks produce logits only when all of them were asked for.
      const size_t rows = all_logits ? count : (last ? 1 : 0);
      m.forward_chunk(tokens.data() + begin, count, s, rows, s.logits.data() + (all_logits ? begin * V : 0));
    }
  } catch (...) {
    cache.abort_step();
    throw;
  }
  return {s.logits.data(), out_rows * V};
}

void Model::decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) const {
  const Impl& m = *impl_;
  if (seqs.size() != tokens.size()) fail("decode: {} sequences but {} tokens", seqs.size(), tokens.size());
  if (seqs.empty()) return;
  const std::lock_guard<std::mutex> lock(m.busy);
  std::vector<Sequence::State*>& states = m.batch_states;  // grown, never per step
  states.clear();
  for (size_t b = 0; b < seqs.size(); ++b) {
    Sequence::State& s = *seqs[b]->state_;
    if (s.owner != &m) fail("decode: sequence {} belongs to a different model", b);
    if (s.cache.step_open()) fail("decode: sequence {} has an uncommitted step", b);
    if (s.cache.length() == s.cache.capacity()) fail("decode: sequence {} is full ({} positions)", b, s.cache.capacity());
    if (tokens[b] < 0 || static_cast<size_t>(tokens[b]) >= m.vocab()) {
      fail("decode: token id {} of sequence {} is out of range for a vocabulary of {}", tokens[b], b, m.vocab());
    }
    for (size_t c = 0; c < b; ++c)
      if (states[c] == &s) fail("decode: sequence {} appears twice in the batch", b);
    states.push_back(&s);
  }
  try {
    m.decode_batch(states.data(), tokens.data(), states.size());
  } catch (...) {
    for (Sequence::State* s : states) s->cache.abort_step();
    throw;
  }
}

std::span<const float> Sequence::logits() const {
  return {state_->logits.data(), state_->vocab};
}

}  // namespace nanoinfer
