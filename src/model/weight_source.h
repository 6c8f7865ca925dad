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
#include "model/manifest.h"
#include "nanoinfer/config.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

struct StoredTensor {
  // Hugging Face name, e.g. "model.layers.0.mlp.up_proj.weight"; empty for a GGUF tensor whose
  // name maps to none (kept for inspect to report; the loader refuses the file).
  std::string name;
  std::string file_name;               // as named in the file: "blk.0.ffn_up.weight" in GGUF; = name
  std::vector<uint64_t> shape;         // of the weights, row-major: [rows, cols] for a matrix, [n] for a vector
  std::string type_name;               // the weights' type, for messages and inspect: "BF16", "Q8_0", "Q4_K", ...
  std::string stored_type;             // as stored: = type_name, but "U8" for a safetensors block tensor
  std::vector<uint64_t> stored_shape;  // as stored: [rows, row_bytes] for a safetensors block tensor
  uint64_t nbytes = 0;
  size_t row_bytes = 0;             // bytes of one stored row (of shape.back() elements)
  std::optional<WeightType> exact;  // the stored rows are exactly this weight type's rows
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
  // block types it declares; for GGUF, Hugging Face names and shapes with no declarations (and
  // without the tensors whose names map to none).
  std::vector<TensorInfo> manifest_infos;
  std::map<std::string, WeightType> declared_blocks;
  bool gguf_names = false;  // the file names its tensors the GGUF way (file_name != name)

  // What the file says about itself, for inspect.
  uint64_t file_bytes = 0;
  uint64_t header_bytes = 0;  // everything before the tensor data
  std::string quantization;   // metadata "nanoinfer.quantization" (a JSON object as text), or ""

  const StoredTensor* find(std::string_view name) const;
  // Names and shapes as the loader sees them (dtype not judged).
  std::vector<TensorInfo> infos() const;
  // Every way the file differs from the manifest, each tensor named as in the file first (the
  // Hugging Face name beside a GGUF one): manifest_problems, then the tensors whose names map
  // to none. Empty: the file holds exactly the manifest's tensors.
  std::vector<std::string> problems(const std::vector<TensorSpec>& manifest) const;
};

// The safetensors reader as a source: F32, BF16 and F16 tensors (widened exactly).
WeightSource safetensors_source(const SafetensorsFile& file);

// A GGUF file as a source (names mapped to Hugging Face's; every block type it reads is a weight
// type, its rows held byte for byte: Q8_0/Q4_0 are int8/int4, Q4_1/Q5_0/Q5_1 and the K types
// their own; F16 is widened to f32 at load).
class GgufFile;
WeightSource gguf_source(const GgufFile& file);

}  // namespace nanoinfer
