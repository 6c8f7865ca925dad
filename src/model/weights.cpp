#include "model/weights.h"

#include <sys/mman.h>

#include <cstring>
#include <string>
#include <utility>

#include "nanoinfer/error.h"
#include "model/manifest.h"

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

using WeightMode = ModelOptions::WeightMode;

float load_f32(DType dtype, const std::byte* data, size_t i) {
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, data + 2 * i, 2);
  return dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

class Loader {
 public:
  Loader(const SafetensorsFile& file, WeightMode mode, ThreadPool& pool, ModelWeights& out)
      : file_(file), mode_(mode), pool_(pool), out_(out) {}

  // The type a matrix is held in: the stored one unless the mode asks otherwise.
  DType target(DType stored) const {
    if (mode_ == WeightMode::F32) return DType::F32;
    if (mode_ == WeightMode::BF16) return DType::BF16;
    return stored == DType::BF16 ? DType::BF16 : DType::F32;
  }

  // Arena bytes for the manifest's tensors that are in the file.
  size_t arena_bytes(const std::vector<TensorSpec>& manifest) const {
    size_t total = 0;
    for (const TensorSpec& spec : manifest) {
      const TensorInfo* info = file_.find(spec.name);
      if (info == nullptr) continue;
      const size_t size = spec.shape.size() == 2 ? dtype_size(target(info->dtype)) : sizeof(float);
      total += round_up(static_cast<size_t>(info->numel()) * size, kAlign);
    }
    return total;
  }

  Weight matrix(const std::string& name) {
    const TensorView t = get(name);
    const size_t rows = static_cast<size_t>(t.shape()[0]), cols = static_cast<size_t>(t.shape()[1]);
    const DType to = target(t.dtype());
    const size_t count = rows * cols;
    std::byte* dst = out_.arena.take(count * dtype_size(to));
    // Copy or convert in parallel: the page faults of a fresh arena are spread too.
    pool_.parallel_for(count, size_t{1} << 18, [&](size_t begin, size_t end) { convert(t, to, dst, begin, end); });
    out_.weight_bytes += count * dtype_size(to);
    return Weight{to, dst, rows, cols};
  }

  const float* vector(const std::string& name) {
    const TensorView t = get(name);
    const size_t count = static_cast<size_t>(t.shape()[0]);
    auto* dst = reinterpret_cast<float*>(out_.arena.take(count * sizeof(float)));
    for (size_t i = 0; i < count; ++i) {
      dst[i] = load_f32(t.dtype(), t.data, i);
      if (mode_ == WeightMode::BF16) dst[i] = bf16_to_f32(f32_to_bf16(dst[i]));
    }
    out_.weight_bytes += count * sizeof(float);
    return dst;
  }

 private:
  // Shapes were checked against the manifest; the element type is checked here.
  TensorView get(const std::string& name) const {
    const TensorView t = file_.get(name);
    if (t.dtype() != DType::F32 && t.dtype() != DType::BF16 && t.dtype() != DType::F16) {
      fail("{}: tensor '{}': expected F32, BF16 or F16, found {}", file_.path().string(), name,
           dtype_name(t.dtype()));
    }
    return t;
  }

  static void convert(const TensorView& t, DType to, std::byte* dst, size_t begin, size_t end) {
    const DType from = t.dtype();
    if (from == to) {
      const size_t size = dtype_size(from);
      std::memcpy(dst + begin * size, t.data + begin * size, (end - begin) * size);
    } else if (to == DType::F32) {
      auto* out = reinterpret_cast<float*>(dst);
      for (size_t i = begin; i < end; ++i) out[i] = load_f32(from, t.data, i);
    } else {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = begin; i < end; ++i) out[i] = f32_to_bf16(load_f32(from, t.data, i));
    }
  }

  const SafetensorsFile& file_;
  WeightMode mode_;
  ThreadPool& pool_;
  ModelWeights& out_;
};

}  // namespace

ModelWeights load_weights(const SafetensorsFile& file, const ModelConfig& cfg, WeightMode mode, ThreadPool& pool) {
  const std::vector<TensorSpec> manifest = tensor_manifest(cfg);
  const std::vector<std::string> problems = manifest_problems(manifest, file.tensors());
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    fail("{}: {}", file.path().string(), all);
  }

  ModelWeights w;
  Loader load(file, mode, pool, w);
  w.arena = WeightArena(load.arena_bytes(manifest));
  w.embed = load.matrix("model.embed_tokens.weight");
  // A tied model's optional lm_head copy is not loaded: the embedding is the head.
  w.lm_head = cfg.tie_word_embeddings ? w.embed : load.matrix("lm_head.weight");
  w.final_norm = load.vector("model.norm.weight");
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers.emplace_back();
    L.attn_norm = load.vector(p + "input_layernorm.weight");
    L.q = load.matrix(p + "self_attn.q_proj.weight");
    L.k = load.matrix(p + "self_attn.k_proj.weight");
    L.v = load.matrix(p + "self_attn.v_proj.weight");
    L.q_bias = load.vector(p + "self_attn.q_proj.bias");
    L.k_bias = load.vector(p + "self_attn.k_proj.bias");
    L.v_bias = load.vector(p + "self_attn.v_proj.bias");
    L.o = load.matrix(p + "self_attn.o_proj.weight");
    L.ffn_norm = load.vector(p + "post_attention_layernorm.weight");
    L.gate = load.matrix(p + "mlp.gate_proj.weight");
    L.up = load.matrix(p + "mlp.up_proj.weight");
    L.down = load.matrix(p + "mlp.down_proj.weight");
  }
  // A decode step reads every matrix once, the norms and biases, and one embedding row; the
  // embedding table itself is read in full only when it is also the head.
  const size_t embed_bytes = w.embed.rows * w.embed.cols * dtype_size(w.embed.dtype);
  const size_t row_bytes = w.embed.cols * dtype_size(w.embed.dtype);
  w.bytes_per_token = w.weight_bytes - (cfg.tie_word_embeddings ? 0 : embed_bytes) + row_bytes;
  return w;
}

}  // namespace nanoinfer
