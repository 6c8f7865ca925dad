// The shapes of the names the hub deals in, checked by hand (no std::regex: GCC 12 warns inside
// it under the sanitizers, and a name check is a loop over characters).
#pragma once

#include <string_view>

namespace nanoinfer::hub {

// A repository name part (ORG or NAME): letters, digits, '-', '_', '.', starting with a letter or
// digit, at most 96 characters, never "..": what the hub accepts, nothing a path escapes with.
bool is_name_part(std::string_view s);

// A branch or tag (parts as above, '/' between them, as in refs/pr/1) or a commit hash.
bool is_revision(std::string_view s);

// 40 lower-case hex digits.
bool is_commit_hash(std::string_view s);

// "…-00001-of-00003.gguf" (any case): one part of a split GGUF file.
bool is_split_gguf_part(std::string_view path);

// "model-00001-of-00002.safetensors": a shard of a sharded checkpoint.
bool is_safetensors_shard(std::string_view path);

}  // namespace nanoinfer::hub
