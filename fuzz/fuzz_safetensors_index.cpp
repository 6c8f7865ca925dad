// libFuzzer target for a sharded checkpoint's index (model.safetensors.index.json): any byte
// string must either parse into shards that are plain .safetensors file names, each tensor mapped
// to one of them, or throw nanoinfer::Error with a one-line message of bounded length.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/safetensors_index.h"
#include "nanoinfer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nanoinfer::SafetensorsIndex index = nanoinfer::parse_safetensors_index(text, "fuzz");
    // Invariants the shard opener relies on: names that stay in the index's directory.
    for (const auto& shard : index.shards) {
      if (shard.empty() || shard.find('/') != std::string::npos || shard == ".." || !shard.ends_with(".safetensors"))
        std::abort();
    }
    for (const auto& [name, shard] : index.shard_of) {
      if (name.empty() || shard >= index.shards.size()) std::abort();
    }
  } catch (const nanoinfer::Error& e) {
    const std::string_view m = e.what();
    if (m.size() > 1000 || m.find('\n') != std::string_view::npos) std::abort();
  }
  return 0;
}
