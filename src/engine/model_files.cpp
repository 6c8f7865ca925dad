#include "nanoinfer/engine.h"

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {
constexpr const char* kHowToGetOne =
    "get one with scripts/download-qwen2.5-0.5b.sh or `nanoinfer synth --config "
    "data/qwen2.5-0.5b-instruct/config.json --out models/synth-0.5b`";
}  // namespace

ModelFiles locate_model(const std::filesystem::path& dir) {
  ModelFiles f{dir, dir / "config.json", dir / "model.safetensors"};
  if (!std::filesystem::is_directory(dir))
    fail("{}: not a model directory ({})", dir.string(), kHowToGetOne);
  if (!std::filesystem::exists(f.config))
    fail("{}: not found; a model directory needs its config.json ({})", f.config.string(),
         kHowToGetOne);
  if (!std::filesystem::exists(f.weights)) {
    if (std::filesystem::exists(dir / "model.safetensors.index.json"))
      fail("{}: not found; sharded checkpoints (model.safetensors.index.json) are not supported",
           f.weights.string());
    fail("{}: not found ({})", f.weights.string(), kHowToGetOne);
  }
  return f;
}

}  // namespace nanoinfer
