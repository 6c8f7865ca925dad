// Sharded safetensors checkpoints: the index (pure, fuzzed) and the shards opened as one file.
#include "io/safetensors_index.h"

#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "base/json_object.h"
#include "io/safetensors.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

namespace {

using IndexJson = nlohmann::json;

// Why `name` cannot be a shard of the index's directory, or "" when it can. A shard is a
// file beside the index: a '/' or '\\' could name one anywhere else ("../x", "/etc/x").
std::string shard_name_problem(std::string_view name) {
  if (name.empty()) return "an empty file name";
  if (name.size() > 255) return "a file name longer than 255 bytes";
  if (name == "." || name == "..") return "not a file name";
  for (const char c : name) {
    if (c == '/' || c == '\\') return "a path; a shard must be a file beside the index";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "a control character in the file name";
  }
  if (!name.ends_with(".safetensors")) return "not a .safetensors file";
  return {};
}

IndexJson parse_index_json(std::string_view text, std::string_view origin) {
  if (text.size() > kMaxSafetensorsIndexBytes)
    fail("{}: {} bytes, more than the {} byte limit of an index", origin, text.size(), kMaxSafetensorsIndexBytes);
  check_json_depth(text, origin);
  // nlohmann keeps the last of duplicate keys silently; a tensor listed twice is caught here.
  std::set<std::string, std::less<>> top_keys, tensors;
  std::string top;  // the top-level key whose value is being parsed
  const auto on_event = [&](int depth, IndexJson::parse_event_t event, IndexJson& parsed) {
    if (event != IndexJson::parse_event_t::key) return true;
    const auto& key = parsed.get_ref<const std::string&>();
    if (depth == 1) {
      if (!top_keys.insert(key).second) fail("{}: duplicate key '{}'", origin, excerpt(key));
      top = key;
    } else if (depth == 2 && top == "weight_map" && !tensors.insert(key).second) {
      fail("{}: tensor '{}' is listed twice in \"weight_map\"", origin, excerpt(key));
    }
    return true;
  };
  try {
    return IndexJson::parse(text, on_event);
  } catch (const IndexJson::exception& e) {
    fail("{}: not valid JSON: {}", origin, excerpt(e.what(), 200));
  }
}

}  // namespace

SafetensorsIndex parse_safetensors_index(std::string_view text, std::string_view origin) {
  const IndexJson root = parse_index_json(text, origin);
  if (!root.is_object()) fail("{}: must be a JSON object, found {}", origin, root.type_name());
  if (const auto m = root.find("metadata"); m != root.end() && !m->is_object() && !m->is_null())
    fail("{}: \"metadata\" must be an object, found {}", origin, m->type_name());
  const auto map = root.find("weight_map");
  if (map == root.end() || !map->is_object()) fail("{}: no \"weight_map\" object (tensor name -> shard file)", origin);
  if (map->empty()) fail("{}: \"weight_map\" lists no tensor", origin);

  SafetensorsIndex index;
  std::map<std::string, std::vector<std::string>, std::less<>> by_shard;
  for (const auto& [name, file] : map->items()) {
    if (name.empty()) fail("{}: \"weight_map\" holds a tensor with an empty name", origin);
    if (!file.is_string())
      fail("{}: tensor '{}' maps to {}, not a file name", origin, excerpt(name), json_excerpt(file));
    const auto& shard = file.get_ref<const std::string&>();
    if (const std::string why = shard_name_problem(shard); !why.empty())
      fail("{}: tensor '{}' maps to '{}': {}", origin, excerpt(name), excerpt(shard), why);
    by_shard[shard].push_back(name);
  }
  for (auto& [shard, names] : by_shard) {
    const auto position = static_cast<uint32_t>(index.shards.size());
    index.shards.push_back(shard);
    for (std::string& name : names) index.shard_of.emplace(std::move(name), position);
  }
  return index;
}

// ---- SafetensorsFile over the shards ------------------------------------------------------

SafetensorsFile SafetensorsFile::open_sharded(const std::filesystem::path& index_path) {
  const std::string origin = index_path.string();
  const SafetensorsIndex index = parse_safetensors_index(read_file(index_path, kMaxSafetensorsIndexBytes), origin);
  const std::filesystem::path dir = index_path.parent_path();
  SafetensorsFile f;
  f.path_ = index_path;
  // Which shard holds each tensor, from the shards themselves: each tensor in one shard only,
  // and in the one the index names.
  std::map<std::string_view, uint32_t, std::less<>> found;
  for (uint32_t s = 0; s < index.shards.size(); ++s) {
    const std::filesystem::path path = dir / index.shards[s];
    if (!path_exists(path)) fail("{}: shard '{}' is not in {}", origin, excerpt(index.shards[s]), dir.string());
    // A symlink is followed: the hub cache's snapshot files are links into its blobs.
    MappedFile map = MappedFile::open(path);
    SafetensorsLayout layout = parse_safetensors(map.bytes(), path.string());
    f.shards_.push_back({path, std::move(map), layout.data_offset});
    f.layout_.header_len += layout.header_len;
    for (auto& [key, value] : layout.metadata) f.layout_.metadata.emplace(key, std::move(value));
    for (TensorInfo& t : layout.tensors) {
      t.shard = s;
      f.layout_.tensors.push_back(std::move(t));
    }
  }
  for (const TensorInfo& t : f.layout_.tensors) {
    const std::string& shard = index.shards[t.shard];
    const auto [it, first] = found.emplace(t.name, t.shard);
    if (!first)
      fail("{}: tensor '{}' is in two shards, '{}' and '{}'", origin, excerpt(t.name),
           excerpt(index.shards[it->second]), excerpt(shard));
    const auto listed = index.shard_of.find(t.name);
    if (listed == index.shard_of.end())
      fail("{}: tensor '{}' of shard '{}' is not in the index", origin, excerpt(t.name), excerpt(shard));
    if (listed->second != t.shard)
      fail("{}: tensor '{}' is in shard '{}', but the index maps it to '{}'", origin, excerpt(t.name), excerpt(shard),
           excerpt(index.shards[listed->second]));
  }
  for (const auto& [name, shard] : index.shard_of) {
    if (!found.contains(name))
      fail("{}: the index maps tensor '{}' to shard '{}', which does not hold it", origin, excerpt(name),
           excerpt(index.shards[shard]));
  }
  for (size_t i = 0; i < f.layout_.tensors.size(); ++i) f.index_.emplace(f.layout_.tensors[i].name, i);
  return f;
}

}  // namespace nanoinfer
