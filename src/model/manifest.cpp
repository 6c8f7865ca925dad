#include "model/manifest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <charconv>
#include <map>
#include <utility>

namespace nanoinfer {

namespace {

// A dimension of the config, as the table below names shapes.
enum class Dim { None, Hidden, QDim, KvDim, HeadDim, HalfHeadDim, Inter, Vocab };

// Which architectures hold a tensor (a bit per Architecture).
enum ArchMask : unsigned { Qwen2 = 1u << 0, Qwen3 = 1u << 1, Llama = 1u << 2, All = Qwen2 | Qwen3 | Llama };

// One row of the tensor list: its Hugging Face name and its GGUF (llama.cpp) name — for a layer
// tensor, what follows "model.layers.N." and "blk.N." — its shape [rows][cols] (cols None for
// a vector), role, slot and the architectures that have it.
struct TensorRow {
  std::string_view hf;
  std::string_view gguf;
  Dim rows;
  Dim cols;
  TensorRole role;
  TensorSlot slot;
  unsigned archs = All;
};

using R = TensorRole;
using S = TensorSlot;

// Per layer, in file order: norm, attention (Qwen2 carries biases on q, k and v only; Qwen3 a
// per-head RMSNorm weight for q and for k), norm, MLP. Llama is Qwen2 without the biases.
constexpr std::array<TensorRow, 14> kLayerTensors{{
    {"input_layernorm.weight", "attn_norm.weight", Dim::Hidden, Dim::None, R::Norm, S::AttnNorm},
    {"self_attn.q_proj.weight", "attn_q.weight", Dim::QDim, Dim::Hidden, R::Attention, S::Q},
    {"self_attn.q_proj.bias", "attn_q.bias", Dim::QDim, Dim::None, R::Attention, S::QBias, Qwen2},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", Dim::HeadDim, Dim::None, R::Norm, S::QNorm, Qwen3},
    {"self_attn.k_proj.weight", "attn_k.weight", Dim::KvDim, Dim::Hidden, R::Attention, S::K},
    {"self_attn.k_proj.bias", "attn_k.bias", Dim::KvDim, Dim::None, R::Attention, S::KBias, Qwen2},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", Dim::HeadDim, Dim::None, R::Norm, S::KNorm, Qwen3},
    {"self_attn.v_proj.weight", "attn_v.weight", Dim::KvDim, Dim::Hidden, R::Attention, S::V},
    {"self_attn.v_proj.bias", "attn_v.bias", Dim::KvDim, Dim::None, R::Attention, S::VBias, Qwen2},
    {"self_attn.o_proj.weight", "attn_output.weight", Dim::Hidden, Dim::QDim, R::Attention, S::O},
    {"post_attention_layernorm.weight", "ffn_norm.weight", Dim::Hidden, Dim::None, R::Norm, S::FfnNorm},
    {"mlp.gate_proj.weight", "ffn_gate.weight", Dim::Inter, Dim::Hidden, R::Mlp, S::Gate},
    {"mlp.up_proj.weight", "ffn_up.weight", Dim::Inter, Dim::Hidden, R::Mlp, S::Up},
    {"mlp.down_proj.weight", "ffn_down.weight", Dim::Hidden, Dim::Inter, R::Mlp, S::Down},
}};

// Outside the layers: the embedding first, then (after the layers) the final norm and the
// head. Tied embeddings reuse embed_tokens for the logits; some exports still store a copy,
// which is accepted when its shape is right.
constexpr TensorRow kEmbedding{
    "model.embed_tokens.weight", "token_embd.weight", Dim::Vocab, Dim::Hidden, R::Embedding, S::Embed};
constexpr std::array<TensorRow, 2> kOutputTensors{{
    {"model.norm.weight", "output_norm.weight", Dim::Hidden, Dim::None, R::Norm, S::FinalNorm},
    {"lm_head.weight", "output.weight", Dim::Vocab, Dim::Hidden, R::Output, S::LmHead},
}};

// A Llama 3 GGUF file carries its RoPE scaling as a divisor per frequency (llama.cpp computes it
// from the config's rope_scaling when converting); a Hugging Face directory has no such tensor.
constexpr TensorRow kRopeFreqs{
    "rope_freqs.weight", "rope_freqs.weight", Dim::HalfHeadDim, Dim::None, R::Rope, S::RopeFreqs, Llama};

constexpr std::array<TensorRow, 4> kGlobalTensors{kEmbedding, kRopeFreqs, kOutputTensors[0], kOutputTensors[1]};

constexpr std::string_view kHfLayerPrefix = "model.layers.";
constexpr std::string_view kGgufLayerPrefix = "blk.";

// Maps a name from one naming to the other through the table: "<from_prefix>N.<suffix>" to
// "<to_prefix>N.<its other suffix>", a global name to its other name. `to_gguf` picks the
// direction.
std::optional<std::string> map_name(std::string_view name, bool to_gguf) {
  const auto from = [&](const TensorRow& r) { return to_gguf ? r.hf : r.gguf; };
  const auto to = [&](const TensorRow& r) { return to_gguf ? r.gguf : r.hf; };
  for (const TensorRow& r : kGlobalTensors)
    if (name == from(r)) return std::string(to(r));
  const std::string_view from_prefix = to_gguf ? kHfLayerPrefix : kGgufLayerPrefix;
  if (!name.starts_with(from_prefix)) return std::nullopt;
  name.remove_prefix(from_prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view digits = name.substr(0, dot);
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;  // one spelling per layer
  int layer = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), layer);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  const std::string_view suffix = name.substr(dot + 1);
  for (const TensorRow& r : kLayerTensors)
    if (suffix == from(r)) return fmt::format("{}{}.{}", to_gguf ? kGgufLayerPrefix : kHfLayerPrefix, layer, to(r));
  return std::nullopt;
}

}  // namespace

