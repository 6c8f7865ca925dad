// libFuzzer target for the GGUF parser: any byte string must either parse into a layout whose
// every tensor lies inside the input, aligned and non-overlapping, or throw nanoinfer::Error
// with a one-line message of bounded length (keys and names, which may hold any bytes, are
// quoted as short excerpts). Crashes, sanitizer reports, other exceptions, broken invariants
// and long or multi-line messages are findings. Accepted files also go through the typed
// getters and the dequantizers (first row of each tensor).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_blocks.h"
#include "nanoinfer/error.h"

namespace {

void check_message(const nanoinfer::Error& e) {
  const std::string_view m = e.what();
  if (m.size() > 1000 || m.find('\n') != std::string_view::npos) std::abort();
}

void check_invariants(const nanoinfer::GgufLayout& layout, size_t size) {
  using namespace nanoinfer;
  if (layout.alignment < 8 || (layout.alignment & (layout.alignment - 1)) != 0) std::abort();
  if (layout.data_offset % layout.alignment != 0) std::abort();
  for (const auto& t : layout.tensors) {
    if (t.offset % layout.alignment != 0) std::abort();
    if (t.dims.size() > kGgufMaxDims) std::abort();
    if (t.offset > layout.data_size || t.nbytes > layout.data_size - t.offset) std::abort();
    if (ggml_row_bytes(t.type, t.numel()) != t.nbytes) std::abort();
    if (layout.find_tensor(t.name) != &t) std::abort();
  }
  if (layout.data_size > 0 && layout.data_offset + layout.data_size != size) std::abort();
  for (const auto& kv : layout.metadata)
    if (layout.find(kv.key) != &kv.value) std::abort();
}

// The getters must either return or throw Error, whatever the value's type.
void exercise_getters(const nanoinfer::GgufLayout& layout) {
  using namespace nanoinfer;
  for (const auto& kv : layout.metadata) {
    const auto attempt = [](auto fn) {
      try {
        fn();
      } catch (const Error& e) {
        check_message(e);
      }
    };
    attempt([&] { (void)layout.get_string(kv.key); });
    attempt([&] { (void)layout.get_uint(kv.key); });
    attempt([&] { (void)layout.get_u32(kv.key); });
    attempt([&] { (void)layout.get_float(kv.key); });
    attempt([&] { (void)layout.get_bool(kv.key); });
    attempt([&] { (void)layout.get_array_of<std::string>(kv.key); });
    attempt([&] { (void)layout.get_array_of<int32_t>(kv.key); });
  }
}

void dequantize_first_rows(const nanoinfer::GgufLayout& layout, const uint8_t* data) {
  using namespace nanoinfer;
  std::vector<float> out;
  for (const auto& t : layout.tensors) {
    if (t.nbytes == 0) continue;
    const uint64_t row = t.dims.empty() ? 1 : t.dims[0];
    const uint64_t n =
        std::min<uint64_t>(row, 4096) / ggml_type_info(t.type).block_elems * ggml_type_info(t.type).block_elems;
    out.resize(static_cast<size_t>(n));
    dequantize_row(t.type, reinterpret_cast<const std::byte*>(data + layout.data_offset + t.offset), out.data(),
                   static_cast<size_t>(n));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const nanoinfer::GgufLayout layout = nanoinfer::parse_gguf(bytes, "fuzz");
    check_invariants(layout, size);
    exercise_getters(layout);
    dequantize_first_rows(layout, data);
  } catch (const nanoinfer::Error& e) {
    // Rejected input: the expected outcome for almost everything the fuzzer makes.
    check_message(e);
  }
  return 0;
}
