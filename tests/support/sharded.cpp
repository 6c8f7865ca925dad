#include "support/sharded.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
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

}  // namespace nanoinfer::test
