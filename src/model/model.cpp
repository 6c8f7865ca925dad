// The forward pass of every supported architecture, in one file (the weights are loaded by
// weights.cpp). The three are one decoder and differ only where marked:
//
//   x = embed[tokens]
//   per layer:  h = rmsnorm(x);  q, k, v = h Wq + bq, h Wk + bk, h Wv + bv   [biases: Qwen2 only]
//               q, k = rmsnorm_per_head(q), rmsnorm_per_head(k)             [Qwen3 only]
//               rope(q), rope(k) (k enters the cache rotated)              [Llama 3: scaled frequencies]
//               a = attention(q, cache);  x += a Wo
//               h = rmsnorm(x);  x += (silu(h Wgate) * h Wup) Wdown
//   logits = rmsnorm(x) Wlm   (Wlm = embed when the embeddings are tied)
//
// What each architecture has is its row of the table in model/config.cpp (ArchitectureInfo)
// and its rows of the tensor manifest (model/manifest.cpp); the forward asks the weights
// (a layer without q_norm skips that step, a q/k/v product without bias adds none) and the
// RoPE table (rope_inv_freq), never the architecture's name.
//
// Every matrix product goes through `linear`, which dispatches on the weight's type; the
// forward never branches on it. Products that read the same input are one call each: q, k
// and v are one stacked matrix (output [n][q | k | v]), and gate and up one interleaved
// matrix whose product applies SwiGLU as it goes (model/linear.h).
//
// The layer loop is written once, for a step of n rows that belong to one or more sequences
// (StepPart): a prefill chunk is n rows of one sequence (longer inputs are pushed through in
// chunks of up to max_batch tokens), a batched decode step one row of each of n sequences (or
// several: a speculative verification pass's pending token and drafts).
// Only attention tells the sequences apart: each part attends over its own cache. A step's
// activations are buffers of its sequence (of the first one, for a batched step), grown to the
// largest step run in them; the Model itself holds nothing that a step writes.
#include "nanoinfer/model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/kernels.h"
#include "model/linear.h"
#include "model/ops.h"
#include "model/tensor_parallel.h"
#include "model/tune.h"
#include "model/weights.h"
#include "nanoinfer/comm.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {}  // namespace

// Rank 0 of a model split over ranks: the ids its sequences go by in step messages, and those
// destroyed since the last message (the followers then drop their mirrors).
struct SequenceLedger {
  std::mutex mutex;
  uint64_t next_id = 1;
  std::vector<uint64_t> freed;
  std::unordered_map<const KvCache*, uint64_t> ids;  // every live sequence's cache
};

// ---- per-sequence state ---------------------------------------------------------------------

// The activations of one step, `rows` tokens' worth of each buffer, grown to the largest step
// run in them and then reused. Every sequence owns one for its own chunks; a batched decode
// step runs in the one of its first sequence (so the Model holds none).
struct Activations {
  size_t rows = 0;
  std::vector<float> x;        // [rows][hidden]  residual stream
  std::vector<float> xb;       // [rows][hidden]  normed input / projection output
  std::vector<float> qkv;      // [rows][q_dim + 2 kv_dim]  q | k | v, before RoPE
  std::vector<float> q;        // [rows][q_dim]
  std::vector<float> k;        // [rows][kv_dim]  rotated, before rounding into the cache
  std::vector<float> v;        // [rows][kv_dim]
  std::vector<float> att;      // [rows][q_dim]   attention output, before o_proj
  std::vector<float> gate_up;  // [rows][2 inter] gate and up rows, interleaved (scratch)
  std::vector<float> act;      // [rows][inter]   silu(gate) * up
};

struct Sequence::State {
  // One sequence's rows in a step: rows [row, row + n) of the activations are its tokens at
  // positions pos .. pos + n - 1, and its last `out` rows (0 .. n) get logits. A prefill chunk
  // is one part of n rows; a batched decode step is one part of one row (or, verifying
  // drafts, a few rows) per sequence; a mixed step (serve) adds prompt chunks as parts whose
  // out is 0, or 1 for a prompt's last chunk.
  struct Part {
    State* seq;
    size_t row;
    size_t n;
    size_t pos;
    size_t out;
  };

  const void* owner = nullptr;  // the Model::Impl this sequence belongs to
  size_t vocab = 0;
  KvCache cache;
  Activations act;           // for its own chunks, and for the batched steps it comes first in
  std::vector<Part> batch;   // the parts of a batched step it comes first in (reused)
  std::vector<float> probs;  // [rows][n_heads][keys] attention weights; used only while a tap is set
  // [rows][vocab]: one row, or every position of the largest all_logits request (or batched
  // step it came first in) so far: the caller asked for that much output; grown, never per token.
  std::vector<float> logits;
  size_t rows = 1;  // logits rows of the last decode step (Sequence::logits)
  uint64_t positions_pushed = 0;
  AttentionWork attention;  // attention's scratch (sized for decode at creation) and K/V rows read
  Tap tap;
  uint64_t id = 0;                   // its name in step messages (rank 0 of a split model)
  SequenceLedger* ledger = nullptr;  // set with id

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (ledger == nullptr) return;
    const std::lock_guard<std::mutex> lock(ledger->mutex);
    ledger->freed.push_back(id);
    ledger->ids.erase(&cache);
  }

  void emit(std::string_view name, int layer, size_t pos, size_t n, size_t dim, const float* data) const {
    if (tap) tap(TapEvent{name, layer, pos, n, dim, data});
  }
};

