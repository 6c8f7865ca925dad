#include "io/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "io/atomic_file.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

// Fill callbacks produce data in chunks of about this many bytes, so memory stays flat no
// matter how large a tensor is.
constexpr size_t kGgufChunkBytes = size_t{8} << 20;

// llama.cpp keeps tensor names in a 64-byte buffer with a terminator; longer names are valid
// GGUF but would not load there.
constexpr size_t kMaxWrittenNameBytes = 63;

// Appends little-endian fields to the header buffer (the host is little-endian; see gguf.cpp).
class Out {
 public:
  template <class T>
  void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  std::vector<char> bytes;
};

void put_array(Out& out, const GgufArray& a);

// One value's payload, as a scalar or as an element of an array: the same encoding.
template <class T>
void put_payload(Out& out, const T& x) {
  if constexpr (std::is_same_v<T, std::string>) {
    out.put_string(x);
  } else if constexpr (std::is_same_v<T, GgufArray>) {
    put_array(out, x);
  } else if constexpr (std::is_same_v<T, bool>) {
    out.put<uint8_t>(x ? 1 : 0);
  } else {
    out.put(x);
  }
}

void put_value(Out& out, const GgufValue& v) {
  std::visit([&](const auto& x) { put_payload(out, x); }, v.value);
}

void put_array(Out& out, const GgufArray& a) {
  out.put(static_cast<uint32_t>(a.elem_type()));
  out.put<uint64_t>(a.size());
  std::visit(
      [&](const auto& items) {
        using T = typename std::decay_t<decltype(items)>::value_type;
        for (const auto& x : items) put_payload<T>(out, x);
      },
      a.items);
}

// Deepest array nesting inside a value (0 for scalars).
int array_depth(const GgufArray& a) {
  int inner = 0;
  if (const auto* v = std::get_if<std::vector<GgufArray>>(&a.items))
    for (const auto& x : *v) inner = std::max(inner, array_depth(x));
  return 1 + inner;
}

uint64_t padding(uint64_t pos, uint64_t alignment) {
  return (alignment - pos % alignment) % alignment;
}

}  // namespace

void GgufWriter::set(std::string key, GgufValue value) {
  if (key.empty() || key.size() > kGgufMaxKeyBytes)
    fail("{}: metadata key of {} bytes (must be 1..{})", path_.string(), key.size(), kGgufMaxKeyBytes);
  if (const auto* a = std::get_if<GgufArray>(&value.value); a && array_depth(*a) > kGgufMaxArrayDepth)
    fail("{}: metadata '{}': arrays nested more than {} deep", path_.string(), key, kGgufMaxArrayDepth);
  if (key == "general.alignment") {
    const auto* a = std::get_if<uint32_t>(&value.value);
    if (a == nullptr || *a < 8 || !std::has_single_bit(*a))
      fail("{}: general.alignment must be a u32 power of two of at least 8", path_.string());
    alignment_ = *a;
  }
  for (auto& kv : metadata_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({std::move(key), std::move(value)});
}

uint64_t GgufWriter::check_new(const std::string& name, GgmlType type, const std::vector<uint64_t>& dims) {
  if (name.empty() || name.size() > kMaxWrittenNameBytes)
    fail("{}: tensor name '{}' must be 1..{} bytes", path_.string(), name, kMaxWrittenNameBytes);
  for (const auto& e : entries_)
    if (e.name == name) fail("{}: tensor '{}' added twice", path_.string(), name);
  if (dims.size() > kGgufMaxDims)
    fail("{}: tensor '{}': {} dims (at most {})", path_.string(), name, dims.size(), kGgufMaxDims);
  uint64_t numel = 1;
  for (uint64_t d : dims)
    if (__builtin_mul_overflow(numel, d, &numel) || numel > uint64_t{INT64_MAX})
      fail("{}: tensor '{}': dims overflow 64 bits", path_.string(), name);
  const GgmlTypeInfo& info = ggml_type_info(type);
  const uint64_t row = dims.empty() ? 1 : dims[0];
  if (row % info.block_elems != 0)
    fail("{}: tensor '{}': row length {} is not a multiple of the {}-element {} block", path_.string(), name, row,
         info.block_elems, info.name);
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel / info.block_elems, uint64_t{info.block_bytes}, &nbytes))
    fail("{}: tensor '{}': byte size overflows 64 bits", path_.string(), name);
  return nbytes;
}

void GgufWriter::add(std::string name, GgmlType type, std::vector<uint64_t> dims, std::span<const std::byte> data) {
  const uint64_t nbytes = check_new(name, type, dims);
  if (nbytes != data.size())
    fail("{}: tensor '{}': {} dims need {} bytes, given {}", path_.string(), name, ggml_type_info(type).name, nbytes,
         data.size());
  entries_.push_back({std::move(name), type, std::move(dims), nbytes, data, {}});
  data_bytes_ += nbytes;
}

void GgufWriter::add(std::string name, GgmlType type, std::vector<uint64_t> dims, Fill fill) {
  const uint64_t nbytes = check_new(name, type, dims);
  entries_.push_back({std::move(name), type, std::move(dims), nbytes, {}, std::move(fill)});
  data_bytes_ += nbytes;
}

void GgufWriter::write(const Progress& progress) const {
  Out out;
  out.put<uint32_t>(0x46554747u);  // "GGUF" read as a little-endian u32
  out.put<uint32_t>(3);
  out.put<uint64_t>(entries_.size());
  out.put<uint64_t>(metadata_.size());
  for (const auto& kv : metadata_) {
    out.put_string(kv.key);
    out.put(static_cast<uint32_t>(kv.value.type()));
    put_value(out, kv.value);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const auto& e : entries_) {
    out.put_string(e.name);
    out.put<uint32_t>(static_cast<uint32_t>(e.dims.size()));
    for (uint64_t d : e.dims) out.put(d);
    out.put(static_cast<uint32_t>(e.type));
    out.put(offset);
    offset += e.nbytes + padding(e.nbytes, alignment_);
  }

  AtomicFile file(path_);
  file.write_all(out.bytes.data(), out.bytes.size());
  file.write_zeros(padding(out.bytes.size(), alignment_));

  std::vector<std::byte> chunk;  // reused across tensors: [min(kGgufChunkBytes, nbytes)]
  uint64_t done = 0;
  for (const auto& e : entries_) {
    if (!e.fill) {
      file.write_all(e.data.data(), e.data.size());
      done += e.nbytes;
      if (progress) progress(done, data_bytes_);
    } else {
      const size_t block = ggml_type_info(e.type).block_bytes;
      const size_t step = std::max<size_t>(kGgufChunkBytes / block, 1) * block;
      for (uint64_t pos = 0; pos < e.nbytes; pos += step) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(step, e.nbytes - pos));
        chunk.resize(n);
        e.fill(std::span(chunk.data(), n));
        file.write_all(chunk.data(), n);
        done += n;
        if (progress) progress(done, data_bytes_);
      }
    }
    file.write_zeros(padding(e.nbytes, alignment_));
  }
  file.commit();
}

}  // namespace nanoinfer
