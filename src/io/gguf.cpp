// GGUF reader: validation of untrusted bytes (pure, fuzzed), typed metadata access, the mapping.
#include "io/gguf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <set>
#include <utility>

#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian fields straight into host integers");

namespace {

// A key or tensor name from the file for an error message: it may hold any bytes (a newline,
// 64 KB of them), so it is quoted as a short excerpt with control characters escaped.
std::string quote(std::string_view name) {
  return excerpt(name, kGgufMaxTensorNameBytes);
}

constexpr std::array<std::string_view, 13> kValueTypeNames{"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                           "bool", "string", "array", "u64", "i64", "f64"};

// The fewest bytes one value of each type can occupy in a file: fixed-size scalars their size,
// a string its 8-byte length, an array its 4-byte type and 8-byte count. Any count read from
// the file is checked against (bytes left) / (this) before anything is allocated for it.
constexpr std::array<uint64_t, 13> kMinValueBytes{1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

// A metadata pair takes at least a key length (8), a 1-byte key, a type (4) and a 1-byte value;
// a tensor info at least a name length (8), a 1-byte name, n_dims (4), type (4), offset (8).
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;

constexpr uint32_t kDefaultAlignment = 32;

// Reads fields front to back; every read is bounds-checked and every failure names the field.
class Cursor {
 public:
  Cursor(std::span<const std::byte> file, std::string_view origin) : file_(file), origin_(origin) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return file_.size() - pos_; }

  [[noreturn]] void bad(std::string_view field, std::string_view problem) const {
    fail("{}: {}: {}", origin_, field, problem);
  }

  void need(uint64_t n, std::string_view field, std::string_view what) const {
    if (n > left())
      bad(field, fmt::format("truncated: {} needs {} bytes at offset {}, but the file ends {} "
                             "bytes later",
                             what, n, pos_, left()));
  }

  template <class T>
  T read(std::string_view field, std::string_view what) {
    need(sizeof(T), field, what);
    T v;
    std::memcpy(&v, file_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // Copies `count` fixed-size elements; the caller has bounded count by left().
  template <class T>
  std::vector<T> read_vector(uint64_t count) {
    std::vector<T> v(static_cast<size_t>(count));
    if (count > 0) std::memcpy(v.data(), file_.data() + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return v;
  }

  std::string read_string(std::string_view field, std::string_view what, uint64_t max_len) {
    const uint64_t len = read<uint64_t>(field, fmt::format("{} length", what));
    if (len > max_len) bad(field, fmt::format("{} length {} exceeds the limit of {} bytes", what, len, max_len));
    need(len, field, fmt::format("{} of length {}", what, len));
    std::string s(reinterpret_cast<const char*>(file_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  std::span<const std::byte> file_;
  std::string_view origin_;
  uint64_t pos_ = 0;
};

std::string_view type_name(uint32_t t) {
  return t < kValueTypeNames.size() ? kValueTypeNames[t] : "?";
}

uint32_t read_value_type(Cursor& c, std::string_view field, std::string_view what) {
  const uint32_t t = c.read<uint32_t>(field, what);
  if (t >= kValueTypeNames.size()) c.bad(field, fmt::format("unknown {} {} (valid: 0..12)", what, t));
  return t;
}

GgufArray read_array(Cursor& c, std::string_view field, int depth);

GgufValue read_value(Cursor& c, uint32_t type, std::string_view field, int depth) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::U8:
      return {c.read<uint8_t>(field, "u8 value")};
    case GgufValueType::I8:
      return {c.read<int8_t>(field, "i8 value")};
    case GgufValueType::U16:
      return {c.read<uint16_t>(field, "u16 value")};
    case GgufValueType::I16:
      return {c.read<int16_t>(field, "i16 value")};
    case GgufValueType::U32:
      return {c.read<uint32_t>(field, "u32 value")};
    case GgufValueType::I32:
      return {c.read<int32_t>(field, "i32 value")};
    case GgufValueType::F32:
      return {c.read<float>(field, "f32 value")};
    case GgufValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(field, "bool value");
      if (b > 1) c.bad(field, fmt::format("bool value {} is neither 0 nor 1", b));
      return {b == 1};
    }
    case GgufValueType::STRING:
      return {c.read_string(field, "string", UINT64_MAX)};
    case GgufValueType::ARRAY:
      return {read_array(c, field, depth + 1)};
    case GgufValueType::U64:
      return {c.read<uint64_t>(field, "u64 value")};
    case GgufValueType::I64:
      return {c.read<int64_t>(field, "i64 value")};
    case GgufValueType::F64:
      return {c.read<double>(field, "f64 value")};
  }
  c.bad(field, fmt::format("unknown value type {}", type));  // unreachable: checked by caller
}

// `depth` counts this array: a top-level array value is depth 1.
GgufArray read_array(Cursor& c, std::string_view field, int depth) {
  if (depth > kGgufMaxArrayDepth) c.bad(field, fmt::format("arrays nested more than {} deep", kGgufMaxArrayDepth));
  const uint32_t t = read_value_type(c, field, "array element type");
  const uint64_t n = c.read<uint64_t>(field, "array length");
  if (n > kGgufMaxArrayElems)
    c.bad(field, fmt::format("array length {} exceeds the limit of {} elements", n, kGgufMaxArrayElems));
  if (n > c.left() / kMinValueBytes[t])
    c.bad(field, fmt::format("array of {} {} values needs at least {} bytes per value, but only "
                             "{} bytes remain at offset {}",
                             n, type_name(t), kMinValueBytes[t], c.left(), c.pos()));
  GgufArray a;
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::U8:
      a.items = c.read_vector<uint8_t>(n);
      break;
    case GgufValueType::I8:
      a.items = c.read_vector<int8_t>(n);
      break;
    case GgufValueType::U16:
      a.items = c.read_vector<uint16_t>(n);
      break;
    case GgufValueType::I16:
      a.items = c.read_vector<int16_t>(n);
      break;
    case GgufValueType::U32:
      a.items = c.read_vector<uint32_t>(n);
      break;
    case GgufValueType::I32:
      a.items = c.read_vector<int32_t>(n);
      break;
    case GgufValueType::F32:
      a.items = c.read_vector<float>(n);
      break;
    case GgufValueType::U64:
      a.items = c.read_vector<uint64_t>(n);
      break;
    case GgufValueType::I64:
      a.items = c.read_vector<int64_t>(n);
      break;
    case GgufValueType::F64:
      a.items = c.read_vector<double>(n);
      break;
    case GgufValueType::BOOL: {
      const std::vector<uint8_t> raw = c.read_vector<uint8_t>(n);
      std::vector<bool> v(raw.size());
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] > 1) c.bad(field, fmt::format("bool element {} is {}, neither 0 nor 1", i, raw[i]));
        v[i] = raw[i] == 1;
      }
      a.items = std::move(v);
      break;
    }
    case GgufValueType::STRING: {
      std::vector<std::string> v(static_cast<size_t>(n));
      for (auto& s : v) s = c.read_string(field, "string element", UINT64_MAX);
      a.items = std::move(v);
      break;
    }
    case GgufValueType::ARRAY: {
      std::vector<GgufArray> v(static_cast<size_t>(n));
      for (auto& inner : v) inner = read_array(c, field, depth + 1);
      a.items = std::move(v);
      break;
    }
  }
  return a;
}

// "u32 7", "string", "array of i32": what a value is, for "expected X, found Y" messages.
std::string describe(const GgufValue& v) {
  const auto t = static_cast<uint32_t>(v.type());
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, GgufArray>) {
          return fmt::format("array of {}", type_name(static_cast<uint32_t>(x.elem_type())));
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "string";
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "bool true" : "bool false";
        } else {
          return fmt::format("{} {}", type_name(t), x);
        }
      },
      v.value);
}