Sequence::Sequence() : state_(std::make_unique<State>()) {}
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;
Sequence::~Sequence() = default;
KvCache& Sequence::cache() {
  return state_->cache;
}
const KvCache& Sequence::cache() const {
  return state_->cache;
}
uint64_t Sequence::positions_pushed() const {
  return state_->positions_pushed;
}
uint64_t Sequence::kv_rows_read() const {
  return state_->attention.kv_rows_read;
}
uint64_t Sequence::attention_flops() const {
  return state_->attention.flops;
}
double Sequence::attention_seconds() const {
  return static_cast<double>(state_->attention.nanoseconds) * 1e-9;
}
void Sequence::set_tap(Tap tap) {
  state_->tap = std::move(tap);
}

// ---- the model ------------------------------------------------------------------------------

struct Model::Impl {
  using StepPart = Sequence::State::Part;

  ModelConfig cfg;
  ModelOptions opts;
  mutable ThreadPool pool;
  Compute compute;
  ModelWeights w;
  Rope rope;
  // The only state calls share is the thread pool, and it runs one job at a time: calls into
  // the model are serialized here. Everything else a step writes belongs to its sequences.
  mutable std::mutex pool_busy;
  mutable std::atomic<uint64_t> positions_pushed{0};
  mutable std::atomic<uint64_t> passes{0};
  mutable ProductWork product_work;  // counted by linear() on the calling thread, under pool_busy
  // Split over the ranks of a world (docs/SCALING.md): cfg is this rank's slice, full the
  // whole model's. comm is null for a whole model.
  Comm* comm = nullptr;
  ShardPlan shard;
  ModelConfig full;
  std::unique_ptr<SequenceLedger> ledger;  // rank 0
  mutable StepMessage message;             // under pool_busy (rank 0) or the follower's loop
  mutable std::vector<float> head_out;     // [rows][local vocab]: this rank's logits
  mutable std::vector<float> gathered;     // rank 0: every rank's logits, rank after rank
  mutable std::vector<size_t> gather_counts;

