// A checkpoint's weights in the form the forward pass reads them, and the memory that
// holds them.
//
// Every matrix is read (pread, never through the mapping, so the file does not count towards
// resident memory) into one anonymous arena backed by transparent huge pages, in its stored
// type or converted on the way through the weight-type table (widened to f32, rounded to
// bf16, or quantized to int8/int4; f16 is always widened: there is no f16 kernel). A quantized
// file's U8 block tensors (declared in its metadata: src/model/quant_scheme.h) are read as
// they are, or dequantized when a float type is asked for. Streaming
// Qwen2.5-0.5B's bf16 matrices measured ~2x faster from anonymous memory than from the
// page-cache mapping of the file (15-16 GB/s against 6-9 GB/s on one core of the project's
// machines), and reading into the arena directly keeps peak memory at the weights' size.
//
// Matrices that read the same input are laid out for one product (model/linear.h): q, k and
// v rows one after another with their biases concatenated, gate and up rows interleaved in
// blocks of 16; quantized matrices are then packed for the kernel table's packed product
// where it has one (kernels/quant_blocks.h). Only matrices of one type can share a layout; a file that mixes types
// within a group (GGUF K-quant mixes) keeps that group's matrices apart, as does fuse = false.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "model/linear.h"
#include "model/weight_source.h"
#include "nanoinfer/config.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// A bump allocator over one anonymous mapping, huge-page advised. Move-only; unmaps on
// destruction.
class WeightArena {
 public:
  WeightArena() = default;
  explicit WeightArena(size_t capacity);
  WeightArena(WeightArena&& other) noexcept;
  WeightArena& operator=(WeightArena&& other) noexcept;
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;
  ~WeightArena();

  std::byte* take(size_t bytes);  // 64-byte aligned; throws Error past the capacity
  size_t used() const { return used_; }

 private:
  std::byte* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

struct LayerWeights {
  const float* attn_norm;         // [hidden]
  StackedWeight qkv;              // [q_dim + 2 kv_dim][hidden]: q, k, v rows; bias [q_dim + 2 kv_dim] or none
  const float* q_norm = nullptr;  // [head_dim], per-head RMSNorm of q before RoPE (Qwen3), or none
  const float* k_norm = nullptr;  // [head_dim], the same for k
  Weight o;                       // [hidden][q_dim]
  const float* ffn_norm;          // [hidden]
  GateUpWeight gate_up;           // [2 inter][hidden]: gate and up rows interleaved in blocks of 16
  Weight down;                    // [hidden][inter]
};

struct ModelWeights {
  WeightArena arena;                  // everything below points into it
  Weight embed;                       // [vocab][hidden]
  Weight lm_head;                     // [vocab][hidden]; the same memory as embed when tied
  const float* final_norm;            // [hidden]
  const float* rope_freqs = nullptr;  // [head_dim / 2]: a Llama GGUF file's RoPE divisors, or none
  std::vector<LayerWeights> layers;
  size_t weight_bytes = 0;     // all weights as held
  size_t bytes_per_token = 0;  // read by one decode step: all but the embedding table, one row of it
};

// Checks the file against the tensor manifest (every problem named in one Error), then loads.
// `target`: the type the matrices are held in (ModelOptions::weights), or nullopt for the
// stored types (f16 widened).
// Norm weights and biases are held in f32; with a bf16 target they are rounded to bf16 first,
// so that mode is exactly "every weight rounded to bf16".
// `fuse`: lay out q/k/v and gate/up for one product each where their types allow (false keeps
// every matrix apart; the results are bitwise the same, only slower).
// `pack_for`: the kernel table the model runs on; every matrix the products read whose type
// has a packed product there is packed (Weight::packed; nullptr packs nothing; bitwise the
// same results).
ModelWeights load_weights(const WeightSource& src, const ModelConfig& cfg, std::optional<WeightType> target,
                          ThreadPool& pool, bool fuse = true, const kernels::Kernels* pack_for = nullptr);

}  // namespace nanoinfer
