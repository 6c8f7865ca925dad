// A sharded safetensors checkpoint's index, model.safetensors.index.json:
//
//   {"metadata": {"total_size": N}, "weight_map": {"tensor.name": "model-00001-of-00002.safetensors", ...}}
//
// Every Hugging Face checkpoint above a few GB is stored this way. The index is parsed and
// validated here (pure, fuzzed); SafetensorsFile::open_sharded opens the shards it names and
// checks them against it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

// Real indexes are a few hundred KiB (one line per tensor); more is not an index.
inline constexpr uint64_t kMaxSafetensorsIndexBytes = uint64_t{64} << 20;

inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";

struct SafetensorsIndex {
  std::vector<std::string> shards;                        // file names, sorted, each once
  std::map<std::string, uint32_t, std::less<>> shard_of;  // tensor name -> position in `shards`
};

// Parses and validates an index's text: JSON (depth-limited, no duplicate keys), an object with
// a non-empty object "weight_map" of tensor name -> shard file name, and "metadata" an object
// when present. A shard name must be a plain file name in the index's directory ending in
// .safetensors: no '/', '\\', control characters, and not "." or "..". `origin` names the
// index in messages; an Error is one line naming the problem.
SafetensorsIndex parse_safetensors_index(std::string_view text, std::string_view origin);

}  // namespace nanoinfer