  Impl(ModelConfig c, const ModelOptions& o) : cfg(std::move(c)), opts(o), pool(o.threads), full(cfg) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (comm == nullptr || comm->rank() != 0) return;
    message.op = StepMessage::Op::Stop;  // the followers' loops end
    message.parts.clear();
    message.tokens.clear();
    message.send(*comm);
  }

  size_t hidden() const { return static_cast<size_t>(cfg.hidden_size); }
  size_t q_dim() const { return static_cast<size_t>(cfg.q_dim()); }
  size_t kv_dim() const { return static_cast<size_t>(cfg.kv_dim()); }
  size_t inter() const { return static_cast<size_t>(cfg.intermediate_size); }
  size_t vocab() const { return static_cast<size_t>(full.vocab_size); }
  AttentionShape attention_shape() const {
    return {static_cast<size_t>(cfg.num_attention_heads), static_cast<size_t>(cfg.num_key_value_heads),
            static_cast<size_t>(cfg.head_dim())};
  }

  // Hands each part its rows of a step's buffer, data: [n - from][dim], the step's rows from
  // `from` on (the final norm computes only the rows whose logits are wanted).
  static void emit_rows(std::span<const StepPart> parts, std::string_view name, int layer, size_t dim,
                        const float* data, size_t from = 0) {
    for (const StepPart& p : parts) {
      const size_t first = std::max(p.row, from), end = p.row + p.n;
      if (first < end) p.seq->emit(name, layer, p.pos + (first - p.row), end - first, dim, data + (first - from) * dim);
    }
  }

  void reserve(Activations& a, size_t n) const {
    if (a.rows >= n) return;
    a.x.resize(n * hidden());
    a.xb.resize(n * hidden());
    a.qkv.resize(n * (q_dim() + 2 * kv_dim()));
    a.q.resize(n * q_dim());
    a.k.resize(n * kv_dim());
    a.v.resize(n * kv_dim());
    a.att.resize(n * q_dim());
    a.gate_up.resize(n * 2 * inter());
    a.act.resize(n * inter());
    a.rows = n;
  }

  // One step of n tokens in `a` (n <= a.rows), split into the parts' sequences: a prefill chunk
  // of one sequence, one decode token of each of many, or both. Every matrix is streamed once
  // for all n rows; attention runs per part over its own sequence's cache. Each row meets the
  // same operations whichever step it is in (the kernels are bitwise independent of batching),
  // so a sequence gets bitwise the logits it would get alone. Writes the logits of each part's
  // last `out` rows to `out`, part after part: [sum of out][vocab]. On an exception every
  // part's cache step is discarded.
  void step(Activations& a, std::span<const StepPart> parts, const int32_t* tokens, size_t n, float* out) const {
    try {
      for (const StepPart& p : parts) p.seq->cache.begin_step(p.n);
      layers(a, parts, tokens, n);
      for (const StepPart& p : parts) {
        p.seq->cache.commit();
        p.seq->positions_pushed += p.n;
      }
      positions_pushed.fetch_add(n, std::memory_order_relaxed);
      passes.fetch_add(1, std::memory_order_relaxed);
      logits(a, parts, out);
    } catch (...) {
      for (const StepPart& p : parts) p.seq->cache.abort_step();
      if (comm != nullptr) abort_job();
      throw;
    }
  }

  // A split step that failed on one rank cannot go on anywhere: the ranks would wait for each
  // other's collectives. One line, and the job ends.
  [[noreturn]] void abort_job() const {
    std::string what = "unknown error";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::fflush(stdout);
    std::fprintf(stderr, "nanoinfer: error: rank %d: %s (the tensor-parallel job stops)\n", comm->rank(), what.c_str());
    comm->abort(1);
  }

  // The rows of `tokens`: on a split model each rank looks up the rows its slice of the
  // vocabulary holds, zeros elsewhere, and the sum over the ranks is the lookup (exact: every
  // element is one row's value plus zeros).
  void embed(const int32_t* tokens, size_t n, float* x) const {
    if (comm == nullptr) return embed_rows(w.embed, tokens, n, x);
    const size_t H = hidden();
    for (size_t t = 0; t < n; ++t) {
      const auto id = static_cast<size_t>(tokens[t]);
      if (id < shard.vocab_begin || id >= shard.vocab_end) {
        std::fill_n(x + t * H, H, 0.0f);
        continue;
      }
      const auto local = static_cast<int32_t>(id - shard.vocab_begin);
      embed_rows(w.embed, &local, 1, x + t * H);
    }
    comm->allreduce_sum(x, n * H);
  }

  // o_proj and down_proj of a split model are each rank's columns: their outputs are partial
  // sums, added over the ranks in place.
  void reduce(float* y, size_t count) const {
    if (comm != nullptr) comm->allreduce_sum(y, count);
  }

  // Rank 0 of a split model: the step every rank is about to run.
  void announce(std::span<const StepPart> parts, const int32_t* tokens, size_t n, bool head) const {
    message.op = StepMessage::Op::Step;
    message.head = head;
    message.parts.clear();
    for (const StepPart& p : parts) message.parts.push_back({p.seq->id, p.seq->cache.capacity(), p.pos, p.n, p.out});
    message.tokens.assign(tokens, tokens + n);
    take_freed();
    message.send(*comm);
  }

  void take_freed() const {
    const std::lock_guard<std::mutex> lock(ledger->mutex);
    message.freed.swap(ledger->freed);
    ledger->freed.clear();
  }

  // Rank 0 of a split model: dst's cache got positions [from, to) of src's (KvCache::extend_from).
  void announce_copy(const Sequence::State& dst, const KvCache& src, size_t from, size_t to) const {
    const std::lock_guard<std::mutex> lock(pool_busy);
    uint64_t src_id = 0;
    {
      const std::lock_guard<std::mutex> ids(ledger->mutex);
      const auto it = ledger->ids.find(&src);
      src_id = it == ledger->ids.end() ? 0 : it->second;
    }
    if (src_id == 0) {
      std::fprintf(stderr, "nanoinfer: error: a KV cache copy from a cache that is not one of the model's sequences\n");
      comm->abort(1);
    }
    message.op = StepMessage::Op::Copy;
    message.parts.clear();
    message.tokens.clear();
    message.dst = dst.id;
    message.dst_capacity = dst.cache.capacity();
    message.from = from;
    message.src = src_id;
    message.src_capacity = src.capacity();
    message.to = to;
    take_freed();
    message.send(*comm);
  }

  // The head of a split model: this rank's vocabulary rows of the m rows' logits, gathered on
  // rank 0 into out ([m][vocab], each rank's columns in place). False on the other ranks.
  bool gather_head(const Activations& a, size_t m, float* out) const {
    const size_t V = vocab(), local = static_cast<size_t>(cfg.vocab_size);
    if (head_out.size() < m * local) head_out.resize(m * local);
    linear(compute, w.lm_head, nullptr, a.xb.data(), head_out.data(), m);
    gather_counts.resize(shard.vocab_counts.size());
    for (size_t r = 0; r < gather_counts.size(); ++r) gather_counts[r] = m * shard.vocab_counts[r];
    if (comm->rank() == 0 && gathered.size() < m * V) gathered.resize(m * V);
    comm->gather(head_out.data(), gather_counts, gathered.data());
    if (comm->rank() != 0) return false;
    const float* part = gathered.data();
    size_t column = 0;
    for (size_t count : shard.vocab_counts) {
      for (size_t r = 0; r < m; ++r) std::memcpy(out + r * V + column, part + r * count, count * sizeof(float));
      part += m * count;
      column += count;
    }
    return true;
  }

  // embed -> every layer: a.x ends as the residual stream after the last layer, [n][hidden].
  void layers(Activations& a, std::span<const StepPart> parts, const int32_t* tokens, size_t n) const {
    const size_t H = hidden(), I = inter();
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    float *x = a.x.data(), *xb = a.xb.data(), *qkv = a.qkv.data(), *q = a.q.data(), *att = a.att.data();
    float *gate_up = a.gate_up.data(), *act = a.act.data();

    embed(tokens, n, x);
    emit_rows(parts, "embed", -1, H, x);
    const size_t QKV = q_dim() + 2 * kv_dim();
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& L = w.layers[l];
      const int il = static_cast<int>(l);

      // Attention block: one q|k|v product for all rows, then each sequence attends over its
      // own cache.
      rmsnorm(x, L.attn_norm, eps, xb, n, H);
      emit_rows(parts, "attn_norm", il, H, xb);
      require_finite(parts, "attn_norm", l, xb, n, H);
      linear(compute, L.qkv, xb, qkv, n);
      require_finite(parts, "qkv", l, qkv, n, QKV);
      for (const StepPart& p : parts) attend(a, p, l, qkv, q, att);
      require_finite(parts, "attn_out", l, att, n, q_dim());
      linear(compute, L.o, nullptr, att, xb, n);
      reduce(xb, n * H);
      add_inplace(x, xb, n * H);
      emit_rows(parts, "attn_residual", il, H, x);
      require_finite(parts, "attn_residual", l, x, n, H);

      // SwiGLU feed-forward block.
      rmsnorm(x, L.ffn_norm, eps, xb, n, H);
      emit_rows(parts, "ffn_norm", il, H, xb);
      require_finite(parts, "ffn_norm", l, xb, n, H);
      linear_swiglu(compute, L.gate_up, xb, gate_up, act, n);
      emit_rows(parts, "ffn_act", il, I, act);
      require_finite(parts, "ffn_act", l, act, n, I);
      linear(compute, L.down, nullptr, act, xb, n);
      reduce(xb, n * H);
      add_inplace(x, xb, n * H);
      emit_rows(parts, "layer_out", il, H, x);
      require_finite(parts, "layer_out", l, x, n, H);
    }
  }

  // Every activation a layer computes is checked to be finite where it is made: a quantized
  // product rounds its input to integers, and a NaN or infinity rounded there comes out
  // finite, so a model whose finite weights overflow would otherwise give finite garbage
  // logits. One pass over each buffer, a few floats per row against the products' thousands
  // of multiply-adds. Throws Error naming the layer, the intermediate (the tap's name), the
  // value and the position; the step's cache rows are discarded (step()).
  static void require_finite(std::span<const StepPart> parts, std::string_view name, size_t layer, const float* data,
                             size_t n, size_t dim) {
    const size_t at = first_non_finite(data, n * dim);
    if (at == n * dim) return;
    const size_t row = at / dim;
    size_t position = row;
    for (const StepPart& p : parts) {
      if (row >= p.row && row < p.row + p.n) position = p.pos + (row - p.row);
    }
    fail("non-finite activation in layer {} ({} at position {} is {}): the model's weights overflow or are corrupt",
         layer, name, position, data[at]);
  }

  // The rows of one part about to enter the KV cache: an f16 cache saturates a value beyond its
  // range at +-65504 (an infinite key would make every score NaN), which would silently change
  // the attention; such a value is an overflow, reported as require_finite's are.
  void require_cacheable(const StepPart& p, std::string_view name, size_t layer, const float* data, size_t dim) const {
    if (opts.kv_type != DType::F16) return require_finite({&p, 1}, name, layer, data, p.n, dim);
    const size_t at = first_beyond(data, p.n * dim, kF16Overflow);
    if (at == p.n * dim) return;
    if (!std::isfinite(data[at])) require_finite({&p, 1}, name, layer, data, p.n, dim);
    fail(
        "activation in layer {} beyond the f16 KV cache's range ({} at position {} is {:.3g}, the largest f16 is "
        "65504): the model's weights overflow or are corrupt (--kv-type bf16 holds it)",
        layer, name, p.pos + at / dim, data[at]);
  }
  // The smallest magnitude that rounds to infinity in f16 (65504 + half its last step of 32).
  static constexpr float kF16Overflow = 65519.99f;

  // One part's attention in layer l: its k and v rows of qkv are split out (into the step's
  // f32 k and v buffers), k is rotated there, once, and both are rounded into the cache's new
  // rows (the cache holds keys ready for every later query); its q rows are rotated into q and
  // attend over the cache into att. qkv: [n][q_dim + 2 kv_dim]; q, att: [n][q_dim] (only the
  // part's rows are touched). Qwen3 normalizes each head of q and k (RMSNorm over head_dim)
  // before they are rotated.
  void attend(Activations& a, const StepPart& p, size_t l, const float* qkv, float* q, float* att) const {
    const size_t Q = q_dim(), KV = kv_dim();
    const AttentionShape shape = attention_shape();
    const int il = static_cast<int>(l);
    Sequence::State& s = *p.seq;
    KvCache& cache = s.cache;
    float* pq = q + p.row * Q;
    float* patt = att + p.row * Q;
    float* pk = a.k.data() + p.row * KV;
    float* pv = a.v.data() + p.row * KV;

    split_qkv(qkv + p.row * (Q + 2 * KV), p.n, Q, KV, pq, pk, pv);
    const LayerWeights& L = w.layers[l];
    if (L.q_norm != nullptr) {
      const float eps = static_cast<float>(cfg.rms_norm_eps);
      rmsnorm(pq, L.q_norm, eps, pq, p.n * shape.n_heads, shape.head_dim);
      rmsnorm(pk, L.k_norm, eps, pk, p.n * shape.n_kv_heads, shape.head_dim);
    }
    rope.apply(pq, p.n, shape.n_heads, p.pos);
    rope.apply(pk, p.n, shape.n_kv_heads, p.pos);
    require_cacheable(p, "k", l, pk, KV);
    require_cacheable(p, "v", l, pv, KV);
    cache.append(l, pk, pv);
    s.emit("q", il, p.pos, p.n, Q, pq);
    s.emit("k", il, p.pos, p.n, KV, pk);
    s.emit("v", il, p.pos, p.n, KV, pv);
    const KvView view{cache.keys(l), cache.values(l), cache.type(), KV};
    const auto started = std::chrono::steady_clock::now();
    attention(compute, shape, pq, view, patt, p.n, p.pos, &s.attention);
    s.attention.nanoseconds += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count());
    if (s.tap) {  // the weights are computed only for a tap: no cost otherwise
      const size_t keys = p.pos + p.n;
      s.probs.resize(p.n * shape.n_heads * keys);
      attention_weights(compute, shape, pq, view, p.n, p.pos, s.probs.data());
      s.emit("attn_weights", il, p.pos, p.n, shape.n_heads * keys, s.probs.data());
    }
    s.emit("attn_out", il, p.pos, p.n, Q, patt);
  }

  // Only the rows whose logits are wanted (each part's last `out`) go through the final norm,
  // packed part after part into the first rows of xb, and then through the head in one
  // product (for Qwen2.5-0.5B the head is a quarter of the weights; a prompt chunk riding in
  // a decode step wants at most its last row's).
  // out == nullptr: the final norm only (shown to a tap), no head.
  void logits(Activations& a, std::span<const StepPart> parts, float* out) const {
    const size_t H = hidden();
    size_t m = 0;
    for (const StepPart& p : parts) {
      if (p.out == 0) continue;
      const size_t first = p.row + p.n - p.out;  // >= m: rows are packed toward the front only
      rmsnorm(a.x.data() + first * H, w.final_norm, static_cast<float>(cfg.rms_norm_eps), a.xb.data() + m * H, p.out,
              H);
      p.seq->emit("final_norm", -1, p.pos + (p.n - p.out), p.out, H, a.xb.data() + m * H);
      m += p.out;
    }
    if (m == 0 || out == nullptr) return;
    if (comm == nullptr) {
      linear(compute, w.lm_head, nullptr, a.xb.data(), out, m);
    } else if (!gather_head(a, m, out)) {
      return;
    }
    // A row the final norm made non-finite gets NaN logits: a quantized head would round its
    // infinities into finite garbage, and the logits' readers (sampler, perplexity) each
    // report a non-finite logit naming their own step or position.
    for (size_t r = 0; r < m; ++r) {
      if (first_non_finite(a.xb.data() + r * H, H) < H) std::fill_n(out + r * vocab(), vocab(), NAN);
    }
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const ModelConfig& cfg, const WeightSource& weights, const ModelOptions& opts) {
  if (opts.max_batch == 0) fail("model options: max_batch must be positive");
  ModelOptions resolved = opts;
  // The ISA is checked before anything else: no code of an unsupported ISA ever runs. This is
  // the one check (kernels::table refuses what the CPU or the OS does not support).
  resolved.isa = opts.isa.value_or(best_isa());
  const kernels::Kernels& table = kernels::table(*resolved.isa);
  if (!is_kv_type(resolved.kv_type)) fail("model options: the KV cache cannot hold {}", dtype_name(resolved.kv_type));
  if (resolved.max_context == 0) resolved.max_context = static_cast<size_t>(cfg.max_position_embeddings);
  resolved.max_batch = std::min(resolved.max_batch, resolved.max_context);
  auto impl = std::make_unique<Impl>(cfg, resolved);
  impl->opts.threads = static_cast<int>(impl->pool.size());
  impl->compute = Compute{&impl->pool, &table, impl->opts.tuning.get(), nullptr};
  Comm* comm = resolved.tensor_parallel && world().distributed() ? &world() : nullptr;
  if (comm == nullptr) {
    impl->w = load_weights(weights, impl->cfg, resolved.weights, impl->pool, resolved.fuse_products,
                           resolved.pack_weights ? &table : nullptr);
  } else {
    agree_on_model(*comm, cfg, weights, resolved);
    impl->shard = plan_shards(cfg, weights, resolved.weights, comm->rank(), comm->size());
    impl->cfg = local_config(cfg, impl->shard);
    const WeightSource slice = slice_source(weights, cfg, impl->shard);
    impl->w = load_weights(slice, impl->cfg, resolved.weights, impl->pool, resolved.fuse_products,
                           resolved.pack_weights ? &table : nullptr);
    if (comm->rank() == 0) impl->ledger = std::make_unique<SequenceLedger>();
  }
  impl->compute.work = &impl->product_work;  // the forward's products count from here on
  // RoPE's frequencies: the plain rule, scaled by the config's rope_scaling (Llama 3) or, in a
  // Llama GGUF file, divided by its rope_freqs tensor (the same scaling, as llama.cpp stores it).
  const auto* freqs = impl->w.rope_freqs;
  std::vector<double> inv_freq = rope_inv_freq(static_cast<size_t>(cfg.head_dim()), cfg.rope_theta,
                                               freqs != nullptr ? std::nullopt : cfg.rope_scaling);
  for (size_t i = 0; freqs != nullptr && i < inv_freq.size(); ++i) {
    if (!(freqs[i] > 0.0f))
      fail("tensor 'rope_freqs.weight': element {} is {}, expected a positive divisor", i, freqs[i]);
    inv_freq[i] /= static_cast<double>(freqs[i]);
  }
  impl->rope = Rope(inv_freq, resolved.max_context);
  impl->comm = comm;  // last: a load that throws has nothing to tell the other ranks
  return Model(std::move(impl));
}

