#include "model/weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "kernels/kernels.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

// ---- WeightArena ------------------------------------------------------------------------------

namespace {

constexpr size_t kAlign = 64;  // a cache line, and a whole AVX-512 register
constexpr size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

WeightArena::WeightArena(size_t capacity) : capacity_(round_up(capacity, 4096)) {
  if (capacity_ == 0) return;
  void* p = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {} MiB for the weights", capacity_ >> 20);
  // Advice only: without transparent huge pages the arena still works, on 4 KiB pages.
  madvise(p, capacity_, MADV_HUGEPAGE);
  base_ = static_cast<std::byte*>(p);
}

WeightArena::WeightArena(WeightArena&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      used_(std::exchange(other.used_, 0)) {}

WeightArena& WeightArena::operator=(WeightArena&& other) noexcept {
  if (this != &other) {
    this->~WeightArena();
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    used_ = std::exchange(other.used_, 0);
  }
  return *this;
}

WeightArena::~WeightArena() {
  if (base_ != nullptr) munmap(base_, capacity_);
}

std::byte* WeightArena::take(size_t bytes) {
  const size_t size = round_up(bytes, kAlign);
  if (size > capacity_ - used_) fail("weight arena: {} bytes requested, {} of {} in use", bytes, used_, capacity_);
  std::byte* p = base_ + used_;
  used_ += size;
  return p;
}

// ---- loading ----------------------------------------------------------------------------------

namespace {

// Bytes of source read per pread: large enough to stream at page-cache speed, small enough
// that the per-thread staging buffers stay negligible next to the weights.
constexpr size_t kChunkBytes = size_t{8} << 20;

// Every weight of a row (float types) or every block scale (block types) is finite.
bool rows_finite(WeightType type, const std::byte* row, size_t cols) {
  return weight_type_info(type).finite_row(row, cols);
}

class Loader {
 public:
  Loader(const WeightSource& src, const ModelConfig& cfg, std::optional<WeightType> target, bool fuse,
         const kernels::Kernels* pack_for, ThreadPool& pool, ModelWeights& out)
      : src_(src), cfg_(cfg), fuse_(fuse), pack_for_(pack_for), target_(target), pool_(pool), out_(out) {
    // llama.cpp's converter permutes a Llama checkpoint's q and k rows for its adjacent-pair
    // RoPE; the forward rotates Hugging Face's half-split pairs, so they are put back.
    if (src.gguf_names && cfg.architecture == Architecture::Llama)
      permuted_head_dim_ = static_cast<size_t>(cfg.head_dim());
    for (const StoredTensor& t : src.tensors)
      if (!t.exact || weight_type_info(*t.exact).quantized) quantized_file_ = true;
  }

  // The type a matrix is stored in when the engine has it: every GGUF block type the reader
  // takes is a weight type (held as it is), and f16 widens to f32.
  static WeightType stored_type(const StoredTensor& t) {
    if (t.exact) return *t.exact;
    if (t.type_name != "F16") fail("tensor type {} has no weight type", t.type_name);
    return WeightType::F32;
  }

  // The type a matrix is held in: the stored one unless a target is asked for. A quantized
  // target follows the quantization scheme (model/quant_scheme.h: the tied embedding/LM head
  // stays int8) on a float file; on an already quantized file every matrix stays as stored,
  // since requantizing blocks could only add error.
  WeightType type_for(const TensorSpec& spec, const StoredTensor& t) const {
    if (!target_) return stored_type(t);
    if (!weight_type_info(*target_).quantized) return *target_;
    return quantized_file_ ? stored_type(t) : scheme_type(spec, *target_, cfg_.tie_word_embeddings);
  }

  // Arena bytes for the tensors that will be loaded.
  size_t arena_bytes(const std::vector<const TensorSpec*>& specs) const {
    size_t total = 0;
    for (const TensorSpec* spec : specs) {
      const StoredTensor& t = checked(spec->name);
      const size_t bytes = spec->is_matrix()
                               ? static_cast<size_t>(t.shape[0]) * weight_row_bytes(type_for(*spec, t), t.shape[1])
                               : static_cast<size_t>(t.shape[0]) * sizeof(float);
      total += round_up(bytes, kAlign);
    }
    return total;
  }

  // The type a matrix is held in.
  WeightType held_type(const TensorSpec& spec) const { return type_for(spec, checked(spec.name)); }

  // A matrix in its own arena block; packed for the kernels unless `for_products` is false
  // (an embedding table that is not also the head is only ever looked up).
  Weight matrix(const TensorSpec& spec, bool for_products = true) {
    const StoredTensor& t = checked(spec.name);
    const WeightType to = type_for(spec, t);
    const size_t rows = static_cast<size_t>(t.shape[0]), cols = static_cast<size_t>(t.shape[1]);
    Weight w{to, nullptr, rows, cols, weight_row_bytes(to, cols)};
    std::byte* dst = out_.arena.take(w.bytes());
    read_rows(spec, to, dst, placement(spec));
    w.data = dst;
    if (for_products) pack(w, dst);
    return w;
  }

  // Rewrites w (at dst) in the packed layout when the kernel table has a packed product for
  // its type: a quantized type's (kernels/quant_blocks.h), every whole group of 16 rows, or
  // the float one of f32 and bf16 (kernels.h) where the shape allows it; across the pool.
  void pack(Weight& w, std::byte* dst) {
    if (pack_for_ == nullptr || !pack_for_->packs(w.type, w.rows, w.cols)) return;
    if (w.type == WeightType::F32 || w.type == WeightType::BF16) {
      const size_t groups = w.rows / kernels::kFloatPackRows, group_bytes = kernels::kFloatPackRows * w.row_bytes;
      pool_.parallel_for(groups, 1, [&](size_t begin, size_t end) {
        kernels::pack_float(dst + begin * group_bytes, (end - begin) * kernels::kFloatPackRows, w.row_bytes);
      });
      w.packed = true;
      return;
    }
    const size_t groups = w.rows / kernels::kPackRows, group_bytes = kernels::kPackRows * w.row_bytes;
    pool_.parallel_for(groups, 1, [&](size_t begin, size_t end) {
      kernels::pack_quantized(w.type, dst + begin * group_bytes, (end - begin) * kernels::kPackRows, w.cols);
    });
    w.packed = true;
  }

  // q, k and v (`mats`) with their biases: stacked into one matrix when they share a type and
  // fusing is on, else three matrices; the biases concatenated either way (none: no bias).
  StackedWeight stacked(std::initializer_list<const TensorSpec*> mats, std::vector<const TensorSpec*> biases) {
    StackedWeight s;
    const TensorSpec& first = **mats.begin();
    const WeightType type = held_type(first);
    const size_t cols = static_cast<size_t>(first.shape[1]);
    bool same = fuse_;
    for (const TensorSpec* m : mats) {
      s.rows += static_cast<size_t>(m->shape[0]);
      same = same && held_type(*m) == type;
    }
    if (same) {
      Weight w{type, nullptr, s.rows, cols, weight_row_bytes(type, cols)};
      std::byte* dst = out_.arena.take(w.bytes());
      size_t at = 0;
      for (const TensorSpec* m : mats) {
        read_rows(*m, type, dst + at * w.row_bytes, placement(*m));
        at += static_cast<size_t>(m->shape[0]);
      }
      w.data = dst;
      pack(w, dst);
      s.parts = {w};
    } else {
      for (const TensorSpec* m : mats) s.parts.push_back(matrix(*m));
    }
    if (biases.empty()) return s;
    auto* bias = reinterpret_cast<float*>(out_.arena.take(s.rows * sizeof(float)));
    size_t at = 0;
    for (const TensorSpec* b : biases) at += vector_into(*b, bias + at);
    s.bias = bias;
    return s;
  }

  // gate and up: interleaved (model/linear.h) when they share a type and fusing is on.
  GateUpWeight gate_up(const TensorSpec& gate, const TensorSpec& up) {
    GateUpWeight g;
    g.inter = static_cast<size_t>(gate.shape[0]);
    const WeightType type = held_type(gate);
    if (fuse_ && held_type(up) == type) {
      const size_t cols = static_cast<size_t>(gate.shape[1]);
      Weight w{type, nullptr, 2 * g.inter, cols, weight_row_bytes(type, cols)};
      std::byte* dst = out_.arena.take(w.bytes());
      read_rows(gate, type, dst, RowPlacement{g.inter, kGateUpBlock, false});
      read_rows(up, type, dst, RowPlacement{g.inter, kGateUpBlock, true});
      w.data = dst;
      pack(w, dst);
      g.fused = w;
    } else {
      g.gate = matrix(gate);
      g.up = matrix(up);
    }
    return g;
  }

  // `as_weight`: rounded to bf16 with a bf16 target like every weight (RoPE's divisors are not).
  const float* vector(const TensorSpec& spec, bool as_weight = true) {
    const StoredTensor& t = checked(spec.name);
    auto* dst = reinterpret_cast<float*>(out_.arena.take(static_cast<size_t>(t.shape[0]) * sizeof(float)));
    vector_into(spec, dst, as_weight);
    return dst;
  }

 private:
  // Where a matrix's rows land in memory: row r at row at(r) of the destination, and rows
  // r .. r + run(r) - 1 consecutively. In order, or interleaved as gate (up = false) or up
  // rows of the fused gate/up matrix (model/linear.h).
  // Or, with head_dim set, stored row 2j + t of each head (llama.cpp's permuted q/k) to row
  // t * head_dim / 2 + j of the head, one row at a time.
  struct RowPlacement {
    size_t rows;
    size_t block = 0;  // 0: in order; else kGateUpBlock
    bool up = false;
    size_t head_dim = 0;
    size_t at(size_t r) const {
      if (head_dim != 0) {
        const size_t in_head = r % head_dim;
        return r - in_head + (in_head % 2) * (head_dim / 2) + in_head / 2;
      }
      return block == 0 ? r : gate_up_row(r, rows, up);
    }
    size_t run(size_t r) const {
      if (head_dim != 0) return 1;
      return block == 0 ? rows - r : std::min(block - r % block, rows - r);
    }
  };

  RowPlacement placement(const TensorSpec& spec) const {
    const bool permuted = spec.slot == TensorSlot::Q || spec.slot == TensorSlot::K;
    return {.rows = static_cast<size_t>(spec.shape[0]), .head_dim = permuted ? permuted_head_dim_ : 0};
  }

  // Reads the rows of `spec`, held as `to`, to their places under dst.
  void read_rows(const TensorSpec& spec, WeightType to, std::byte* dst, const RowPlacement& place) {
    const StoredTensor& t = checked(spec.name);
    const size_t rows = static_cast<size_t>(t.shape[0]), cols = static_cast<size_t>(t.shape[1]);
    const size_t row_bytes = weight_row_bytes(to, cols);
    if (t.exact == to) {
      // Stored as held: read straight into the arena in parallel chunks of whole rows (the
      // page faults of the fresh arena are spread over the threads too), one read per run of
      // consecutive rows, then check every value or block scale is finite while the chunk is
      // still in cache.
      const size_t rows_per_chunk = std::max<size_t>(1, kChunkBytes / row_bytes);
      const size_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
      pool_.parallel_for(chunks, 1, [&](size_t begin, size_t end) {
        for (size_t c = begin; c < end; ++c) {
          const size_t r_end = std::min((c + 1) * rows_per_chunk, rows);
          for (size_t r = c * rows_per_chunk; r < r_end;) {
            const size_t nr = std::min(place.run(r), r_end - r);
            std::byte* p = dst + place.at(r) * row_bytes;
            src_.read(t, r * row_bytes, {p, nr * row_bytes});
            for (size_t i = 0; i < nr; ++i) {
              if (!rows_finite(to, p + i * row_bytes, cols)) not_finite(spec.name, r + i);
            }
            r += nr;
          }
        }
      });
    } else {
      // Converted: stage stored rows, widen (or dequantize) each to f32, then write the
      // target type through its row of the weight-type table (quantize_row rounds to nearest
      // for every type).
      const size_t rows_per_chunk = std::max<size_t>(1, kChunkBytes / t.row_bytes);
      const size_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
      pool_.parallel_for(chunks, 1, [&](size_t begin, size_t end) {
        std::vector<std::byte> staged(rows_per_chunk * t.row_bytes);
        std::vector<float> row(cols);
        for (size_t c = begin; c < end; ++c) {
          const size_t r0 = c * rows_per_chunk, nr = std::min(rows_per_chunk, rows - r0);
          src_.read(t, r0 * t.row_bytes, {staged.data(), nr * t.row_bytes});
          for (size_t r = 0; r < nr; ++r) {
            t.widen_row(staged.data() + r * t.row_bytes, row.data(), cols);
            if (!rows_finite(WeightType::F32, reinterpret_cast<const std::byte*>(row.data()), cols)) {
              not_finite(spec.name, r0 + r);
            }
            quantize_row(to, row.data(), dst + place.at(r0 + r) * row_bytes, cols);
          }
        }
      });
    }
    out_.weight_bytes += rows * row_bytes;
  }

  // A norm weight or bias, widened to f32, into dst; returns its length.
  size_t vector_into(const TensorSpec& spec, float* dst, bool as_weight = true) {
    const StoredTensor& t = checked(spec.name);
    const size_t count = static_cast<size_t>(t.shape[0]);
    std::vector<std::byte> staged(t.nbytes);
    src_.read(t, 0, staged);
    t.widen_row(staged.data(), dst, count);
    if (!rows_finite(WeightType::F32, reinterpret_cast<const std::byte*>(dst), count)) not_finite(spec.name, 0);
    if (as_weight && target_ == WeightType::BF16)
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(f32_to_bf16(dst[i]));
    out_.weight_bytes += count * sizeof(float);
    return count;
  }

  // Shapes were checked against the manifest; the element type is checked here.
  const StoredTensor& checked(const std::string& name) const {
    const StoredTensor* t = src_.find(name);
    if (t == nullptr) fail("{}: missing tensor '{}'", src_.path.string(), name);
    if (!t->widen_row)
      fail("{}: tensor '{}': expected F32, BF16 or F16, found {}", src_.path.string(), name, t->type_name);
    return *t;
  }

  [[noreturn]] void not_finite(const std::string& name, size_t row) const {
    fail("{}: tensor '{}' holds a NaN or infinite value (row {}); the file is corrupt", src_.path.string(), name, row);
  }

  const WeightSource& src_;
  const ModelConfig& cfg_;
  bool fuse_;
  const kernels::Kernels* pack_for_;
  bool quantized_file_ = false;
  size_t permuted_head_dim_ = 0;
  std::optional<WeightType> target_;
  ThreadPool& pool_;
  ModelWeights& out_;
};

}  // namespace

ModelWeights load_weights(const WeightSource& src, const ModelConfig& cfg, std::optional<WeightType> target,
                          ThreadPool& pool, bool fuse, const kernels::Kernels* pack_for) {
  for (const StoredTensor& t : src.tensors)
    if (t.name.empty())
      fail("{}: tensor '{}' is not part of a {} model", src.path.string(), t.file_name, cfg.model_type);
  const std::vector<TensorSpec> manifest = tensor_manifest(cfg);
  const std::vector<std::string> problems = manifest_problems(manifest, src.manifest_infos, src.declared_blocks);
  // One line names the first few problems and counts the rest (a config claiming 100,000
  // layers once made a 103 MB line); `nanoinfer inspect` lists them all.
  if (!problems.empty()) {
    constexpr size_t kListed = 3;
    std::string listed;
    for (size_t i = 0; i < std::min(problems.size(), kListed); ++i) listed += (i == 0 ? "" : "; ") + problems[i];
    if (problems.size() <= kListed) fail("{}: {}", src.path.string(), listed);
    fail("{}: {} (and {} more problem(s); `nanoinfer inspect` lists them)", src.path.string(), listed,
         problems.size() - kListed);
  }

  // What is loaded: every tensor of the manifest in the file, except a tied model's optional
  // lm_head copy (the embedding is the head). Per layer, each slot's spec, for the matrices
  // loaded as a group.
  std::vector<const TensorSpec*> specs;
  std::vector<std::map<TensorSlot, const TensorSpec*>> by_slot(static_cast<size_t>(cfg.num_hidden_layers));
  for (const TensorSpec& spec : manifest) {
    if (src.find(spec.name) == nullptr) continue;
    if (spec.slot == TensorSlot::LmHead && cfg.tie_word_embeddings) continue;
    specs.push_back(&spec);
    if (spec.layer >= 0) by_slot[static_cast<size_t>(spec.layer)][spec.slot] = &spec;
  }
  ModelWeights w;
  Loader load(src, cfg, target, fuse, pack_for, pool, w);
  w.arena = WeightArena(load.arena_bytes(specs));
  w.layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  using S = TensorSlot;
  for (const TensorSpec* spec : specs) {
    LayerWeights* L = spec->layer >= 0 ? &w.layers[static_cast<size_t>(spec->layer)] : nullptr;
    // Another matrix of this layer (all of them are required: the manifest check passed).
    const auto other = [&](S slot) { return by_slot[static_cast<size_t>(spec->layer)].at(slot); };
    // The biases of q, k and v, where the architecture has them.
    const auto biases = [&] {
      const auto& slots = by_slot[static_cast<size_t>(spec->layer)];
      std::vector<const TensorSpec*> b;
      for (S slot : {S::QBias, S::KBias, S::VBias})
        if (slots.contains(slot)) b.push_back(slots.at(slot));
      return b;
    };
    switch (spec->slot) {
      case S::Embed:
        w.embed = load.matrix(*spec, cfg.tie_word_embeddings);
        break;
      case S::LmHead:
        w.lm_head = load.matrix(*spec);
        break;
      case S::FinalNorm:
        w.final_norm = load.vector(*spec);
        break;
      case S::RopeFreqs:
        w.rope_freqs = load.vector(*spec, false);
        break;
      case S::AttnNorm:
        L->attn_norm = load.vector(*spec);
        break;
      case S::Q:
        L->qkv = load.stacked({other(S::Q), other(S::K), other(S::V)}, biases());
        break;
      case S::QNorm:
        L->q_norm = load.vector(*spec);
        break;
      case S::KNorm:
        L->k_norm = load.vector(*spec);
        break;
      case S::QBias:
      case S::K:
      case S::KBias:
      case S::V:
      case S::VBias:
        break;  // with Q
      case S::O:
        L->o = load.matrix(*spec);
        break;
      case S::FfnNorm:
        L->ffn_norm = load.vector(*spec);
        break;
      case S::Gate:
        L->gate_up = load.gate_up(*other(S::Gate), *other(S::Up));
        break;
      case S::Up:
        break;  // with Gate
      case S::Down:
        L->down = load.matrix(*spec);
        break;
    }
  }
  if (cfg.tie_word_embeddings) w.lm_head = w.embed;
  // A decode step reads every matrix once, the norms and biases, and one embedding row; the
  // embedding table itself is read in full only when it is also the head.
  w.bytes_per_token = w.weight_bytes - (cfg.tie_word_embeddings ? 0 : w.embed.bytes()) + w.embed.row_bytes;
  return w;
}

}  // namespace nanoinfer
