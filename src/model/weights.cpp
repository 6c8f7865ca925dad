#include "model/weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "nanoinfer/error.h"
#include "kernels/kernels.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"

namespace nanoinfer {

// ---- WeightArena ------------------------------------------------------------------------------

namespace {

constexpr size_t kAlign = 64;  // a cache line, and a whole AVX-512 register
constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

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

// Stored element types a checkpoint's float tensors may have, widened exactly.
void widen(DType from, const std::byte* src, float* dst, size_t n) {
  switch (from) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    default: break;
  }
  fail("weights: cannot widen {} tensors", dtype_name(from));
}

// The weight type a stored float dtype is held in when no conversion is asked for.
std::optional<WeightType> same_type(DType stored) {
  if (stored == DType::F32) return WeightType::F32;
  if (stored == DType::BF16) return WeightType::BF16;
  return std::nullopt;
}

// Bytes of source read per pread: large enough to stream at page-cache speed, small enough
// that the per-thread staging buffers stay negligible next to the weights.
constexpr size_t kChunkBytes = size_t{8} << 20;

class Loader {
 public:
  Loader(const SafetensorsFile& file, const ModelConfig& cfg, std::map<std::string, WeightType> block_types,
         std::optional<WeightType> target, ThreadPool& pool, ModelWeights& out)
      : file_(file), cfg_(cfg), block_types_(std::move(block_types)), target_(target), pool_(pool), out_(out) {}

  // The type a matrix is stored in: its declared block type, else its float dtype (nullopt
  // for f16, which has no kernel).
  std::optional<WeightType> stored_type(const TensorSpec& spec, const TensorInfo& info) const {
    if (const auto it = block_types_.find(spec.name); it != block_types_.end()) return it->second;
    return same_type(info.dtype);
  }

  // The type a matrix is held in: the stored one (f16 -> f32) unless a target is asked for.
  // A quantized target follows the quantization scheme (model/quant_scheme.h) on a float
  // file; on an already quantized file it keeps every matrix as stored, since requantizing
  // blocks could only add error.
  WeightType held_type(const TensorSpec& spec, const TensorInfo& info) const {
    const WeightType stored = stored_type(spec, info).value_or(WeightType::F32);
    if (!target_) return stored;
    if (!weight_type_info(*target_).quantized) return *target_;
    return block_types_.empty() ? scheme_type(spec, *target_, cfg_.tie_word_embeddings) : stored;
  }

  // Arena bytes for the manifest's tensors that will be loaded.
  size_t arena_bytes(const std::vector<const TensorSpec*>& specs) const {
    size_t total = 0;
    for (const TensorSpec* spec : specs) {
      const TensorInfo& info = *file_.find(spec->name);
      const size_t bytes = spec->is_matrix()
                               ? static_cast<size_t>(spec->shape[0]) * weight_row_bytes(held_type(*spec, info), spec->shape[1])
                               : static_cast<size_t>(info.numel()) * sizeof(float);
      total += round_up(bytes, kAlign);
    }
    return total;
  }

  Weight matrix(const TensorSpec& spec) {
    const TensorInfo& info = checked(spec);
    const size_t rows = static_cast<size_t>(spec.shape[0]), cols = static_cast<size_t>(spec.shape[1]);
    const std::optional<WeightType> from = stored_type(spec, info);
    const WeightType to = held_type(spec, info);
    Weight w{to, nullptr, rows, cols, weight_row_bytes(to, cols)};
    std::byte* dst = out_.arena.take(w.bytes());
    w.data = dst;
    if (from == to) {
      // Stored as held: read straight into the arena, in parallel chunks (the page faults
      // of the fresh arena are spread over the threads too).
      const size_t chunks = (w.bytes() + kChunkBytes - 1) / kChunkBytes;
      pool_.parallel_for(chunks, 1, [&](size_t begin, size_t end) {
        for (size_t c = begin; c < end; ++c) {
          const size_t off = c * kChunkBytes, n = std::min(kChunkBytes, w.bytes() - off);
          file_.read(info, off, {dst + off, n});
        }
      });
    } else {
      // Converted: stage rows as stored, widen or dequantize them to f32, then write the
      // target type through the traits (quantize_row rounds to nearest for every type).
      const size_t src_row = from ? weight_row_bytes(*from, cols) : cols * dtype_size(info.dtype);
      const size_t rows_per_chunk = std::max<size_t>(1, kChunkBytes / src_row);
      const size_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
      pool_.parallel_for(chunks, 1, [&](size_t begin, size_t end) {
        std::vector<std::byte> staged(rows_per_chunk * src_row);
        std::vector<float> row(cols);
        for (size_t c = begin; c < end; ++c) {
          const size_t r0 = c * rows_per_chunk, nr = std::min(rows_per_chunk, rows - r0);
          file_.read(info, r0 * src_row, {staged.data(), nr * src_row});
          for (size_t r = 0; r < nr; ++r) {
            const std::byte* src = staged.data() + r * src_row;
            if (from) {
              kernels::dequantize_row(*from, src, row.data(), cols);
            } else {
              widen(info.dtype, src, row.data(), cols);
            }
            kernels::quantize_row(to, row.data(), dst + (r0 + r) * w.row_bytes, cols);
          }
        }
      });
    }
    out_.weight_bytes += w.bytes();
    return w;
  }

