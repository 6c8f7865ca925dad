// libFuzzer target for the safetensors header parser: any byte string must either parse into
// a layout whose every tensor lies inside the input, or throw nanoinfer::Error with a one-line
// message of bounded length. Crashes, sanitizer reports, other exceptions, out-of-bounds
// layouts and long or multi-line messages are findings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "io/safetensors.h"
#include "nanoinfer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const nanoinfer::SafetensorsLayout layout = nanoinfer::parse_safetensors(bytes, "fuzz");
    // Invariants a caller relies on when it turns offsets into pointers.
    for (const auto& t : layout.tensors) {
      if (t.begin > t.end || layout.data_offset + t.end > size) std::abort();
      if (t.numel() * nanoinfer::dtype_size(t.dtype) != t.nbytes()) std::abort();
    }
  } catch (const nanoinfer::Error& e) {
    // Rejected input: the expected outcome for almost everything the fuzzer makes. The
    // message must be one line of bounded length: values are quoted as short excerpts.
    const std::string_view m = e.what();
    if (m.size() > 1000 || m.find('\n') != std::string_view::npos) std::abort();
  }
  return 0;
}