// Every rank of a split model must hold a slice of the same model under the same options:
// rank 0's fingerprint against each rank's own, and every rank learns whether any differs.
void Model::agree_on_model(Comm& comm, const ModelConfig& cfg, const WeightSource& weights,
                           const ModelOptions& options) {
  const std::vector<std::string> problems = weights.problems(tensor_manifest(cfg));
  if (!problems.empty()) fail("{}: {}", weights.path.string(), problems.front());
  const uint64_t mine = model_fingerprint(cfg, weights, options);
  uint64_t root = mine;
  comm.broadcast(&root, sizeof root);
  if (comm.max(root != mine ? 1 : 0) == 0) return;
  if (root != mine) {
    fail(
        "tensor parallelism: rank {} opened a different model or different flags than rank 0 (fingerprint {:016x}, "
        "rank 0's {:016x}); every rank must run the same command on the same files",
        comm.rank(), mine, root);
  }
  fail(
      "tensor parallelism: another rank opened a different model or different flags than rank 0; every rank must "
      "run the same command on the same files");
}

const ModelConfig& Model::config() const {
  return impl_->full;
}
const ModelOptions& Model::options() const {
  return impl_->opts;
}
size_t Model::vocab_size() const {
  return impl_->vocab();
}
size_t Model::max_context() const {
  return impl_->opts.max_context;
}
WeightType Model::weight_type() const {
  return impl_->w.layers.empty() ? impl_->w.embed.type : impl_->w.layers[0].qkv.parts[0].type;  // q's type
}
WeightType Model::embedding_type() const {
  return impl_->w.embed.type;
}
uint64_t Model::positions_pushed() const {
  return impl_->positions_pushed.load(std::memory_order_relaxed);
}
size_t Model::bytes_per_token() const {
  return impl_->w.bytes_per_token;
}
uint64_t Model::barriers() const {
  return impl_->pool.joins();
}
uint64_t Model::pool_chunks() const {
  return impl_->pool.chunks();
}
uint64_t Model::product_flops() const {
  const std::lock_guard<std::mutex> lock(impl_->pool_busy);
  return impl_->product_work.flops;
}
uint64_t Model::activation_bytes() const {
  const std::lock_guard<std::mutex> lock(impl_->pool_busy);
  return impl_->product_work.activation_bytes;
}
size_t Model::weight_bytes() const {
  return impl_->w.weight_bytes;
}
int Model::threads() const {
  return impl_->opts.threads;
}