  const float* vector(const TensorSpec& spec) {
    const TensorInfo& info = checked(spec);
    const size_t count = static_cast<size_t>(info.numel());
    std::vector<std::byte> staged(info.nbytes());
    file_.read(info, 0, staged);
    auto* dst = reinterpret_cast<float*>(out_.arena.take(count * sizeof(float)));
    widen(info.dtype, staged.data(), dst, count);
    if (target_ == WeightType::BF16)
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(f32_to_bf16(dst[i]));
    out_.weight_bytes += count * sizeof(float);
    return dst;
  }

 private:
  // Shapes were checked against the manifest; the element type is checked here: U8 for a
  // declared block tensor, a float type for everything else.
  const TensorInfo& checked(const TensorSpec& spec) const {
    const TensorInfo* info = file_.find(spec.name);
    if (info == nullptr) fail("{}: missing tensor '{}'", file_.path().string(), spec.name);
    if (const auto it = block_types_.find(spec.name); it != block_types_.end()) {
      if (info->dtype != DType::U8) {
        fail("{}: tensor '{}' is declared {} and must be stored as U8, found {}", file_.path().string(), spec.name,
             weight_type_info(it->second).gguf_name, dtype_name(info->dtype));
      }
    } else if (info->dtype != DType::F32 && info->dtype != DType::BF16 && info->dtype != DType::F16) {
      fail("{}: tensor '{}': expected F32, BF16 or F16{}, found {}", file_.path().string(), spec.name,
           info->dtype == DType::U8 ? fmt::format(" (U8 blocks need a type in __metadata__ \"{}\")", kWeightTypesKey)
                                    : std::string(),
           dtype_name(info->dtype));
    }
    return *info;
  }

  const SafetensorsFile& file_;
  const ModelConfig& cfg_;
  std::map<std::string, WeightType> block_types_;
  std::optional<WeightType> target_;
  ThreadPool& pool_;
  ModelWeights& out_;
};

}  // namespace

ModelWeights load_weights(const SafetensorsFile& file, const ModelConfig& cfg, std::optional<WeightType> target,
                          ThreadPool& pool) {
  const std::vector<TensorSpec> manifest = tensor_manifest(cfg);
  std::map<std::string, WeightType> block_types = declared_block_types(file.layout(), file.path().string());
  const std::vector<std::string> problems = manifest_problems(manifest, file.tensors(), block_types);
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    fail("{}: {}", file.path().string(), all);
  }

  // What is loaded: every tensor of the manifest in the file, except a tied model's optional
  // lm_head copy (the embedding is the head).
  std::vector<const TensorSpec*> specs;
  for (const TensorSpec& spec : manifest) {
    if (file.find(spec.name) == nullptr) continue;
    if (spec.slot == TensorSlot::LmHead && cfg.tie_word_embeddings) continue;
    specs.push_back(&spec);
  }

  ModelWeights w;
  Loader load(file, cfg, std::move(block_types), target, pool, w);
  w.arena = WeightArena(load.arena_bytes(specs));
  w.layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  for (const TensorSpec* spec : specs) {
    LayerWeights* L = spec->layer >= 0 ? &w.layers[static_cast<size_t>(spec->layer)] : nullptr;
    switch (spec->slot) {
      case TensorSlot::Embed: w.embed = load.matrix(*spec); break;
      case TensorSlot::LmHead: w.lm_head = load.matrix(*spec); break;
      case TensorSlot::FinalNorm: w.final_norm = load.vector(*spec); break;
      case TensorSlot::AttnNorm: L->attn_norm = load.vector(*spec); break;
      case TensorSlot::Q: L->q = load.matrix(*spec); break;
      case TensorSlot::QBias: L->q_bias = load.vector(*spec); break;
      case TensorSlot::K: L->k = load.matrix(*spec); break;
      case TensorSlot::KBias: L->k_bias = load.vector(*spec); break;
      case TensorSlot::V: L->v = load.matrix(*spec); break;
      case TensorSlot::VBias: L->v_bias = load.vector(*spec); break;
      case TensorSlot::O: L->o = load.matrix(*spec); break;
      case TensorSlot::FfnNorm: L->ffn_norm = load.vector(*spec); break;
      case TensorSlot::Gate: L->gate = load.matrix(*spec); break;
      case TensorSlot::Up: L->up = load.matrix(*spec); break;
      case TensorSlot::Down: L->down = load.matrix(*spec); break;
    }
  }
  if (cfg.tie_word_embeddings) w.lm_head = w.embed;
  // A decode step reads every matrix once, the norms and biases, and one embedding row; the
  // embedding table itself is read in full only when it is also the head.
  w.bytes_per_token = w.weight_bytes - (cfg.tie_word_embeddings ? 0 : w.embed.bytes()) + w.embed.row_bytes;
  return w;
}

}  // namespace nanoinfer