std::vector<TensorSpec> tensor_manifest(const ModelConfig& cfg) {
  const auto size = [&](Dim d) -> uint64_t {
    switch (d) {
      case Dim::None:
        return 0;
      case Dim::Hidden:
        return static_cast<uint64_t>(cfg.hidden_size);
      case Dim::QDim:
        return static_cast<uint64_t>(cfg.q_dim());
      case Dim::HeadDim:
        return static_cast<uint64_t>(cfg.head_dim());
      case Dim::HalfHeadDim:
        return static_cast<uint64_t>(cfg.head_dim() / 2);
      case Dim::KvDim:
        return static_cast<uint64_t>(cfg.kv_dim());
      case Dim::Inter:
        return static_cast<uint64_t>(cfg.intermediate_size);
      case Dim::Vocab:
        return static_cast<uint64_t>(cfg.vocab_size);
    }
    return 0;
  };
  std::vector<TensorSpec> m;
  const unsigned arch_bit = 1u << static_cast<unsigned>(cfg.architecture);
  const auto add = [&](const TensorRow& r, const std::string& hf_prefix, const std::string& gguf_prefix, int layer) {
    if ((r.archs & arch_bit) == 0) return;
    std::vector<uint64_t> shape{size(r.rows)};
    if (r.cols != Dim::None) shape.push_back(size(r.cols));
    const bool required = (r.slot != S::LmHead || !cfg.tie_word_embeddings) && r.slot != S::RopeFreqs;
    m.push_back({hf_prefix + std::string(r.hf), std::move(shape), required, r.role, r.slot, layer,
                 gguf_prefix + std::string(r.gguf)});
  };
  add(kEmbedding, "", "", -1);
  add(kRopeFreqs, "", "", -1);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const int il = static_cast<int>(l);
    for (const TensorRow& r : kLayerTensors)
      add(r, fmt::format("{}{}.", kHfLayerPrefix, l), fmt::format("{}{}.", kGgufLayerPrefix, l), il);
  }
  for (const TensorRow& r : kOutputTensors) add(r, "", "", -1);
  return m;
}

bool stores_bare_model_names(const std::vector<std::string>& names) {
  bool bare = false;
  for (const std::string& name : names) {
    if (name.starts_with("model.")) return false;
    bare = bare || name == "embed_tokens.weight";
  }
  return bare;
}

std::string prefixed_model_name(std::string_view bare_name) {
  const bool inner =
      bare_name == "embed_tokens.weight" || bare_name == "norm.weight" || bare_name.starts_with("layers.");
  return inner ? "model." + std::string(bare_name) : std::string(bare_name);
}

std::vector<TensorSpec> stored_manifest(const ModelConfig& cfg, const std::vector<TensorInfo>& tensors) {
  std::vector<TensorSpec> manifest = tensor_manifest(cfg);
  std::vector<std::string> names;
  for (const TensorInfo& t : tensors) names.push_back(t.name);
  if (!stores_bare_model_names(names)) return manifest;
  for (TensorSpec& spec : manifest)
    if (spec.name.starts_with("model.")) spec.name.erase(0, std::string_view("model.").size());
  return manifest;
}

std::optional<std::string> hf_name_from_gguf(std::string_view gguf_name) {
  return map_name(gguf_name, false);
}

std::optional<std::string> gguf_name_from_hf(std::string_view hf_name) {
  return map_name(hf_name, true);
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
    case TensorRole::Rope:
      return "rope";
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
        problems.push_back(
            fmt::format("missing tensor '{}' (expected shape [{}])", spec.name, fmt::join(spec.shape, ", ")));
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
      problems.push_back(
          fmt::format("tensor '{}': expected shape [{}]{}, found [{}]{}", spec.name, fmt::join(shape, ", "),
                      block ? fmt::format(" (bytes of {} blocks)", weight_type_info(*block).gguf_name) : "",
                      fmt::join(it->second->shape, ", "),
                      undeclared_u8 ? " of U8 (U8 blocks need a type in __metadata__ "
                                      "\"nanoinfer.weight_types\")"
                                    : ""));
    }
  }
  for (const auto& t : tensors)
    if (!expected.contains(t.name))
      problems.push_back(
          fmt::format("unexpected tensor '{}' (shape [{}]) not in the manifest", t.name, fmt::join(t.shape, ", ")));
  for (const auto& [name, type] : block_types) {
    const char* where = !expected.contains(name) ? "the manifest" : !by_name.contains(name) ? "the file" : nullptr;
    if (where != nullptr)
      problems.push_back(
          fmt::format("tensor '{}' is declared {} but is not in {}", name, weight_type_info(type).gguf_name, where));
  }
  return problems;
}

}  // namespace nanoinfer
