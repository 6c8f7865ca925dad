#include "model/quant_scheme.h"

#include <nlohmann/json.hpp>

#include "base/json_object.h"
#include "base/weight_blocks.h"
#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

std::map<std::string, WeightType> declared_block_types(const SafetensorsLayout& layout, std::string_view origin) {
  std::map<std::string, WeightType> types;
  const auto it = layout.metadata.find(std::string(kWeightTypesKey));
  if (it == layout.metadata.end()) return types;
  // JSON inside a header string: the header's own depth check never sees its brackets, and
  // both dump() and the destruction of a parsed value recurse once per level.
  const nlohmann::json j = parse_json(it->second, fmt::format("{}: __metadata__ \"{}\"", origin, kWeightTypesKey));
  if (!j.is_object()) fail("{}: __metadata__ \"{}\" is not a JSON object", origin, kWeightTypesKey);
  for (const auto& [name, value] : j.items()) {
    const std::optional<WeightType> type =
        value.is_string() ? weight_type_from_name(value.get<std::string>()) : std::nullopt;
    if (!type || !weight_type_info(*type).quantized) {
      fail("{}: __metadata__ \"{}\": tensor '{}' has type {}, expected a block type ({})", origin, kWeightTypesKey,
           excerpt(name), json_excerpt(value), weight_type_names(WeightTypeKind::Quantized, true));
    }
    types.emplace(name, *type);
  }
  return types;
}

std::string block_types_json(const std::map<std::string, WeightType>& types) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, type] : types) j[name] = std::string(weight_type_info(type).gguf_name);
  return j.dump();
}

bool is_logits_matrix(const TensorSpec& spec, bool tied_embeddings) {
  return spec.slot == TensorSlot::LmHead || (tied_embeddings && spec.slot == TensorSlot::Embed);
}

WeightType scheme_type(const TensorSpec& spec, WeightType base, bool tied_embeddings, std::optional<WeightType> head) {
  if (!is_logits_matrix(spec, tied_embeddings)) {
    // Q3_K needs rows of whole super-blocks; other rows take int4, as llama-quantize does.
    if (base == WeightType::Q3_K && spec.shape[1] % kSuperBlock != 0) return WeightType::Q4_0;
    return base;
  }
  if (head) return *head;
  return weight_type_info(base).quantized ? WeightType::Q8_0 : base;
}

}  // namespace nanoinfer
