// A model written as one GGUF file that llama.cpp and open_model load: as it is, or quantized
// first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

#include "nanoinfer/quantize_model.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

// Bytes of tensor data written so far, and the total: called as a GGUF file is written. It may
// throw to abort the write (e.g. on SIGINT); the temporary file is removed.
using GgufExportProgress = std::function<void(uint64_t done, uint64_t total)>;

// Writes the model directory (empty: the default model) as one GGUF file that llama.cpp and
// open_model load: matrices as `type` (nullopt: as stored; f32, bf16, int8 = Q8_0, int4 = Q4_0,
// rounded to nearest following the quantization scheme, so a tied embedding stays int8),
// norms and biases f32, the tokenizer as tokenizer.ggml.* arrays, the chat template. A tensor
// already of its target type is copied byte for byte. The file is written to a temporary name
// beside `out_file` and renamed into place when complete. Returns the bytes of tensor data.
// Throws a one-line Error, writing nothing, when `out_file` does not end in .gguf, exists, or
// its directory does not; when the disk lacks room; for a model that does not load.
uint64_t export_gguf(const std::filesystem::path& model_dir, const std::filesystem::path& out_file,
                     std::optional<WeightType> type, const GgufExportProgress& progress = {});

// quantize_model (nanoinfer/quantize_model.h) with one GGUF file as the output: the quantized model
// directory is built in a hidden directory beside `out_file`, written as GGUF with its blocks
// copied unchanged (so the file holds exactly the weights the directory would), and removed.
// Needs room for both at once. Progress as quantize_model's, then stage "gguf" (bytes of the
// file's tensor data). The result's `out` and `file_bytes` are the GGUF file's. Errors as
// quantize_model's and export_gguf's; any of them leaves neither file nor directory behind.
QuantizeResult quantize_to_gguf(std::string_view model_path, const std::filesystem::path& out_file,
                                const QuantizeOptions& options, const QuantizeProgressFn& progress = {});

}  // namespace nanoinfer
