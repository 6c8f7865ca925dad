// safetensors reader: header validation (pure, fuzzed) and the file over a MappedFile.
#include "io/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "base/json_object.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

namespace {

using Json = nlohmann::ordered_json;  // keeps tensors in header order

// A header larger than this is not a model header but an attack or a corrupt length field;
// real headers are a few hundred KiB even for 100B-parameter checkpoints.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

// A shape for an error message; a hostile header may give thousands of dimensions.
std::string shape_string(const std::vector<uint64_t>& shape) {
  return excerpt(fmt::format("[{}]", fmt::join(shape, ", ")));
}

uint64_t read_u64_le(std::span<const std::byte> bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  return v;
}

// Parses one tensor entry: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}.
// `data_size` is the length of the data section, which every offset must lie within.
TensorInfo parse_entry(const std::string& name, const Json& entry, uint64_t data_size, std::string_view origin) {
  if (name.empty()) fail("{}: tensor with an empty name", origin);
  const std::string shown = excerpt(name);  // a hostile name is quoted, never dumped whole
  if (!entry.is_object()) fail("{}: tensor '{}': expected an object, found {}", origin, shown, entry.type_name());

  TensorInfo info;
  info.name = name;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string())
    fail("{}: tensor '{}': missing string field \"dtype\"", origin, shown);
  const auto& dtype_str = dtype_it->get_ref<const std::string&>();
  const auto dtype = dtype_from_name(dtype_str);
  if (!dtype)
    fail("{}: tensor '{}': unknown dtype \"{}\" (expected one of F32, F16, BF16, I8, U8, I32)", origin, shown,
         excerpt(dtype_str));
  info.dtype = *dtype;

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array())
    fail("{}: tensor '{}': missing array field \"shape\"", origin, shown);
  for (const auto& dim : *shape_it) {
    if (!dim.is_number_unsigned())
      fail("{}: tensor '{}': shape entries must be non-negative integers, found {}", origin, shown, json_excerpt(dim));
    info.shape.push_back(dim.get<uint64_t>());
  }

  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
      !(*off_it)[1].is_number_unsigned())
    fail("{}: tensor '{}': \"data_offsets\" must be [begin, end] non-negative integers", origin, shown);
  info.begin = (*off_it)[0].get<uint64_t>();
  info.end = (*off_it)[1].get<uint64_t>();
  if (info.begin > info.end)
    fail("{}: tensor '{}': data_offsets begin {} is after end {}", origin, shown, info.begin, info.end);
  if (info.end > data_size)
    fail("{}: tensor '{}': data_offsets [{}, {}] run past the end of the data section ({} bytes)", origin, shown,
         info.begin, info.end, data_size);

  // shape x dtype size must equal the byte length; the product is checked for overflow because
  // the shape is attacker-controlled (e.g. [2^32, 2^32] would wrap to 0).
  uint64_t expected = dtype_size(info.dtype);
  for (uint64_t dim : info.shape) {
    if (__builtin_mul_overflow(expected, dim, &expected))
      fail("{}: tensor '{}': shape {} x {} bytes overflows 64 bits", origin, shown, shape_string(info.shape),
           dtype_size(info.dtype));
  }
  if (expected != info.nbytes())
    fail("{}: tensor '{}': shape {} {} needs {} bytes, found {} (data_offsets [{}, {}])", origin, shown,
         shape_string(info.shape), dtype_str, expected, info.nbytes(), info.begin, info.end);
  return info;
}

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // cannot overflow: validated against the byte length
  return n;
}

