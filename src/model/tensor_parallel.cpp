#include "model/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "model/manifest.h"
#include "nanoinfer/comm.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

// [begin, end) of part r of `units` split as evenly as possible over `size`.
std::pair<size_t, size_t> even_part(size_t units, int r, int size) {
  const auto n = static_cast<size_t>(size), i = static_cast<size_t>(r);
  return {units * i / n, units * (i + 1) / n};
}

size_t block_of(const StoredTensor& t) {
  return t.exact ? weight_type_info(*t.exact).block_elems : 1;
}

// The columns of a matrix's row must split at multiples of its blocks, as stored and as held.
size_t column_grain(const StoredTensor* t, std::optional<WeightType> target) {
  size_t grain = t != nullptr ? block_of(*t) : 1;
  if (target) grain = std::lcm(grain, weight_type_info(*target).block_elems);
  return grain;
}

const StoredTensor* first_of_slot(const WeightSource& src, const ModelConfig& cfg, TensorSlot slot) {
  for (const TensorSpec& spec : tensor_manifest(cfg))
    if (spec.slot == slot && spec.layer == 0) return src.find(spec.name);
  return nullptr;
}

}  // namespace

ShardPlan plan_shards(const ModelConfig& cfg, const WeightSource& src, std::optional<WeightType> target, int rank,
                      int size) {
  ShardPlan p;
  p.rank = rank;
  p.size = size;
  const auto heads = static_cast<size_t>(cfg.num_attention_heads), kv = static_cast<size_t>(cfg.num_key_value_heads);
  const auto head_dim = static_cast<size_t>(cfg.head_dim()), group = heads / kv;
  if (static_cast<size_t>(size) > heads)
    fail("tensor parallelism: {} ranks for {} attention heads (at most one rank per head)", size, heads);
  // Every rank's heads must attend the way they do in the whole model: whole KV groups, or
  // heads of one group (whose KV head the ranks sharing it each hold: replicated).
  for (int r = 0; r < size; ++r) {
    const auto [h0, h1] = even_part(heads, r, size);
    const bool whole_groups = h0 % group == 0 && h1 % group == 0;
    if (!whole_groups && h0 / group != (h1 - 1) / group) {
      fail(
          "tensor parallelism: {} ranks cannot split {} attention heads sharing {} KV head(s): rank {} would hold "
          "heads {}..{} of different KV groups in part; use a rank count that divides {} (docs/SCALING.md)",
          size, heads, kv, r, h0, h1 - 1, kv);
    }
    if (r != rank) continue;
    p.head_begin = h0;
    p.head_end = h1;
    p.kv_begin = h0 / group;
    p.kv_end = (h1 - 1) / group + 1;
  }
  const size_t o_grain = column_grain(first_of_slot(src, cfg, TensorSlot::O), target);
  for (int r = 1; r < size; ++r) {
    const size_t col = even_part(heads, r, size).first * head_dim;
    if (col % o_grain != 0) {
      fail(
          "tensor parallelism: o_proj's blocks of {} columns cannot be cut at head {} (column {}) for {} ranks; "
          "use fewer ranks or a type with smaller blocks (docs/SCALING.md)",
          o_grain, col / head_dim, col, size);
    }
  }
  // The intermediate dimension in whole blocks of down_proj's columns (and whole groups of 16
  // gate/up rows, the packed and interleaved layouts' unit).
  const size_t inter = static_cast<size_t>(cfg.intermediate_size);
  const size_t grain = std::lcm(column_grain(first_of_slot(src, cfg, TensorSlot::Down), target), size_t{16});
  const size_t units = (inter + grain - 1) / grain;
  if (units < static_cast<size_t>(size))
    fail("tensor parallelism: an intermediate size of {} has fewer than {} blocks of {}", inter, size, grain);
  const auto [u0, u1] = even_part(units, rank, size);
  p.inter_begin = u0 * grain;
  p.inter_end = std::min(u1 * grain, inter);
  const size_t vocab = static_cast<size_t>(cfg.vocab_size);
  for (int r = 0; r < size; ++r) {
    const auto [v0, v1] = even_part((vocab + 15) / 16, r, size);
    const size_t begin = v0 * 16, end = std::min(v1 * 16, vocab);
    p.vocab_counts.push_back(end - begin);
    if (r == rank) {
      p.vocab_begin = begin;
      p.vocab_end = end;
    }
  }
  if (p.vocab_end <= p.vocab_begin)
    fail("tensor parallelism: a vocabulary of {} is too small for {} ranks", vocab, size);
  return p;
}

