// A model directory rewritten as a sharded checkpoint, as Hugging Face stores models of more
// than a few GB: model-0000K-of-0000N.safetensors shards and model.safetensors.index.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "nanoinfer/model.h"

namespace nanoinfer::test {

// Copies the model directory `from` into `to` (created) with its model.safetensors split into
// `shards` files, tensor i into shard i % shards (so every shard holds tensors of every kind),
// each with the original's __metadata__, and the index naming them. Every other regular file
// of `from` is copied as it is.
void write_sharded_copy(const std::filesystem::path& from, const std::filesystem::path& to, size_t shards);

// What two loads of one model are compared by: the logits of a 10-token prompt (every position)
// and of `steps` greedy steps after it, appended; the greedy tokens go to `tokens`.
std::vector<float> prompt_and_greedy_logits(const Model& model, int steps, std::vector<int32_t>* tokens);

}  // namespace nanoinfer::test