std::vector<TunedShape> Model::tune(const TuneOptions& options) const {
  const std::lock_guard<std::mutex> lock(impl_->pool_busy);
  return tune_products(impl_->compute, impl_->w, options);
}

Sequence Model::new_sequence(size_t max_seq) const {
  const Impl& m = *impl_;
  if (max_seq > m.opts.max_context) {
    fail("a sequence of {} positions exceeds the model's context of {} (raise max_context)", max_seq,
         m.opts.max_context);
  }
  Sequence seq;
  Sequence::State& s = *seq.state_;
  s.owner = &m;
  s.vocab = m.vocab();
  s.cache = KvCache(m.w.layers.size(), max_seq == 0 ? m.opts.max_context : max_seq, m.kv_dim(), m.opts.kv_type,
                    KvCache::Pages::huge);
  s.logits.resize(m.vocab());
  m.reserve(s.act, 1);  // decode steps never allocate
  s.attention.scratch.resize(attention_scratch_size(m.compute, m.attention_shape(), 1, s.cache.capacity() - 1));
  if (m.ledger != nullptr) {
    {
      const std::lock_guard<std::mutex> lock(m.ledger->mutex);
      s.id = m.ledger->next_id++;
      m.ledger->ids[&s.cache] = s.id;
    }
    s.ledger = m.ledger.get();
    Sequence::State* dst = &s;
    s.cache.set_copy_listener(
        [&m, dst](const KvCache& src, size_t from, size_t to) { m.announce_copy(*dst, src, from, to); });
  }
  return seq;
}

