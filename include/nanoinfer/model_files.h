// The files of a model path that nanoinfer reads, and the name of the embedded model (an empty
// model path).
#pragma once

#include <filesystem>

namespace nanoinfer {

// The files of a model directory that nanoinfer reads.
struct ModelFiles {
  std::filesystem::path dir;
  std::filesystem::path config;  // dir/config.json
  // dir/model.safetensors, or for a sharded checkpoint (no model.safetensors) its index,
  // dir/model.safetensors.index.json, which names the model-0000K-of-0000N.safetensors shards.
  std::filesystem::path weights;
  bool sharded() const { return weights.filename() == "model.safetensors.index.json"; }
};

// Throws a one-line Error naming the missing file and how to get a model (`nanoinfer pull`
// or `nanoinfer synth`).
ModelFiles locate_model(const std::filesystem::path& dir);

// How messages, `model:` lines and serve's model id name the embedded model (an empty model
// path): "(embedded)/default-model", a path whose last part is "default-model" and which is
// never read from disk.
std::filesystem::path embedded_model_label();

}  // namespace nanoinfer
