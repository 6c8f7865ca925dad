// libFuzzer target for config.json and generation_config.json: any byte string must either
// parse into a config whose invariants hold, or throw nanoinfer::Error with a one-line message
// of bounded length (values are quoted as short excerpts, never dumped). The first byte picks
// the parser. Crashes, sanitizer reports, other exceptions and long or multi-line messages are
// findings. Run with -max_len well above 130 so nesting past the 64-level limit is reachable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nanoinfer/config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_config.h"

namespace {

void check_message(const nanoinfer::Error& e) {
  const std::string_view m = e.what();
  if (m.size() > 1000 || m.find('\n') != std::string_view::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 1) {
      const nanoinfer::GenerationConfig g = nanoinfer::GenerationConfig::parse(text, "fuzz");
      for (int32_t id : g.eos_token_ids) {
        if (id < 0) std::abort();
      }
    } else {
      const nanoinfer::ModelConfig c = nanoinfer::ModelConfig::parse(text, "fuzz");
      if (c.hidden_size <= 0 || c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0 ||
          c.num_attention_heads % c.num_key_value_heads != 0 || c.head_dim() % 2 != 0 ||
          !(c.rms_norm_eps > 0.0 && c.rms_norm_eps <= 1e-2)) {
        std::abort();
      }
    }
  } catch (const nanoinfer::Error& e) {
    check_message(e);
  }
  return 0;
}
