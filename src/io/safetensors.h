// safetensors: an 8-byte little-endian header length N, N bytes of JSON describing every
// tensor ({"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, with
// offsets relative to the data section that starts at 8 + N}, then the raw data.
//
// The file is memory-mapped read-only and tensors are zero-copy views into the mapping; the
// weight loader reads with pread instead (SafetensorsFile::read). The
// header is parsed from a copy and everything its author controls is validated before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"
#include "nanoinfer/dtype.h"

namespace nanoinfer {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  uint32_t shard = 0;  // the file of a sharded checkpoint that holds it (0 for a single file)
  uint64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// What a validated header says about a file. For a sharded checkpoint opened as one file:
// header_len the sum of the shards', data_offset 0 (each shard has its own), the tensors of
// every shard and the union of their metadata (the first shard's value where two differ).
struct SafetensorsLayout {
  uint64_t header_len = 0;                      // N
  uint64_t data_offset = 0;                     // 8 + N
  std::vector<TensorInfo> tensors;              // in header order
  std::map<std::string, std::string> metadata;  // "__metadata__", string values only
};

// Parses and validates a whole file's bytes (header length, JSON, dtypes, shape x dtype size
// == byte length, offsets inside the data section and non-overlapping). Pure: no I/O, no
// writes into `file`; throws nanoinfer::Error with a one-line message naming the problem.
// `origin` names the file in messages. This is the fuzzing entry point.
SafetensorsLayout parse_safetensors(std::span<const std::byte> file, std::string_view origin);

// A zero-copy view of one tensor's bytes inside a mapping.
struct TensorView {
  const TensorInfo* info = nullptr;
  const std::byte* data = nullptr;
  DType dtype() const { return info->dtype; }
  const std::vector<uint64_t>& shape() const { return info->shape; }
  size_t nbytes() const { return static_cast<size_t>(info->nbytes()); }
};

// One safetensors file, or the shards of a sharded checkpoint seen as one: each tensor is
// viewed and read from its own shard's mapping.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);  // throws Error
  // The shards a model.safetensors.index.json names, beside it (io/safetensors_index.h): every
  // shard validated as a file, every tensor in exactly one shard, the one the index maps it to,
  // and every tensor of the index present. path() is the index's.
  static SafetensorsFile open_sharded(const std::filesystem::path& index_path);
  // The same over a file's bytes already in memory (see MappedFile::borrow), validated the
  // same way; `name` stands for the path. The bytes must outlive the object.
  static SafetensorsFile over(std::span<const std::byte> bytes, const std::filesystem::path& name);

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsLayout& layout() const { return layout_; }
  const std::vector<TensorInfo>& tensors() const { return layout_.tensors; }
  size_t file_size() const;  // of all its shards
  size_t shard_count() const { return shards_.size(); }
  // The whole mapping of a single file (of the first shard of a sharded checkpoint).
  std::span<const std::byte> bytes() const { return shards_.front().map.bytes(); }

  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  TensorView view(const TensorInfo& info) const;
  TensorView get(std::string_view name) const;  // throws Error naming the missing tensor
  // Copies dst.size() bytes of a tensor, starting `offset` bytes into it, with pread (see
  // MappedFile::read_at): how the weight loader reads, so the file is never resident twice.
  void read(const TensorInfo& info, uint64_t offset, std::span<std::byte> dst) const;

 private:
  struct Shard {
    std::filesystem::path path;
    MappedFile map;
    uint64_t data_offset = 0;
  };
  static SafetensorsFile over_mapping(MappedFile map, const std::filesystem::path& path);
  std::filesystem::path path_;
  std::vector<Shard> shards_;  // one for a single file
  SafetensorsLayout layout_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in layout_.tensors
};

}  // namespace nanoinfer