bool Model::follower() const {
  return impl_->comm != nullptr && impl_->comm->rank() != 0;
}

int Model::ranks() const {
  return impl_->comm != nullptr ? impl_->comm->size() : 1;
}

// A follower's loop: rank 0's messages, each run on mirrors of rank 0's sequences, until the
// message that says rank 0's model is gone.
void Model::follow() const {
  if (!follower()) return;
  const Impl& m = *impl_;
  std::unordered_map<uint64_t, Sequence> mirrors;
  const auto mirror = [&](uint64_t id, uint64_t capacity) -> Sequence::State& {
    auto it = mirrors.find(id);
    if (it == mirrors.end()) it = mirrors.emplace(id, new_sequence(capacity)).first;
    return *it->second.state_;
  };
  StepMessage& msg = m.message;
  for (;;) {
    msg.receive(*m.comm);
    for (uint64_t id : msg.freed) mirrors.erase(id);
    if (msg.op == StepMessage::Op::Stop) return;
    try {
      if (msg.op == StepMessage::Op::Copy) {
        Sequence::State& dst = mirror(msg.dst, msg.dst_capacity);
        const Sequence::State& src = mirror(msg.src, msg.src_capacity);
        if (dst.cache.length() < msg.from) fail("tensor parallelism: a copy into a mirror shorter than rank 0's");
        dst.cache.truncate(msg.from);
        dst.cache.extend_from(src.cache, msg.to);
        continue;
      }
      if (msg.op != StepMessage::Op::Step || msg.parts.empty()) fail("tensor parallelism: an unknown message");
      Sequence::State& first = mirror(msg.parts[0].id, msg.parts[0].capacity);
      std::vector<Sequence::State::Part>& parts = first.batch;
      parts.clear();
      size_t row = 0;
      for (const StepMessage::Part& p : msg.parts) {
        Sequence::State& s = mirror(p.id, p.capacity);
        if (s.cache.length() < p.pos) fail("tensor parallelism: a step past the end of a mirror's cache");
        s.cache.truncate(p.pos);  // rank 0 cut or cleared the sequence since
        parts.push_back({&s, row, p.n, p.pos, p.out});
        row += p.n;
      }
      m.reserve(first.act, row);
      m.step(first.act, parts, msg.tokens.data(), row, msg.head ? first.logits.data() : nullptr);
    } catch (...) {
      m.abort_job();
    }
  }
}

