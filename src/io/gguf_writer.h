// Writes GGUF v3 files (layout in io/gguf.h) atomically through AtomicFile: an interrupted or
// failed write never leaves a partial file under the final name.
//
// Metadata is written in the order keys were first set; tensor infos and data in the order
// tensors were added. Every tensor's data starts at a multiple of the alignment and is padded
// with zeros to the next multiple (the last one too), which is the layout llama.cpp's own
// writer produces and its loader expects. Data comes from a caller-owned span or from a fill
// callback that produces it in chunks, so a large model is never held in memory twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace nanoinfer {

class GgufWriter {
 public:
  // Called with consecutive chunks that together cover the tensor's bytes, in order; each
  // chunk is a whole number of blocks. The callback must fill every byte.
  using Fill = std::function<void(std::span<std::byte> chunk)>;
  // Called after each chunk is written: bytes of tensor data written so far, and the total.
  using Progress = std::function<void(uint64_t done, uint64_t total)>;

  explicit GgufWriter(std::filesystem::path path) : path_(std::move(path)) {}

  // Sets a metadata value; setting a key again replaces the value in its first position.
  // "general.alignment" must be a u32 power of two >= 8 and sets the file's alignment.
  void set(std::string key, GgufValue value);
  void set_string(std::string key, std::string value) { set(std::move(key), {std::move(value)}); }
  void set_u32(std::string key, uint32_t value) { set(std::move(key), {value}); }
  void set_i32(std::string key, int32_t value) { set(std::move(key), {value}); }
  void set_f32(std::string key, float value) { set(std::move(key), {value}); }
  void set_bool(std::string key, bool value) { set(std::move(key), {value}); }
  void set_array(std::string key, GgufArray value) { set(std::move(key), {std::move(value)}); }

  // `dims` in ggml order (dims[0] is the row length; a [out, in] matrix is {in, out}).
  // `data` is not copied: it must stay valid until write(). Its size must match type x dims.
  void add(std::string name, GgmlType type, std::vector<uint64_t> dims, std::span<const std::byte> data);
  void add(std::string name, GgmlType type, std::vector<uint64_t> dims, Fill fill);

  uint32_t alignment() const { return alignment_; }
  uint64_t data_bytes() const { return data_bytes_; }  // tensor bytes so far, without padding

  // Writes the file. Throws nanoinfer::Error naming the path on any failure, after removing
  // the temporary file.
  void write(const Progress& progress = {}) const;

 private:
  struct Entry {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    uint64_t nbytes;
    std::span<const std::byte> data;  // either data ...
    Fill fill;                        // ... or fill
  };
  uint64_t check_new(const std::string& name, GgmlType type, const std::vector<uint64_t>& dims);

  std::filesystem::path path_;
  std::vector<GgufKeyValue> metadata_;
  std::vector<Entry> entries_;
  uint32_t alignment_ = 32;
  uint64_t data_bytes_ = 0;
};

}  // namespace nanoinfer
