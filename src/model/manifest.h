// The tensor manifest: every tensor a checkpoint holds (Qwen2, Qwen3, Llama), derived from its config alone.
// Loading, `inspect`, synthesis and quantization all walk this one list, so a tensor is
// added in exactly one place.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "nanoinfer/config.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

enum class TensorRole { Embedding, Attention, Mlp, Norm, Output, Rope };

// Which field of the loaded model a tensor fills (src/model/weights.h).
enum class TensorSlot {
  Embed,
  AttnNorm,
  Q,
  QBias,
  QNorm,
  K,
  KBias,
  KNorm,
  V,
  VBias,
  O,
  FfnNorm,
  Gate,
  Up,
  Down,
  FinalNorm,
  LmHead,
  RopeFreqs
};

struct TensorSpec {
  std::string name;             // Hugging Face's: "model.layers.3.self_attn.q_proj.weight"
  std::vector<uint64_t> shape;  // row-major, as stored: [out_features, in_features] for weights
  bool required;                // false for lm_head.weight when the embeddings are tied, and for
                                // Llama's rope_freqs.weight (GGUF only: Llama 3's scaling as factors)
  TensorRole role;
  TensorSlot slot;
  int layer = -1;         // -1 outside the layers
  std::string gguf_name;  // llama.cpp's, in GGUF files: "blk.3.attn_q.weight"
  bool is_matrix() const { return shape.size() == 2; }
};

// In file order: embed, per layer (norm, attention, norm, MLP), final norm, lm_head. Written
// once, as one table with both names (model/manifest.cpp).
std::vector<TensorSpec> tensor_manifest(const ModelConfig& cfg);

// Sentence-transformers checkpoints (Qwen3-Embedding) store the bare transformer: its tensors
// are "embed_tokens.weight", "layers.N. ...", "norm.weight", without a causal LM's "model.".
// True when `names` are such a checkpoint's (no "model." name, an "embed_tokens.weight").
bool stores_bare_model_names(const std::vector<std::string>& names);
// "layers.3.mlp.up_proj.weight" -> "model.layers.3.mlp.up_proj.weight"; other names unchanged.
std::string prefixed_model_name(std::string_view bare_name);
// The manifest under the names `tensors` use: tensor_manifest's, or its bare names when the
// file stores the bare transformer. Tools that read and write a file by name (quantize) keep
// the file's naming; the loader maps both namings to the manifest's.
std::vector<TensorSpec> stored_manifest(const ModelConfig& cfg, const std::vector<TensorInfo>& tensors);

// A name in one naming to the other, through the same table, for any layer number:
// "blk.3.attn_q.weight" <-> "model.layers.3.self_attn.q_proj.weight"; nullopt for a name that
// is not part of any supported architecture's model.
std::optional<std::string> hf_name_from_gguf(std::string_view gguf_name);
std::optional<std::string> gguf_name_from_hf(std::string_view hf_name);

std::string_view tensor_role_name(TensorRole role);  // "embedding", "attention", ...

// Compares a file's tensors with the manifest and returns one line per problem, in manifest
// order then file order: a missing required tensor, an unexpected tensor, a mis-shaped one.
// Empty means the file has exactly the tensors the config implies. Dtypes are not judged here.
// `block_types` (model/quant_scheme.h) names the matrices stored as quantized blocks: such a
// matrix [rows][cols] is expected with the byte shape [rows][weight_row_bytes(type, cols)], and
// a declaration for anything but a manifest matrix present in the file is a problem too.
std::vector<std::string> manifest_problems(const std::vector<TensorSpec>& manifest,
                                           const std::vector<TensorInfo>& tensors,
                                           const std::map<std::string, WeightType>& block_types = {});

// The shape a manifest tensor has in a file: its own, or [rows][row_bytes] when stored in
// blocks of `type`. Throws Error when the columns are not a whole number of blocks.
std::vector<uint64_t> stored_shape(const TensorSpec& spec, std::optional<WeightType> block_type);

}  // namespace nanoinfer
