// The state behind Model and Sequence (nanoinfer/model.h), shared by the files that implement
// them: model.cpp (the forward pass and the calls) and model_split.cpp (a model split over
// the ranks of a tensor-parallel run, docs/SCALING.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/kernels.h"
#include "model/linear.h"
#include "model/ops.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"
#include "nanoinfer/comm.h"
#include "nanoinfer/error.h"
#include "nanoinfer/model.h"

namespace nanoinfer {

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
  std::unique_ptr<SequenceLedger> ledger;    // rank 0
  mutable StepMessage message;               // under pool_busy (rank 0) or the follower's loop
  mutable std::vector<StepPart> kept_parts;  // layers(): the last layer's packed parts, under pool_busy
  mutable std::vector<float> head_out;       // [rows][local vocab]: this rank's logits
  mutable std::vector<float> gathered;       // rank 0: every rank's logits, rank after rank
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
      const std::span<const StepPart> kept = layers(a, parts, tokens, n);
      for (const StepPart& p : parts) {
        p.seq->cache.commit();
        p.seq->positions_pushed += p.n;
      }
      positions_pushed.fetch_add(n, std::memory_order_relaxed);
      passes.fetch_add(1, std::memory_order_relaxed);
      logits(a, kept, out);
    } catch (...) {
      for (const StepPart& p : parts) p.seq->cache.abort_step();
      if (comm != nullptr) abort_job();
      throw;
    }
  }

  // Split models (model_split.cpp).
  [[noreturn]] void abort_job() const;
  void embed(const int32_t* tokens, size_t n, float* x) const;
  // o_proj and down_proj of a split model are each rank's columns: their outputs are partial
  // sums, added over the ranks in place.
  void reduce(float* y, size_t count) const {
    if (comm != nullptr) comm->allreduce_sum(y, count);
  }
  void announce(std::span<const StepPart> parts, const int32_t* tokens, size_t n, bool head) const;
  void take_freed() const;
  void announce_copy(const Sequence::State& dst, const KvCache& src, size_t from, size_t to) const;
  bool gather_head(const Activations& a, size_t m, float* out) const;

  // embed -> every layer: a.x ends as the residual stream after the last layer, [n][hidden].
  // The last layer's keys and values enter the cache for every row, but only the rows whose
  // logits are wanted (each part's last `out`) go on through its attention, o_proj and
  // feed-forward block: the other rows' outputs would be read by nothing. Those rows are packed
  // toward the front, part after part, and the parts they make are returned (the step's parts
  // unchanged when nothing was dropped). Every row's result is the one it gets unpacked: the
  // kernels do not depend on the rows beside a row. A tap sees every row of every layer, so
  // with a tap set nothing is dropped.
  std::span<const StepPart> layers(Activations& a, std::span<const StepPart> parts, const int32_t* tokens,
                                   size_t n) const {
    float* x = a.x.data();
    embed(tokens, n, x);
    emit_rows(parts, "embed", -1, hidden(), x);
    const size_t last = w.layers.size() - 1;
    for (size_t l = 0; l < last; ++l) layer(a, parts, l, parts, n);
    const std::span<const StepPart> kept = kept_rows(parts);
    size_t m = 0;
    for (const StepPart& p : kept) m += p.n;
    layer(a, parts, last, kept, m);
    return kept;
  }

  // The parts of the rows the last layer carries on: every row, or, when no tap is set, the
  // rows with logits (kept_parts; the rows themselves are moved by layer()).
  std::span<const StepPart> kept_rows(std::span<const StepPart> parts) const {
    size_t n = 0, out = 0;
    for (const StepPart& p : parts) {
      if (p.seq->tap) return parts;
      n += p.n;
      out += p.out;
    }
    if (out == n) return parts;
    kept_parts.clear();
    size_t row = 0;
    for (const StepPart& p : parts) {
      if (p.out == 0) continue;
      kept_parts.push_back({p.seq, row, p.out, p.pos + p.n - p.out, p.out});
      row += p.out;
    }
    return kept_parts;
  }

  // Layer l over the step's rows: the q|k|v product and the cache for every row of `parts`
  // (n rows), and from attention on only the rows of `kept` (m rows: `parts` itself, or the
  // parts' last rows packed to the front by kept_rows()).
  void layer(Activations& a, std::span<const StepPart> parts, size_t l, std::span<const StepPart> kept,
             size_t m) const {
    const size_t H = hidden(), I = inter(), QKV = q_dim() + 2 * kv_dim();
    const size_t n = parts.empty() ? 0 : parts.back().row + parts.back().n;
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    float *x = a.x.data(), *xb = a.xb.data(), *qkv = a.qkv.data(), *q = a.q.data(), *att = a.att.data();
    float *gate_up = a.gate_up.data(), *act = a.act.data();
    const LayerWeights& L = w.layers[l];
    const int il = static_cast<int>(l);

    // Attention block: one q|k|v product for all rows, then each sequence attends over its
    // own cache.
    rmsnorm(x, L.attn_norm, eps, xb, n, H);
    emit_rows(parts, "attn_norm", il, H, xb);
    require_finite(parts, "attn_norm", l, xb, n, H);
    linear(compute, L.qkv, xb, qkv, n);
    require_finite(parts, "qkv", l, qkv, n, QKV);
    const bool packed = kept.data() != parts.data();
    for (size_t i = 0, k = 0; i < parts.size(); ++i) {
      const StepPart& p = parts[i];
      if (!packed) {
        attend(a, p, l, qkv, q, att, p.n, p.row);
      } else if (p.out == 0) {
        attend(a, p, l, qkv, q, att, 0, 0);
      } else {
        const StepPart& to = kept[k++];
        attend(a, p, l, qkv, q, att, p.out, to.row);
        std::memmove(x + to.row * H, x + (p.row + p.n - p.out) * H, p.out * H * sizeof(float));
      }
    }
    if (m == 0) return;
    require_finite(kept, "attn_out", l, att, m, q_dim());
    linear(compute, L.o, nullptr, att, xb, m);
    reduce(xb, m * H);
    add_inplace(x, xb, m * H);
    emit_rows(kept, "attn_residual", il, H, x);
    require_finite(kept, "attn_residual", l, x, m, H);

    // SwiGLU feed-forward block.
    rmsnorm(x, L.ffn_norm, eps, xb, m, H);
    emit_rows(kept, "ffn_norm", il, H, xb);
    require_finite(kept, "ffn_norm", l, xb, m, H);
    linear_swiglu(compute, L.gate_up, xb, gate_up, act, m);
    emit_rows(kept, "ffn_act", il, I, act);
    require_finite(kept, "ffn_act", l, act, m, I);
    linear(compute, L.down, nullptr, act, xb, m);
    reduce(xb, m * H);
    add_inplace(x, xb, m * H);
    emit_rows(kept, "layer_out", il, H, x);
    require_finite(kept, "layer_out", l, x, m, H);
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
  // before they are rotated. Only the part's last `queries` rows attend, their outputs going to
  // att's rows from `to` on (every row, to its own row, but in the last layer: layers()).
  void attend(Activations& a, const StepPart& p, size_t l, const float* qkv, float* q, float* att, size_t queries,
              size_t to) const {
    const size_t Q = q_dim(), KV = kv_dim();
    const AttentionShape shape = attention_shape();
    const int il = static_cast<int>(l);
    Sequence::State& s = *p.seq;
    KvCache& cache = s.cache;
    float* pq = q + p.row * Q;
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
    if (queries == 0) return;
    const KvView view{cache.keys(l), cache.values(l), cache.type(), KV};
    const size_t skipped = p.n - queries;
    float* patt = att + to * Q;
    const auto started = std::chrono::steady_clock::now();
    attention(compute, shape, pq + skipped * Q, view, patt, queries, p.pos + skipped, &s.attention);
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

}  // namespace nanoinfer
