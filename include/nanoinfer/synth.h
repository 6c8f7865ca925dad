// Synthetic models: a complete model directory with the exact tensor names, shapes and dtype
// a config implies, filled with seeded pseudo-random values. Speed work depends on shapes, not
// values, so this stands in for weights that cannot be downloaded here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "nanoinfer/config.h"
#include "nanoinfer/dtype.h"

namespace nanoinfer {

// Called with bytes written so far and the total.
using WriteProgress = std::function<void(uint64_t done, uint64_t total)>;

struct SynthOptions {
  uint64_t seed = 0;
  DType dtype = DType::BF16;  // BF16 or F32
  // Shaped as Qwen3-Embedding's sentence-transformers checkpoint: tensors without the "model."
  // prefix, no lm_head (the config must tie the embeddings), modules.json and
  // 1_Pooling/config.json asking for last-token pooling, and a tokenizer (when given) whose
  // post-processor appends <|endoftext|> to every input.
  bool embedding = false;
  // A tokenizer.json to copy into the directory (empty: none).
  std::filesystem::path tokenizer_json;
};

// Writes every required manifest tensor to `out_file` (temp file + rename). Matrices and
// biases are ~N(0, 0.02^2), norm weights ~N(1, 0.02^2); a tensor's values depend only on the
// seed and its name, bit-for-bit on any machine. Returns the bytes of tensor data written.
uint64_t write_synthetic_weights(const ModelConfig& cfg, const std::filesystem::path& out_file,
                                 const SynthOptions& options, const WriteProgress& progress = {});

// Creates `out_dir`, which must not exist or be an empty directory (anything else, a link
// to a directory included, is refused before anything is written), with config.json copied from `config_json`,
// generation_config.json and tokenizer_config.json copied when they sit beside it, model.safetensors, and
// options.tokenizer_json and the embedding files when asked for. Free space
// for all of it is checked before anything is created; on failure the files and directories this call created are
// removed again (an empty directory that existed before stays).
uint64_t synth_model_dir(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                         const SynthOptions& options, const WriteProgress& progress = {});

}  // namespace nanoinfer
