#include "io/safetensors_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "base/output_files.h"
#include "io/atomic_file.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

// Fill callbacks produce data in chunks of at most this many bytes, so memory stays flat no
// matter how large a tensor is.
constexpr size_t kChunkBytes = size_t{8} << 20;

}  // namespace

uint64_t SafetensorsWriter::check_new(const std::string& name, DType dtype, const std::vector<uint64_t>& shape) {
  if (name.empty() || name == "__metadata__") fail("{}: invalid tensor name '{}'", path_.string(), name);
  for (const auto& e : entries_)
    if (e.name == name) fail("{}: tensor '{}' added twice", path_.string(), name);
  uint64_t nbytes = dtype_size(dtype);
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(nbytes, d, &nbytes))
      fail("{}: tensor '{}': shape overflows 64 bits", path_.string(), name);
  uint64_t total = 0;
  if (__builtin_add_overflow(data_bytes_, nbytes, &total))
    fail("{}: tensor '{}': the file's size overflows 64 bits", path_.string(), name);
  return nbytes;
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<uint64_t> shape,
                            std::span<const std::byte> data) {
  const uint64_t nbytes = check_new(name, dtype, shape);
  if (nbytes != data.size())
    fail("{}: tensor '{}': shape needs {} bytes, given {}", path_.string(), name, nbytes, data.size());
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, data, {}});
  data_bytes_ += nbytes;
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<uint64_t> shape, Fill fill) {
  const uint64_t nbytes = check_new(name, dtype, shape);
  entries_.push_back({std::move(name), dtype, std::move(shape), nbytes, {}, std::move(fill)});
  data_bytes_ += nbytes;
}

void SafetensorsWriter::write(const Progress& progress) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {
        {"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data section 8-byte aligned

  // The whole size is known before the first byte: a file that cannot fit fails now, not
  // after filling the disk (a config with 2^24-wide layers asks for hundreds of TiB).
  require_free_space(path_, 8 + text.size() + data_bytes_, path_.string());
  AtomicFile out(path_);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * i));
  out.write_all(len, sizeof len);
  out.write_all(text.data(), text.size());

  std::vector<std::byte> chunk;  // reused across tensors: [min(kChunkBytes, nbytes)]
  uint64_t done = 0;
  for (const auto& e : entries_) {
    if (!e.fill) {
      out.write_all(e.data.data(), e.data.size());
      done += e.nbytes;
      if (progress) progress(done, data_bytes_);
      continue;
    }
    const size_t elem = dtype_size(e.dtype);
    const size_t step = kChunkBytes / elem * elem;
    for (uint64_t pos = 0; pos < e.nbytes; pos += step) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(step, e.nbytes - pos));
      chunk.resize(n);
      e.fill(std::span(chunk.data(), n));
      out.write_all(chunk.data(), n);
      done += n;
      if (progress) progress(done, data_bytes_);
    }
  }
  out.commit();
}

}  // namespace nanoinfer