SafetensorsLayout parse_safetensors(std::span<const std::byte> file, std::string_view origin) {
  if (file.empty()) fail("{}: file is empty", origin);
  if (file.size() < 8) fail("{}: truncated: {} bytes, but the header length field alone needs 8", origin, file.size());

  SafetensorsLayout layout;
  layout.header_len = read_u64_le(file.first(8));
  const uint64_t available = file.size() - 8;
  if (layout.header_len > kMaxHeaderBytes)
    fail("{}: header length {} exceeds the {} byte limit", origin, layout.header_len, kMaxHeaderBytes);
  if (layout.header_len > available)
    fail("{}: header length {} runs past the end of the file ({} bytes after the length field)", origin,
         layout.header_len, available);
  if (layout.header_len < 2) fail("{}: header length {} is too short for JSON", origin, layout.header_len);
  layout.data_offset = 8 + layout.header_len;
  const uint64_t data_size = file.size() - layout.data_offset;

  // Parse from a copy so nothing can ever write into (or read past) the mapping.
  const std::string header(reinterpret_cast<const char*>(file.data()) + 8, static_cast<size_t>(layout.header_len));
  // nlohmann silently keeps the last of duplicate keys; catch them while parsing instead.
  std::set<std::string, std::less<>> seen;
  const auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) fail("{}: duplicate tensor '{}' in header", origin, excerpt(key));
    }
    return true;
  };
  check_json_depth(header, origin);
  Json root;
  try {
    root = Json::parse(header, on_event);
  } catch (const Json::exception& e) {
    fail("{}: header is not valid JSON: {}", origin, excerpt(e.what(), 200));
  }
  if (!root.is_object()) fail("{}: header must be a JSON object, found {}", origin, root.type_name());

  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        fail("{}: \"__metadata__\" must be an object of strings, found {}", origin, value.type_name());
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string())
          fail("{}: \"__metadata__\" entry '{}' must be a string, found {}", origin, excerpt(mkey), mvalue.type_name());
        layout.metadata.emplace(mkey, mvalue.get<std::string>());
      }
      continue;
    }
    layout.tensors.push_back(parse_entry(key, value, data_size, origin));
  }

  // Non-overlap: sort by begin and require each tensor to start at or after the furthest end
  // seen so far. Empty tensors occupy no bytes and cannot overlap anything.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : layout.tensors)
    if (t.nbytes() > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (cur.begin < prev.end)
      fail("{}: tensor '{}' at bytes [{}, {}] overlaps tensor '{}' at [{}, {}]", origin, excerpt(cur.name), cur.begin,
           cur.end, excerpt(prev.name), prev.begin, prev.end);
  }
  return layout;
}

// ---- SafetensorsFile ----------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  return over_mapping(MappedFile::open(path), path);
}

SafetensorsFile SafetensorsFile::over(std::span<const std::byte> bytes, const std::filesystem::path& name) {
  return over_mapping(MappedFile::borrow(bytes, name), name);
}

SafetensorsFile SafetensorsFile::over_mapping(MappedFile map, const std::filesystem::path& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.layout_ = parse_safetensors(map.bytes(), path.string());
  f.shards_.push_back({path, std::move(map), f.layout_.data_offset});
  for (size_t i = 0; i < f.layout_.tensors.size(); ++i) f.index_.emplace(f.layout_.tensors[i].name, i);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &layout_.tensors[it->second];
}

size_t SafetensorsFile::file_size() const {
  size_t bytes = 0;
  for (const Shard& s : shards_) bytes += s.map.size();
  return bytes;
}

TensorView SafetensorsFile::view(const TensorInfo& info) const {
  const Shard& s = shards_.at(info.shard);
  return {&info, s.map.bytes().data() + s.data_offset + info.begin};
}

void SafetensorsFile::read(const TensorInfo& info, uint64_t offset, std::span<std::byte> dst) const {
  const Shard& s = shards_.at(info.shard);
  if (offset > info.nbytes() || dst.size() > info.nbytes() - offset) {
    fail("{}: tensor '{}': read of {} bytes at {} is outside its {} bytes", s.path.string(), info.name, dst.size(),
         offset, info.nbytes());
  }
  s.map.read_at(s.data_offset + info.begin + offset, dst);
}

TensorView SafetensorsFile::get(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) fail("{}: missing tensor '{}'", path_.string(), name);
  return view(*info);
}

}  // namespace nanoinfer