std::string dims_string(const std::vector<uint64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

GgufTensorInfo read_tensor_info(Cursor& c, uint64_t index) {
  const std::string at = fmt::format("tensor info {}", index);
  GgufTensorInfo t;
  t.name = c.read_string(at, "name", kGgufMaxTensorNameBytes);
  if (t.name.empty()) c.bad(at, "empty tensor name");
  const std::string field = fmt::format("tensor '{}'", quote(t.name));

  const uint32_t n_dims = c.read<uint32_t>(field, "n_dims");
  if (n_dims > kGgufMaxDims) c.bad(field, fmt::format("n_dims {} exceeds the maximum of {}", n_dims, kGgufMaxDims));
  for (uint32_t i = 0; i < n_dims; ++i) t.dims.push_back(c.read<uint64_t>(field, "dimension"));

  const uint32_t type_id = c.read<uint32_t>(field, "type");
  const auto info = ggml_type_info(type_id);
  if (!info)
    c.bad(field, fmt::format("ggml type {} ({}) is not supported (supported: {})", type_id, ggml_type_name(type_id),
                             ggml_supported_type_names()));
  t.type = info->type;
  t.offset = c.read<uint64_t>(field, "offset");

  // ggml holds element counts in int64_t; the product must fit there, and so must the bytes.
  uint64_t numel = 1;
  for (uint64_t d : t.dims) {
    if (__builtin_mul_overflow(numel, d, &numel) || numel > uint64_t{INT64_MAX})
      c.bad(field, fmt::format("dims {} overflow a 64-bit element count", dims_string(t.dims)));
  }
  const uint64_t row = t.dims.empty() ? 1 : t.dims[0];
  if (row % info->block_elems != 0)
    c.bad(field, fmt::format("row length {} (dims[0] of {}) is not a multiple of the {}-element "
                             "{} block",
                             row, dims_string(t.dims), info->block_elems, info->name));
  if (__builtin_mul_overflow(numel / info->block_elems, uint64_t{info->block_bytes}, &t.nbytes))
    c.bad(field, fmt::format("dims {} of {} overflow a 64-bit byte count", dims_string(t.dims), info->name));
  return t;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  return type_name(static_cast<uint32_t>(t));
}

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, items);
}

