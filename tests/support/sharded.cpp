#include "support/sharded.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "support/files.h"

namespace nanoinfer::test {

namespace fs = std::filesystem;

void write_sharded_copy(const fs::path& from, const fs::path& to, size_t shards) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.is_regular_file() && entry.path().filename() != "model.safetensors")
      fs::copy_file(entry.path(), to / entry.path().filename());
  }
  const SafetensorsFile in = SafetensorsFile::open(from / "model.safetensors");
  std::vector<SafetensorsWriter> writers;
  std::vector<std::string> names;
  for (size_t s = 0; s < shards; ++s) {
    names.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards));
    writers.emplace_back(to / names.back());
    for (const auto& [key, value] : in.layout().metadata) writers.back().set_metadata(key, value);
  }
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const TensorInfo& t = in.tensors()[i];
    const TensorView v = in.view(t);
    writers[i % shards].add(t.name, t.dtype, t.shape, {v.data, v.nbytes()});
    map[t.name] = names[i % shards];
    total += t.nbytes();
  }
  for (const SafetensorsWriter& w : writers) w.write();
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  write_text(to / "model.safetensors.index.json", index.dump(2));
}

std::vector<float> prompt_and_greedy_logits(const Model& model, int steps, std::vector<int32_t>* tokens) {
  const size_t V = model.vocab_size();
  const auto argmax = [](std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  };
  std::vector<int32_t> prompt;
  for (size_t i = 0; i < 10; ++i) prompt.push_back(static_cast<int32_t>((i * 31 + 3) % V));
  Sequence seq = model.new_sequence();
  const auto first = model.forward(prompt, seq, true);
  std::vector<float> all(first.begin(), first.end());
  int32_t next = argmax(first.last(V));
  for (int step = 0; step < steps; ++step) {
    tokens->push_back(next);
    const auto logits = model.forward({&next, 1}, seq);
    all.insert(all.end(), logits.begin(), logits.end());
    next = argmax(logits);
  }
  return all;
}

}  // namespace nanoinfer::test
