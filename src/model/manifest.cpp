#include "model/manifest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace nanoinfer {

std::vector<TensorSpec> tensor_manifest(const ModelConfig& cfg) {
  using R = TensorRole;
  const auto H = static_cast<uint64_t>(cfg.hidden_size);
  const auto I = static_cast<uint64_t>(cfg.intermediate_size);
  const auto KV = static_cast<uint64_t>(cfg.kv_dim());
  const auto V = static_cast<uint64_t>(cfg.vocab_size);

  std::vector<TensorSpec> m;
  using S = TensorSlot;
  m.push_back({"model.embed_tokens.weight", {V, H}, true, R::Embedding, S::Embed});
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const int il = static_cast<int>(l);
    m.push_back({p + "input_layernorm.weight", {H}, true, R::Norm, S::AttnNorm, il});
    // Qwen2 carries biases on q, k and v only.
    m.push_back({p + "self_attn.q_proj.weight", {H, H}, true, R::Attention, S::Q, il});
    m.push_back({p + "self_attn.q_proj.bias", {H}, true, R::Attention, S::QBias, il});
    m.push_back({p + "self_attn.k_proj.weight", {KV, H}, true, R::Attention, S::K, il});
    m.push_back({p + "self_attn.k_proj.bias", {KV}, true, R::Attention, S::KBias, il});
    m.push_back({p + "self_attn.v_proj.weight", {KV, H}, true, R::Attention, S::V, il});
    m.push_back({p + "self_attn.v_proj.bias", {KV}, true, R::Attention, S::VBias, il});
    m.push_back({p + "self_attn.o_proj.weight", {H, H}, true, R::Attention, S::O, il});
    m.push_back({p + "post_attention_layernorm.weight", {H}, true, R::Norm, S::FfnNorm, il});
    m.push_back({p + "mlp.gate_proj.weight", {I, H}, true, R::Mlp, S::Gate, il});
    m.push_back({p + "mlp.up_proj.weight", {I, H}, true, R::Mlp, S::Up, il});
    m.push_back({p + "mlp.down_proj.weight", {H, I}, true, R::Mlp, S::Down, il});
  }
  m.push_back({"model.norm.weight", {H}, true, R::Norm, S::FinalNorm});
  // Tied embeddings reuse embed_tokens for the logits; some exports still store a copy, which
  // is accepted when its shape is right.
  m.push_back({"lm_head.weight", {V, H}, !cfg.tie_word_embeddings, R::Output, S::LmHead});
  return m;
}

uint64_t ModelConfig::parameter_count() const {
  uint64_t n = 0;
  for (const TensorSpec& t : tensor_manifest(*this)) {
    if (!t.required) continue;  // a tied lm_head shares the embedding
    uint64_t numel = 1;
    for (uint64_t d : t.shape) numel *= d;
    n += numel;
  }
  return n;
}

std::string_view tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::Embedding:
      return "embedding";
    case TensorRole::Attention:
      return "attention";
    case TensorRole::Mlp:
      return "mlp";
    case TensorRole::Norm:
      return "norm";
    case TensorRole::Output:
      return "output";
  }
  return "?";
}

std::vector<uint64_t> stored_shape(const TensorSpec& spec, std::optional<WeightType> block_type) {
  if (!block_type) return spec.shape;
  return {spec.shape[0], weight_row_bytes(*block_type, spec.shape[1])};
}

std::vector<std::string> manifest_problems(const std::vector<TensorSpec>& manifest,
                                           const std::vector<TensorInfo>& tensors,
                                           const std::map<std::string, WeightType>& block_types) {
  std::map<std::string_view, const TensorInfo*> by_name;
  for (const auto& t : tensors) by_name.emplace(t.name, &t);

  std::vector<std::string> problems;
  std::map<std::string_view, const TensorSpec*> expected;
  for (const auto& spec : manifest) {
    expected.emplace(spec.name, &spec);
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      if (spec.required)
        problems.push_back(fmt::format("missing tensor '{}' (expected shape [{}])", spec.name,
                                       fmt::join(spec.shape, ", ")));
      continue;
    }
    const auto declared = block_types.find(spec.name);
    std::optional<WeightType> block;
    if (declared != block_types.end()) {
      block = declared->second;
      if (!spec.is_matrix()) {
        problems.push_back(fmt::format("tensor '{}' is declared {} but is not a matrix", spec.name,
                                       weight_type_info(*block).gguf_name));
        continue;
      }
      if (spec.shape[1] % weight_type_info(*block).block_elems != 0) {
        problems.push_back(fmt::format("tensor '{}' is declared {} but its {} columns are not whole blocks of {}",
                                       spec.name, weight_type_info(*block).gguf_name, spec.shape[1],
                                       weight_type_info(*block).block_elems));
        continue;
      }
    }
    const std::vector<uint64_t> shape = stored_shape(spec, block);
    if (it->second->shape != shape) {
      // U8 without a declaration is most likely a quantized file whose metadata was lost.
      const bool undeclared_u8 = !block && it->second->dtype == DType::U8;
      problems.push_back(fmt::format("tensor '{}': expected shape [{}]{}, found [{}]{}", spec.name,
                                     fmt::join(shape, ", "),
                                     block ? fmt::format(" (bytes of {} blocks)", weight_type_info(*block).gguf_name) : "",
                                     fmt::join(it->second->shape, ", "),
                                     undeclared_u8 ? " of U8 (U8 blocks need a type in __metadata__ "
                                                     "\"nanoinfer.weight_types\")"
                                                   : ""));
    }
  }
  for (const auto& t : tensors)
    if (!expected.contains(t.name))
      problems.push_back(fmt::format("unexpected tensor '{}' (shape [{}]) not in the manifest",
                                     t.name, fmt::join(t.shape, ", ")));
  for (const auto& [name, type] : block_types) {
    const char* where = !expected.contains(name) ? "the manifest" : !by_name.contains(name) ? "the file" : nullptr;
    if (where != nullptr)
      problems.push_back(fmt::format("tensor '{}' is declared {} but is not in {}", name,
                                     weight_type_info(type).gguf_name, where));
  }
  return problems;
}

}  // namespace nanoinfer
