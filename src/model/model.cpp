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
#include "model/model_impl.h"
#include "model/ops.h"
#include "model/tensor_parallel.h"
#include "model/tune.h"
#include "model/weights.h"
#include "nanoinfer/comm.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {}  // namespace

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