std::span<const float> Model::forward(std::span<const int32_t> tokens, Sequence& seq, bool all_logits) const {
  return push(tokens, seq, all_logits, true);
}

void Model::forward_hidden(std::span<const int32_t> tokens, Sequence& seq) const {
  push(tokens, seq, true, false);
}

std::span<const float> Model::push(std::span<const int32_t> tokens, Sequence& seq, bool all_logits, bool head) const {
  const Impl& m = *impl_;
  Sequence::State& s = *seq.state_;
  const KvCache& cache = s.cache;
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

  const std::lock_guard<std::mutex> lock(m.pool_busy);
  const size_t out_rows = all_logits ? n : 1;
  if (head && s.logits.size() < out_rows * V) s.logits.resize(out_rows * V);
  m.reserve(s.act, std::min(n, m.opts.max_batch));
  for (size_t begin = 0; begin < n; begin += m.opts.max_batch) {
    const size_t count = std::min(m.opts.max_batch, n - begin);
    const bool last = begin + count == n;
    // Intermediate chunks produce logits only when all of them were asked for.
    const size_t rows = all_logits ? count : (last ? 1 : 0);
    const Sequence::State::Part chunk{&s, 0, count, cache.length(), rows};
    if (m.comm != nullptr) m.announce({&chunk, 1}, tokens.data() + begin, count, head);
    m.step(s.act, {&chunk, 1}, tokens.data() + begin, count,
           head ? s.logits.data() + (all_logits ? begin * V : 0) : nullptr);
  }
  if (!head) return {};
  return {s.logits.data(), out_rows * V};
}

void Model::decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens) const {
  if (seqs.size() != tokens.size()) fail("decode: {} sequences but {} tokens", seqs.size(), tokens.size());
  decode_rows(seqs, tokens, nullptr, nullptr);
}

void Model::decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens,
                   std::span<const size_t> counts) const {
  decode(seqs, tokens, counts, counts);  // every row's logits
}

