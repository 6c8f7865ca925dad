// Calibration for the imatrix and gptq methods: the model runs (f32 activations) over text while a debug
// tap records, for the input of every matrix, the mean square of each channel (imatrix) and,
// for gptq, the Gram matrix sum x x^T of the inputs. Inputs are shared:
// "attn_norm" feeds q, k and v; "attn_out" feeds o; "ffn_norm" feeds gate and up; "ffn_act"
// feeds down; "final_norm" feeds the logits matrix (tied embedding or lm_head). An untied
// input embedding is only looked up, so it has no input statistics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/manifest.h"
#include "nanoinfer/model.h"

namespace nanoinfer {

struct Calibration {
  // (tap name, layer) -> mean over tokens of x[c]^2, per channel c: [dim]
  std::map<std::pair<std::string, int>, std::vector<float>> mean_sq;
  // (tap name, layer) -> sum over tokens of x x^T, its lower triangle packed (quant/gptq.h:
  // gram_at); only when asked for.
  std::map<std::pair<std::string, int>, std::vector<float>> gram;
  uint64_t tokens = 0;  // positions run
  size_t windows = 0;
  size_t ctx = 0;
  Isa isa = Isa::Scalar;  // the model's kernels, which made the Gram matrices (and factor them)
};

// The tap whose rows are the inputs of `spec`, or nullopt (an untied embedding, a vector).
std::optional<std::pair<std::string, int>> input_tap(const TensorSpec& spec, bool tied_embeddings);

// Runs up to `windows` consecutive windows of `ctx` tokens (each from an empty cache; a
// shorter last window counts if it has at least 2 tokens). `progress(done, total)` is called
// after each window and may throw to abort. Throws Error if an activation is not finite.
// `gram`: also accumulate the Gram matrices (on a pool of `threads`).
Calibration calibrate(const Model& model, std::span<const int32_t> tokens, size_t ctx, size_t windows, bool gram,
                      int threads, const std::function<void(size_t done, size_t total)>& progress);

}  // namespace nanoinfer