uint64_t GgufTensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;  // validated not to overflow
  return n;
}

std::vector<uint64_t> GgufTensorInfo::shape() const {
  return {dims.rbegin(), dims.rend()};
}

// ---- GgufLayout accessors -------------------------------------------------------------------

void GgufLayout::build_index() {
  key_index_.clear();
  tensor_index_.clear();
  for (size_t i = 0; i < metadata.size(); ++i) key_index_.emplace(metadata[i].key, i);
  for (size_t i = 0; i < tensors.size(); ++i) tensor_index_.emplace(tensors[i].name, i);
}

const GgufValue* GgufLayout::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata[it->second].value;
}

const GgufTensorInfo* GgufLayout::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

const GgufValue& GgufLayout::require(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail("{}: metadata '{}' is missing", origin, quote(key));
  return *v;
}

void GgufLayout::bad_value(std::string_view key, std::string_view expected) const {
  fail("{}: metadata '{}': expected {}, found {}", origin, quote(key), expected, describe(require(key)));
}

const std::string& GgufLayout::get_string(std::string_view key) const {
  if (const auto* s = std::get_if<std::string>(&require(key).value)) return *s;
  bad_value(key, "a string");
}

uint64_t GgufLayout::get_uint(std::string_view key) const {
  const GgufValue& v = require(key);
  const auto result = std::visit(
      [](const auto& x) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_signed_v<T>)
            if (x < 0) return std::nullopt;
          return static_cast<uint64_t>(x);
        }
        return std::nullopt;
      },
      v.value);
  if (!result) bad_value(key, "a non-negative integer");
  return *result;
}