void Model::decode(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, std::span<const size_t> counts,
                   std::span<const size_t> outputs) const {
  if (outputs.size() != counts.size())
    fail("decode: {} token counts but {} output counts", counts.size(), outputs.size());
  for (size_t b = 0; b < outputs.size(); ++b) {
    if (outputs[b] > counts[b])
      fail("decode: sequence {} asks for {} logits rows of its {} tokens", b, outputs[b], counts[b]);
  }
  if (seqs.size() != counts.size()) fail("decode: {} sequences but {} token counts", seqs.size(), counts.size());
  size_t total = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] == 0) fail("decode: sequence {} has no tokens", b);
    total += counts[b];
  }
  if (total != tokens.size()) fail("decode: the counts add up to {} tokens but {} were given", total, tokens.size());
  decode_rows(seqs, tokens, counts.data(), outputs.data());
}

void Model::hidden_states(std::span<Sequence* const> seqs, std::span<const int32_t> tokens,
                          std::span<const size_t> counts, std::span<float> hidden) const {
  if (seqs.size() != counts.size()) fail("hidden_states: {} sequences but {} token counts", seqs.size(), counts.size());
  size_t total = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] == 0) fail("hidden_states: sequence {} has no tokens", b);
    total += counts[b];
  }
  if (total != tokens.size())
    fail("hidden_states: the counts add up to {} tokens but {} were given", total, tokens.size());
  if (hidden.size() != total * impl_->hidden())
    fail("hidden_states: {} floats for {} rows of {}", hidden.size(), total, impl_->hidden());
  decode_rows(seqs, tokens, counts.data(), counts.data(), hidden.data());
}

uint64_t Model::passes() const {
  return impl_->passes.load(std::memory_order_relaxed);
}

// counts: the tokens of each sequence, or null for one each; outputs: the logits rows of each
// (its last), or null for all of its rows. hidden: non-null for hidden_states (every row's final
// norm copied there, no head, no logits).
void Model::decode_rows(std::span<Sequence* const> seqs, std::span<const int32_t> tokens, const size_t* counts,
                        const size_t* outputs, float* hidden) const {
  const Impl& m = *impl_;
  const size_t B = seqs.size(), V = m.vocab(), n = tokens.size();
  if (B == 0) return;
  const auto count = [&](size_t b) -> size_t { return counts ? counts[b] : 1; };
  const auto output = [&](size_t b) -> size_t { return outputs ? outputs[b] : count(b); };
  for (size_t b = 0; b < B; ++b) {
    const Sequence::State& s = *seqs[b]->state_;
    if (s.owner != &m) fail("decode: sequence {} belongs to a different model", b);
    if (s.cache.step_open()) fail("decode: sequence {} has an uncommitted step", b);
    if (count(b) > s.cache.capacity() - s.cache.length()) {
      fail("decode: {} tokens do not fit in sequence {} ({} of {} positions in use)", count(b), b, s.cache.length(),
           s.cache.capacity());
    }
    for (size_t c = 0; c < b; ++c)
      if (seqs[c] == seqs[b]) fail("decode: sequence {} appears twice in the batch", b);
  }
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= V) {
      fail("decode: token id {} at index {} is out of range for a vocabulary of {}", tokens[i], i, V);
    }
  }

  // The step runs in the first sequence's buffers, grown to the batch (then reused), and its
  // logits rows land there, packed part after part; the other sequences' rows are copied to
  // them.
  const std::lock_guard<std::mutex> lock(m.pool_busy);
  Sequence::State& first = *seqs[0]->state_;
  m.reserve(first.act, n);
  size_t out_rows = 0;
  for (size_t b = 0; b < B; ++b) out_rows += output(b);
  if (hidden == nullptr && first.logits.size() < out_rows * V) first.logits.resize(out_rows * V);
  std::vector<Sequence::State::Part>& parts = first.batch;
  parts.clear();
  for (size_t b = 0, row = 0; b < B; row += count(b), ++b) {
    Sequence::State& s = *seqs[b]->state_;
    parts.push_back({&s, row, count(b), s.cache.length(), output(b)});
  }
  if (m.comm != nullptr) m.announce(parts, tokens.data(), n, hidden == nullptr);
  if (hidden != nullptr) {
    m.step(first.act, parts, tokens.data(), n, nullptr);
    std::memcpy(hidden, first.act.xb.data(), n * m.hidden() * sizeof(float));
    return;
  }
  m.step(first.act, parts, tokens.data(), n, first.logits.data());
  size_t packed = 0;  // the logits row of the part's first output
  for (const Sequence::State::Part& p : parts) {
    p.seq->rows = p.out;
    if (p.seq != &first && p.out > 0) {
      if (p.seq->logits.size() < p.out * V) p.seq->logits.resize(p.out * V);
      std::memcpy(p.seq->logits.data(), first.logits.data() + packed * V, p.out * V * sizeof(float));
    }
    packed += p.out;
  }
}

std::span<const float> Sequence::logits() const {
  return {state_->logits.data(), state_->rows * state_->vocab};
}

}  // namespace nanoinfer
