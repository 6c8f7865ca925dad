// The files of a Hugging Face model directory that nanoinfer reads, located and checked once
// so every command reports a missing file the same way.
#pragma once

#include <filesystem>

namespace nanoinfer {

struct ModelFiles {
  std::filesystem::path dir;
  std::filesystem::path config;   // dir/config.json
  std::filesystem::path weights;  // dir/model.safetensors (single file; shards unsupported)
};

// Throws a one-line Error naming the missing file and how to get a model (the download script
// or `nanoinfer synth`).
ModelFiles locate_model(const std::filesystem::path& dir);

}  // namespace nanoinfer