uint32_t GgufLayout::get_u32(std::string_view key) const {
  const GgufValue& v = require(key);
  const bool integer = v.type() != GgufValueType::F32 && v.type() != GgufValueType::F64 &&
                       v.type() != GgufValueType::BOOL && v.type() != GgufValueType::STRING &&
                       v.type() != GgufValueType::ARRAY;
  if (!integer) bad_value(key, "an integer in [0, 2^32)");
  const auto result = std::visit(
      [](const auto& x) -> std::optional<uint32_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_signed_v<T>)
            if (x < 0) return std::nullopt;
          if (static_cast<uint64_t>(x) > UINT32_MAX) return std::nullopt;
          return static_cast<uint32_t>(x);
        }
        return std::nullopt;
      },
      v.value);
  if (!result) bad_value(key, "an integer in [0, 2^32)");
  return *result;
}

double GgufLayout::get_float(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* f = std::get_if<float>(&v.value)) return *f;
  if (const auto* d = std::get_if<double>(&v.value)) return *d;
  bad_value(key, "an f32 or f64");
}

bool GgufLayout::get_bool(std::string_view key) const {
  if (const auto* b = std::get_if<bool>(&require(key).value)) return *b;
  bad_value(key, "a bool");
}

const GgufArray& GgufLayout::get_array(std::string_view key) const {
  if (const auto* a = std::get_if<GgufArray>(&require(key).value)) return *a;
  bad_value(key, "an array");
}

// ---- parse_gguf -----------------------------------------------------------------------------

