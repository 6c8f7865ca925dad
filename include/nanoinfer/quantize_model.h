// Quantizing a model directory: `nanoinfer quantize` as a library call (its GGUF output,
// quantize_to_gguf, is in nanoinfer/gguf_export.h).
//
// The output is a complete model directory (config.json with a `quantization_config`, the
// tokenizer and generation files copied, model.safetensors with every quantized matrix as a
// U8 tensor of its blocks; layout in src/model/quant_scheme.h), written into a temporary
// directory beside the target and renamed into place at the end: an error or an interruption
// leaves nothing under the target name.
//
// Methods:
//   rtn      round to nearest: each block's scale from its largest weight (the reference
//            quantizer of kernels/scalar_quant.cpp; what `--dtype int8|int4` does at load).
//   imatrix  importance-weighted scale search: the model runs in f32 over calibration text,
//            recording for every matrix the mean square of each of its input channels; each
//            block then gets the scale (and with it the rounding and clipping) that minimizes
//            the squared error of the weights weighted by those importances, i.e. the
//            expected error of the matrix's outputs on the calibration activations under a
//            diagonal approximation (src/quant/quantize_search.cpp).
//   gptq     the same calibration also records each input's full Gram matrix; the rows are
//            rounded column by column, every rounding error spread over the columns not yet
//            rounded so as to cancel its effect on the outputs (GPTQ), each block's scale
//            chosen by the imatrix search when the sweep reaches it (src/quant/gptq.h).
//            The default for both types: on the default model it cuts int4's KL divergence
//            ~6x against rtn, where imatrix alone gains ~12% (docs/QUANTIZATION.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "nanoinfer/weight_type.h"

namespace nanoinfer {

enum class QuantMethod : uint8_t { Rtn, Imatrix, Gptq };
std::string_view quant_method_name(QuantMethod method);  // "rtn", "imatrix", "gptq"
std::optional<QuantMethod> quant_method_from_name(std::string_view name);

struct QuantizeOptions {
  WeightType type = WeightType::Q4_0;  // Q8_0, Q4_0 or Q3_K
  // nullopt: gptq.
  std::optional<QuantMethod> method;
  // The matrix that computes the logits (the tied embedding, or lm_head); nullopt: the
  // scheme's choice (src/model/quant_scheme.h). Any weight type.
  std::optional<WeightType> head_type;
  // Calibration text for imatrix and gptq; empty: the part of data/tinyshakespeare.txt the default
  // model was trained on (never its held-out part).
  std::filesystem::path calibration;
  // Windows of calib_ctx tokens, from the start of the text; 0: 64, fewer for a model whose
  // calibration would pass 2e12 multiply-adds (at least 8: Qwen2.5-0.5B gets 8).
  size_t calib_windows = 0;
  size_t calib_ctx = 0;  // 0: min(512, the model's context)
  int threads = 0;       // 0: one per physical core; more than the CPUs: clamped to them
  // Weights sharing one scale in the matrices of `type`: 0 (the type's block, 32) or a multiple
  // of it, rtn only. A group of G is written as G/32 blocks that all carry the group's scale:
  // the values are exactly those of a format with groups of G, the file is not smaller
  // (QuantizeResult::repeated_scale_bytes says by how much such a format's would be). For
  // measuring the group-size axis (`bench quant`) without a weight type per group size.
  size_t scale_group = 0;
};

// Progress of a running quantization. `stage` is "calibrate" (done/total windows), "factor"
// (gptq: done/total inputs factored) or "write" (done/total bytes of tensor data). A callback may throw to abort (e.g.
// on SIGINT); the temporary directory is removed and the exception propagates.
struct QuantizeProgress {
  std::string_view stage;
  uint64_t done = 0;
  uint64_t total = 0;
};
using QuantizeProgressFn = std::function<void(const QuantizeProgress&)>;

struct QuantizeResult {
  std::filesystem::path out;
  WeightType type = WeightType::Q4_0;
  QuantMethod method = QuantMethod::Rtn;
  WeightType head_type = WeightType::Q8_0;
  uint64_t file_bytes = 0;     // model.safetensors
  uint64_t matrix_params = 0;  // weights of all matrices written (quantized or not)
  uint64_t matrix_bytes = 0;   // their bytes in the file
  uint64_t params = 0;         // all weights, norms and biases included
  uint64_t tensor_bytes = 0;   // all tensor data
  size_t scale_group = 0;      // weights per scale in the matrices of `type`
  // Bytes of scales repeated within a group (0 unless scale_group is beyond the block): a
  // format with groups of scale_group would store tensor_bytes - repeated_scale_bytes.
  uint64_t repeated_scale_bytes = 0;
  double matrix_bits_per_weight() const {
    return 8.0 * static_cast<double>(matrix_bytes) / static_cast<double>(matrix_params);
  }
  double bits_per_weight() const { return 8.0 * static_cast<double>(tensor_bytes) / static_cast<double>(params); }
  // sqrt(sum (w - q(w))^2 / sum w^2) over the quantized matrices: the plain (unweighted)
  // relative error of the weights.
  double weight_relative_error = 0;
  uint64_t calib_tokens = 0;  // 0 for rtn
  std::filesystem::path calib_file;
  double seconds = 0;
  int threads = 0;  // the threads each pool ran with (options.threads through ThreadPool::clamp_threads)
};

// Quantizes the model at `model_path` (empty: the default model) into `out_dir`. Throws a
// one-line Error for: an already quantized input, NaN or Inf weights, `out_dir` existing (and
// not an empty directory) or not creatable, a type that is not int8/int4, missing calibration
// text or tokenizer (imatrix, gptq).
QuantizeResult quantize_model(std::string_view model_path, const std::filesystem::path& out_dir,
                              const QuantizeOptions& options, const QuantizeProgressFn& progress = {});

}  // namespace nanoinfer
