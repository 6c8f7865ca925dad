// Quantized model files, and which weight type each matrix gets when a model is quantized.
//
// File layout. A quantized matrix [rows][cols] is stored as a U8 tensor [rows][row_bytes]
// (row_bytes = weight_row_bytes(type, cols)) holding its rows of blocks exactly as they sit in
// memory (kernels/quant_blocks.h, GGUF's layout), so loading is one read. The safetensors
// `__metadata__` names the type of each such tensor:
//   "nanoinfer.weight_types": {"model.layers.0.mlp.up_proj.weight": "Q4_0", ...}  (a JSON object
//   as a string, GGUF type names). Norms, biases and any matrix left unquantized stay floats.
// The loader trusts nothing in it: every name must be a manifest matrix stored as U8 with the
// byte shape its type implies (model/manifest.h checks the shape, model/weights.cpp the rest).
//
// The scheme. Quantizing to int8 or int4 — at load (`--dtype`) and in `nanoinfer quantize` —
// gives every layer matrix the requested type. The matrix that produces the logits (the tied
// embedding, or an untied lm_head) is the single most sensitive one: its error lands on the
// logits directly, with no later normalization to dilute it. It is held in int8 under both
// types: in int4 it alone would cost more KL divergence than all the layers together (even
// with GPTQ), in bf16 it would buy int4 almost nothing (measurements: docs/QUANTIZATION.md).
// An untied input embedding is only ever looked up row by row and takes the requested type.
// q3_k (Q3_K) follows the same scheme, except that a matrix whose rows are not whole
// super-blocks of 256 takes int4 (Q4_0), the type llama-quantize falls back to for Q3_K.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "io/safetensors.h"
#include "model/manifest.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

inline constexpr std::string_view kWeightTypesKey = "nanoinfer.weight_types";

// The declared block tensors of a file: name -> quantized type. Empty for a float file.
// Throws a one-line Error on a malformed declaration (not JSON, not an object, a type that is
// unknown or not a block type).
std::map<std::string, WeightType> declared_block_types(const SafetensorsLayout& layout, std::string_view origin);
std::string block_types_json(const std::map<std::string, WeightType>& types);

// The type a manifest matrix is held in when the model is quantized to `base` (Q8_0 or Q4_0;
// any other base applies to every matrix unchanged). `head`: the type of the matrix that
// produces the logits, when the caller overrides the scheme's choice.
WeightType scheme_type(const TensorSpec& spec, WeightType base, bool tied_embeddings,
                       std::optional<WeightType> head = std::nullopt);

// Whether `spec` is the matrix the logits are computed with.
bool is_logits_matrix(const TensorSpec& spec, bool tied_embeddings);

}  // namespace nanoinfer