ModelConfig local_config(const ModelConfig& cfg, const ShardPlan& plan) {
  ModelConfig c = cfg;
  c.explicit_head_dim = cfg.head_dim();
  c.num_attention_heads = static_cast<int64_t>(plan.head_end - plan.head_begin);
  c.num_key_value_heads = static_cast<int64_t>(plan.kv_end - plan.kv_begin);
  c.intermediate_size = static_cast<int64_t>(plan.inter_end - plan.inter_begin);
  c.vocab_size = static_cast<int64_t>(plan.vocab_end - plan.vocab_begin);
  return c;
}

namespace {

// Where a sliced tensor's bytes are in the whole one: rows [row, row + rows) and, of each
// row's `row_bytes` bytes, the `bytes` from byte `col`.
struct Cut {
  const StoredTensor* whole;
  size_t row = 0, col = 0, bytes = 0, row_bytes = 0;
};

// The rows [r0, r1) and columns [c0, c1) of slot's tensor (a vector's elements are columns).
struct Range {
  size_t r0, r1, c0, c1;
};

Range range_of(TensorSlot slot, const std::vector<uint64_t>& shape, const ShardPlan& p, size_t head_dim) {
  const size_t rows = static_cast<size_t>(shape[0]), cols = shape.size() > 1 ? static_cast<size_t>(shape[1]) : 0;
  using S = TensorSlot;
  switch (slot) {
    case S::Q:
      return {p.head_begin * head_dim, p.head_end * head_dim, 0, cols};
    case S::K:
    case S::V:
      return {p.kv_begin * head_dim, p.kv_end * head_dim, 0, cols};
    case S::QBias:
      return {0, 1, p.head_begin * head_dim, p.head_end * head_dim};
    case S::KBias:
    case S::VBias:
      return {0, 1, p.kv_begin * head_dim, p.kv_end * head_dim};
    case S::O:
      return {0, rows, p.head_begin * head_dim, p.head_end * head_dim};
    case S::Gate:
    case S::Up:
      return {p.inter_begin, p.inter_end, 0, cols};
    case S::Down:
      return {0, rows, p.inter_begin, p.inter_end};
    case S::Embed:
    case S::LmHead:
      return {p.vocab_begin, p.vocab_end, 0, cols};
    default:
      return shape.size() > 1 ? Range{0, rows, 0, cols} : Range{0, 1, 0, rows};
  }
}

}  // namespace

WeightSource slice_source(const WeightSource& src, const ModelConfig& cfg, const ShardPlan& plan) {
  const size_t head_dim = static_cast<size_t>(cfg.head_dim());
  std::map<std::string, TensorSlot> slots;
  for (const TensorSpec& spec : tensor_manifest(cfg)) slots.emplace(spec.name, spec.slot);
  WeightSource out;
  out.path = src.path;
  out.gguf_names = src.gguf_names;
  out.file_bytes = src.file_bytes;
  out.header_bytes = src.header_bytes;
  out.quantization = src.quantization;
  auto cuts = std::make_shared<std::map<std::string, Cut>>();
  for (const StoredTensor& t : src.tensors) {
    StoredTensor s = t;
    const auto slot = slots.find(t.name);
    if (slot != slots.end() && !t.shape.empty()) {
      const Range r = range_of(slot->second, t.shape, plan, head_dim);
      const bool matrix = t.shape.size() > 1;
      const size_t cols = static_cast<size_t>(t.shape.back());
      // The stored row's bytes per column, in whole blocks (the plan cut at block multiples).
      const size_t block = block_of(t), block_bytes = t.row_bytes / (cols / block);
      const size_t col = r.c0 / block * block_bytes, bytes = (r.c1 - r.c0) / block * block_bytes;
      if (matrix) {
        s.shape = {r.r1 - r.r0, r.c1 - r.c0};
        if (s.stored_shape.size() == 2 && s.stored_type == "U8") s.stored_shape = {r.r1 - r.r0, bytes};
      } else {
        s.shape = {r.c1 - r.c0};
        if (!s.stored_shape.empty()) s.stored_shape = {r.c1 - r.c0};
      }
      s.row_bytes = bytes;
      s.nbytes = (r.r1 - r.r0) * bytes;
      cuts->emplace(t.name, Cut{&t, r.r0, col, bytes, t.row_bytes});
    } else {
      cuts->emplace(t.name, Cut{&t, 0, 0, t.row_bytes, t.row_bytes});
    }
    out.tensors.push_back(std::move(s));
  }
  out.read = [&src, cuts](const StoredTensor& t, uint64_t offset, std::span<std::byte> dst) {
    const Cut& c = cuts->at(t.name);
    if (c.bytes == c.row_bytes || c.bytes == 0) {  // whole rows: one read
      src.read(*c.whole, c.row * c.row_bytes + offset, dst);
      return;
    }
    for (size_t done = 0; done < dst.size();) {
      const size_t at = offset + done, row = at / c.bytes, within = at % c.bytes;
      const size_t n = std::min(c.bytes - within, dst.size() - done);
      src.read(*c.whole, (c.row + row) * c.row_bytes + c.col + within, dst.subspan(done, n));
      done += n;
    }
  };
  out.manifest_infos = out.infos();
  return out;
}

