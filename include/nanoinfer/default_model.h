// Where the embedded default model lives: data/default-model/ in the checkout this binary
// was built from (the path is compiled in, so the binary works from any working directory).
// generate, chat, perplexity and bench all resolve a missing -m through resolve_model_dir(),
// so they agree on the default and on the error when it is absent.
#pragma once

#include <filesystem>
#include <string_view>

namespace nanoinfer {

// <checkout>/data/default-model, whether or not it exists.
std::filesystem::path default_model_dir();

// `flag` (the -m value) when given; otherwise default_model_dir(), or an Error saying that no
// -m was given and the default model is missing (with its path) when it has no model.safetensors.
std::filesystem::path resolve_model_dir(std::string_view flag);

}  // namespace nanoinfer