GgufLayout parse_gguf(std::span<const std::byte> file, std::string_view origin) {
  if (file.empty()) fail("{}: file is empty", origin);
  Cursor c(file, origin);
  GgufLayout layout;
  layout.origin = origin;

  constexpr std::array<uint8_t, 4> kMagic{'G', 'G', 'U', 'F'};
  c.need(4, "header", "magic");
  std::array<uint8_t, 4> magic;
  std::memcpy(magic.data(), file.data(), 4);
  if (magic != kMagic)
    fail(
        "{}: not a GGUF file: magic bytes are {:02x} {:02x} {:02x} {:02x}, expected 47 47 55 46 "
        "(\"GGUF\")",
        origin, magic[0], magic[1], magic[2], magic[3]);
  (void)c.read<uint32_t>("header", "magic");

  layout.version = c.read<uint32_t>("header", "version");
  if (layout.version == 0x02000000u || layout.version == 0x03000000u)
    c.bad("header", fmt::format("version field reads 0x{:08x}: a big-endian GGUF file, which is "
                                "not supported",
                                layout.version));
  if (layout.version != 2 && layout.version != 3)
    c.bad("header", fmt::format("version {} is not supported (supported: 2, 3)", layout.version));

  const uint64_t n_tensors = c.read<uint64_t>("header", "tensor_count");
  const uint64_t n_kv = c.read<uint64_t>("header", "metadata_kv_count");
  if (n_kv > kGgufMaxMetadataKeys)
    c.bad("header", fmt::format("metadata_kv_count {} exceeds the limit of {} keys", n_kv, kGgufMaxMetadataKeys));
  if (n_kv > c.left() / kMinKvBytes)
    c.bad("header", fmt::format("metadata_kv_count {} needs at least {} bytes per pair, but only "
                                "{} bytes follow the header",
                                n_kv, kMinKvBytes, c.left()));
  if (n_tensors > c.left() / kMinTensorInfoBytes)
    c.bad("header", fmt::format("tensor_count {} needs at least {} bytes per tensor info, but "
                                "only {} bytes follow the header",
                                n_tensors, kMinTensorInfoBytes, c.left()));

  // Metadata.
  std::set<std::string, std::less<>> keys;
  layout.metadata.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string at = fmt::format("metadata pair {}", i);
    std::string key = c.read_string(at, "key", kGgufMaxKeyBytes);
    if (key.empty()) c.bad(at, "empty key");
    const std::string field = fmt::format("metadata '{}'", quote(key));
    if (!keys.insert(key).second) c.bad(field, "duplicate key");
    const uint32_t type = read_value_type(c, field, "value type");
    GgufValue value = read_value(c, type, field, 0);
    layout.metadata.push_back({std::move(key), std::move(value)});
  }

  layout.alignment = kDefaultAlignment;
  for (const auto& kv : layout.metadata) {
    if (kv.key != "general.alignment") continue;
    const auto* a = std::get_if<uint32_t>(&kv.value.value);
    if (a == nullptr) c.bad("metadata 'general.alignment'", fmt::format("expected u32, found {}", describe(kv.value)));
    if (*a < 8 || !std::has_single_bit(*a))
      c.bad("metadata 'general.alignment'", fmt::format("{} is not a power of two of at least 8", *a));
    layout.alignment = *a;
  }

  // Tensor infos (re-check the count: the metadata consumed bytes since the header check).
  if (n_tensors > c.left() / kMinTensorInfoBytes)
    c.bad("header", fmt::format("tensor_count {} needs at least {} bytes per tensor info, but "
                                "only {} bytes follow the metadata",
                                n_tensors, kMinTensorInfoBytes, c.left()));
  std::set<std::string, std::less<>> names;
  layout.tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t = read_tensor_info(c, i);
    if (!names.insert(t.name).second) c.bad(fmt::format("tensor '{}'", quote(t.name)), "duplicate name");
    layout.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment (c.pos() <= file size, so
  // this cannot overflow). A file with no tensor data may end before it.
  const uint64_t a = layout.alignment;
  layout.data_offset = (c.pos() + a - 1) / a * a;
  layout.data_size = file.size() > layout.data_offset ? file.size() - layout.data_offset : 0;

  for (const auto& t : layout.tensors) {
    const std::string field = fmt::format("tensor '{}'", quote(t.name));
    if (t.offset % a != 0) c.bad(field, fmt::format("offset {} is not a multiple of the alignment {}", t.offset, a));
    if (t.offset > layout.data_size || t.nbytes > layout.data_size - t.offset)
      c.bad(field, fmt::format("data [{}, +{} bytes) runs past the end of the data section ({} "
                               "bytes from file offset {})",
                               t.offset, t.nbytes, layout.data_size, layout.data_offset));
  }

  // Non-overlap: by offset, each tensor must start at or after the previous one's end.
  // Tensors with no bytes occupy nothing and cannot overlap.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : layout.tensors)
    if (t.nbytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* x, const auto* y) {
    return std::pair(x->offset, x->nbytes) < std::pair(y->offset, y->nbytes);
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    const GgufTensorInfo& cur = *by_offset[i];
    if (cur.offset < prev.offset + prev.nbytes)
      c.bad(fmt::format("tensor '{}'", quote(cur.name)),
            fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", cur.offset, cur.offset + cur.nbytes,
                        quote(prev.name), prev.offset, prev.offset + prev.nbytes));
  }

  layout.build_index();
  return layout;
}

// ---- GgufFile -------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::filesystem::path& path) {
  GgufFile f;
  f.path_ = path;
  f.map_ = MappedFile::open(path);
  f.layout_ = parse_gguf(f.map_.bytes(), path.string());
  return f;
}

std::span<const std::byte> GgufFile::data(const GgufTensorInfo& info) const {
  return map_.bytes().subspan(static_cast<size_t>(layout_.data_offset + info.offset), static_cast<size_t>(info.nbytes));
}

void GgufFile::read(const GgufTensorInfo& info, uint64_t offset, std::span<std::byte> dst) const {
  if (offset > info.nbytes || dst.size() > info.nbytes - offset) {
    fail("{}: tensor '{}': read of {} bytes at {} is outside its {} bytes", path_.string(), quote(info.name),
         dst.size(), offset, info.nbytes);
  }
  map_.read_at(layout_.data_offset + info.offset + offset, dst);
}

const GgufTensorInfo& GgufFile::get(std::string_view name) const {
  const GgufTensorInfo* info = find(name);
  if (info == nullptr) fail("{}: missing tensor '{}'", path_.string(), quote(name));
  return *info;
}

}  // namespace nanoinfer