namespace {

struct Fnv {
  uint64_t h = 14695981039346656037ull;
  void bytes(const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  }
  template <typename T>
  void value(const T& v) {
    bytes(&v, sizeof v);
  }
  void text(const std::string& s) {
    value(s.size());
    bytes(s.data(), s.size());
  }
};

}  // namespace

uint64_t model_fingerprint(const ModelConfig& cfg, const WeightSource& src, const ModelOptions& options) {
  Fnv f;
  f.text(cfg.model_type);
  for (int64_t v : {cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers,
                    cfg.num_attention_heads, cfg.num_key_value_heads, cfg.max_position_embeddings, cfg.head_dim()})
    f.value(v);
  f.value(cfg.rope_theta);
  f.value(cfg.rms_norm_eps);
  f.value(cfg.tie_word_embeddings);
  f.value(src.file_bytes);
  for (const StoredTensor& t : src.tensors) {
    f.text(t.name);
    f.text(t.type_name);
    for (uint64_t d : t.shape) f.value(d);
    f.value(t.nbytes);
    std::byte head[64] = {};
    const size_t n = std::min<size_t>(sizeof head, t.nbytes);
    src.read(t, 0, {head, n});
    f.bytes(head, n);
  }
  f.value(options.weights ? static_cast<int>(*options.weights) : -1);
  f.value(static_cast<int>(options.kv_type));
  f.value(options.max_context);
  f.value(options.max_batch);
  f.value(options.fuse_products);
  f.value(options.pack_weights);
  return f.h;
}

}  // namespace nanoinfer

namespace nanoinfer {
namespace {
constexpr size_t kHeaderWords = 12;
}  // namespace

void StepMessage::send(Comm& comm) {
  const size_t payload = parts.size() * 5 + freed.size() + tokens.size();
  wire_.resize(kHeaderWords + payload);
  uint64_t* w = wire_.data();
  const uint64_t header[kHeaderWords] = {static_cast<uint64_t>(op),
                                         head,
                                         parts.size(),
                                         tokens.size(),
                                         freed.size(),
                                         dst,
                                         dst_capacity,
                                         from,
                                         src,
                                         src_capacity,
                                         to,
                                         payload};
  std::copy(header, header + kHeaderWords, w);
  w += kHeaderWords;
  for (const Part& p : parts) {
    for (uint64_t v : {p.id, p.capacity, p.pos, p.n, p.out}) *w++ = v;
  }
  w = std::copy(freed.begin(), freed.end(), w);
  for (int32_t t : tokens) *w++ = static_cast<uint64_t>(static_cast<uint32_t>(t));
  comm.broadcast(wire_.data(), kHeaderWords * sizeof(uint64_t));
  comm.broadcast(wire_.data() + kHeaderWords, payload * sizeof(uint64_t));
}

void StepMessage::receive(Comm& comm) {
  wire_.resize(std::max(wire_.size(), kHeaderWords));
  comm.broadcast(wire_.data(), kHeaderWords * sizeof(uint64_t));
  const uint64_t* h = wire_.data();
  op = static_cast<Op>(h[0]);
  head = h[1] != 0;
  const size_t n_parts = h[2], n_tokens = h[3], n_freed = h[4], payload = h[11];
  dst = h[5], dst_capacity = h[6], from = h[7], src = h[8], src_capacity = h[9], to = h[10];
  if (payload != n_parts * 5 + n_freed + n_tokens) fail("tensor parallelism: a malformed step message from rank 0");
  wire_.resize(kHeaderWords + payload);
  comm.broadcast(wire_.data() + kHeaderWords, payload * sizeof(uint64_t));
  const uint64_t* w = wire_.data() + kHeaderWords;
  parts.resize(n_parts);
  for (Part& p : parts) {
    p = {w[0], w[1], w[2], w[3], w[4]};
    w += 5;
  }
  freed.assign(w, w + n_freed);
  w += n_freed;
  tokens.resize(n_tokens);
  for (int32_t& t : tokens) t = static_cast<int32_t>(static_cast<uint32_t>(*w++));
}

}  // namespace nanoinfer
