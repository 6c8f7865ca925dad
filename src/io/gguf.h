// GGUF (versions 2 and 3, little-endian), the single-file model format of ggml / llama.cpp:
//
//   "GGUF"  u32 version  u64 tensor_count  u64 metadata_kv_count
//   metadata_kv_count x { string key, u32 value_type, value }
//   tensor_count x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset }
//   zero padding to `alignment`, then the data section; each tensor's offset is relative to
//   the data section and a multiple of `alignment` (metadata general.alignment, default 32).
//
// A string is a u64 byte length and that many bytes (no terminator). An array value is a u32
// element type, a u64 element count and the elements (arrays may nest).
//
// Dimensions are in ggml order: dims[0] is the length of a row (the contiguous axis), so a
// PyTorch weight of shape [out, in] is stored with dims {in, out}. `shape()` gives the
// row-major order used by safetensors and the rest of nanoinfer.
//
// parse_gguf is pure (no I/O, never writes into its input) and validates everything the
// file's author controls before using it; GgufFile maps a file read-only and hands out
// zero-copy views of tensor data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "io/gguf_blocks.h"
#include "io/mapped_file.h"

namespace nanoinfer {

// Metadata value types; the numbers are part of the file format.
enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);  // "u32", "string", "array", ...

// An array value: one std::vector of the element type. The alternatives are in type-id order,
// so items.index() is the element's GgufValueType.
struct GgufArray {
  std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>, std::vector<int16_t>,
               std::vector<uint32_t>, std::vector<int32_t>, std::vector<float>, std::vector<bool>,
               std::vector<std::string>, std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
               std::vector<double>>
      items;

  GgufValueType elem_type() const { return static_cast<GgufValueType>(items.index()); }
  size_t size() const;
  bool operator==(const GgufArray&) const = default;
};

// One metadata value; like GgufArray, value.index() is its GgufValueType.
struct GgufValue {
  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, GgufArray, uint64_t,
               int64_t, double>
      value;

  GgufValueType type() const { return static_cast<GgufValueType>(value.index()); }
  bool operator==(const GgufValue&) const = default;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type{};             // id 0: F32
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the row length
  uint64_t offset = 0;         // relative to the data section; a multiple of the alignment
  uint64_t nbytes = 0;         // bytes of data (whole blocks)

  uint64_t numel() const;               // product of dims (validated not to overflow)
  std::vector<uint64_t> shape() const;  // row-major, outermost first: dims reversed
};

// What a validated file says. Lookups by name are through the accessors below.
struct GgufLayout {
  std::string origin;                   // names the file in error messages
  uint32_t version = 0;                 // 2 or 3
  uint32_t alignment = 0;               // general.alignment, default 32
  uint64_t data_offset = 0;             // file offset of the data section
  uint64_t data_size = 0;               // bytes from data_offset to the end of the file (0 if past it)
  std::vector<GgufKeyValue> metadata;   // in file order
  std::vector<GgufTensorInfo> tensors;  // in file order

  // nullptr when absent.
  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed getters; each throws nanoinfer::Error naming the file and key when the key is
  // missing or its value does not fit ("metadata 'qwen2.block_count': expected an unsigned
  // integer, found string").
  const std::string& get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;  // any integer type, value >= 0
  uint32_t get_u32(std::string_view key) const;   // any integer type, value in [0, 2^32)
  double get_float(std::string_view key) const;   // f32 (widened exactly) or f64
  bool get_bool(std::string_view key) const;
  const GgufArray& get_array(std::string_view key) const;
  // The array's elements as std::vector<T>; throws unless the element type is exactly T.
  template <class T>
  const std::vector<T>& get_array_of(std::string_view key) const;

  // Called by parse_gguf once the vectors are final.
  void build_index();

 private:
  [[noreturn]] void bad_value(std::string_view key, std::string_view expected) const;
  const GgufValue& require(std::string_view key) const;
  std::map<std::string, size_t, std::less<>> key_index_;     // key -> position in metadata
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> position in tensors
};

// Limits a valid file stays within; anything beyond is reported as corrupt.
inline constexpr uint64_t kGgufMaxKeyBytes = 65535;      // the spec's limit
inline constexpr uint64_t kGgufMaxTensorNameBytes = 64;  // the spec's limit
inline constexpr uint32_t kGgufMaxDims = 4;              // ggml's limit
inline constexpr int kGgufMaxArrayDepth = 8;             // arrays of arrays of ...
// Real files hold 20 to 60 metadata keys and arrays of at most a vocabulary (152k tokens for
// Qwen2, 262k for the largest); a pair of a few bytes costs ~200 bytes in memory, so without a
// bound a file of tiny pairs grew to ~13x its size (320 MB took 4.2 GB). Counts are checked
// before anything is reserved or stored.
inline constexpr uint64_t kGgufMaxMetadataKeys = 4096;
inline constexpr uint64_t kGgufMaxArrayElems = uint64_t{1} << 22;

// Parses and validates a whole file's bytes: magic, version, every count and length against
// the bytes that remain, value types, array nesting depth, duplicate keys and tensor names,
// general.alignment, tensor types, dims (at most 4, rows of whole blocks, no overflow),
// offsets aligned, data inside the file and non-overlapping. Throws nanoinfer::Error with a
// one-line message naming `origin`, the field and the problem. The fuzzing entry point.
GgufLayout parse_gguf(std::span<const std::byte> file, std::string_view origin);

class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);  // throws Error

  const std::filesystem::path& path() const { return path_; }
  const GgufLayout& layout() const { return layout_; }
  const std::vector<GgufTensorInfo>& tensors() const { return layout_.tensors; }
  size_t file_size() const { return map_.size(); }

  const GgufTensorInfo* find(std::string_view name) const { return layout_.find_tensor(name); }
  // A tensor's bytes inside the mapping; the start is aligned to layout().alignment.
  std::span<const std::byte> data(const GgufTensorInfo& info) const;
  const GgufTensorInfo& get(std::string_view name) const;  // throws Error naming the tensor
  // Copies dst.size() bytes of a tensor from `offset` into it with pread, never touching the
  // mapping (how the weight loader reads: the file's pages never count as resident).
  void read(const GgufTensorInfo& info, uint64_t offset, std::span<std::byte> dst) const;

 private:
  std::filesystem::path path_;
  MappedFile map_;
  GgufLayout layout_;
};

// ---- template definitions -------------------------------------------------------------------

template <class T>
const std::vector<T>& GgufLayout::get_array_of(std::string_view key) const {
  const GgufArray& a = get_array(key);
  if (const auto* v = std::get_if<std::vector<T>>(&a.items)) return *v;
  const GgufArray probe{std::vector<T>{}};
  bad_value(key, std::string("an array of ") + std::string(gguf_value_type_name(probe.elem_type())));
}

}  // namespace nanoinfer
