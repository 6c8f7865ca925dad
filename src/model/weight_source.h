// Where a model's tensors come from, whatever the file format: a safetensors checkpoint or a
// GGUF file, each tensor under its Hugging Face name with its row-major shape, how its
// stored bytes relate to the engine's weight types, and a pread-style reader. The loader
// (weights.cpp) sees only this, so a new file format is one more `open_*_source`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "nanoinfer/config.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

struct StoredTensor {
  std::string name;             // Hugging Face name, e.g. "model.layers.0.mlp.up_proj.weight"
  std::vector<uint64_t> shape;  // row-major: [rows, cols] for a matrix, [n] for a vector
  std::string type_name;        // as stored, for messages and inspect: "BF16", "Q4_K", ...
  uint64_t nbytes = 0;
  size_t row_bytes = 0;                // bytes of one stored row (of shape.back() elements)
  std::optional<WeightType> exact;     // the stored rows are exactly this weight type's rows
  // Widens one stored row of `n` elements to f32, exactly (dequantizes a block type).
  std::function<void(const std::byte* row, float* out, size_t n)> widen_row;
};

class WeightSource {
 public:
  std::filesystem::path path;
  std::vector<StoredTensor> tensors;  // in file order
  // Copies bytes [offset, offset + dst.size()) of a tensor with pread.
  std::function<void(const StoredTensor&, uint64_t offset, std::span<std::byte> dst)> read;

  // What the manifest check sees (manifest_problems): the file's own tensor list and the
  // block types it declares; for GGUF, Hugging Face names and shapes with no declarations.
  std::vector<TensorInfo> manifest_infos;
  std::map<std::string, WeightType> declared_blocks;

  const StoredTensor* find(std::string_view name) const;
  // Names and shapes as the loader sees them (dtype not judged).
  std::vector<TensorInfo> infos() const;
};

// The safetensors reader as a source: F32, BF16 and F16 tensors (widened exactly).
WeightSource safetensors_source(const SafetensorsFile& file);

// A GGUF file as a source (names mapped to Hugging Face's; Q8_0/Q4_0 blocks are the engine's
// int8/int4 rows byte for byte; other block types are dequantized to f32 rows at load).
class GgufFile;
WeightSource gguf_source(const GgufFile& file);

}  // namespace nanoinfer
