// The default model built into the executable: the files of data/default-model, embedded at
// build time (CMakeLists.txt generates default_model_data.cpp, whose `.incbin` directives pull
// the files in as read-only data), so the binary runs without the checkout it was built from.
// An empty model path names it (nanoinfer/model_files.h); open_model_source reads it in place.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace nanoinfer {

struct EmbeddedFile {
  std::string_view name;             // "config.json", "model.safetensors", ...
  std::span<const std::byte> bytes;  // static data of the executable
};

// Every embedded file (generated at build time).
std::span<const EmbeddedFile> embedded_default_model();

// The named file's bytes, or nullopt when the default model has no such file.
std::optional<std::span<const std::byte>> embedded_file(std::string_view name);

// data/tinyshakespeare.txt, which the default model was trained on: quantize's default
// calibration text is its training part (generated at build time).
std::span<const std::byte> embedded_calibration_text();

}  // namespace nanoinfer
