#include "engine/default_model.h"

namespace nanoinfer {

std::optional<std::span<const std::byte>> embedded_file(std::string_view name) {
  for (const EmbeddedFile& f : embedded_default_model()) {
    if (f.name == name) return f.bytes;
  }
  return std::nullopt;
}

}  // namespace nanoinfer
