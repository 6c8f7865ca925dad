#include "nanoinfer/engine.h"

#include "nanoinfer/error.h"

#ifndef NANOINFER_SOURCE_DIR_LIB
#error "CMakeLists.txt defines NANOINFER_SOURCE_DIR_LIB (the checkout) for this file"
#endif

namespace nanoinfer {

std::filesystem::path default_model_dir() {
  return std::filesystem::path(NANOINFER_SOURCE_DIR_LIB) / "data" / "default-model";
}

std::filesystem::path resolve_model_path(std::string_view path) {
  if (!path.empty()) return std::filesystem::path(path);
  const std::filesystem::path dir = default_model_dir();
  if (!std::filesystem::exists(dir / "model.safetensors")) {
    fail("no -m given and the embedded default model is missing ({} not found); pass -m DIR",
         (dir / "model.safetensors").string());
  }
  return dir;
}

}  // namespace nanoinfer
