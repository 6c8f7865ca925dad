// libFuzzer target for loading tokenizer.json: any byte string must either load into a
// tokenizer that encodes a fixed text to valid ids, or throw nanoinfer::Error with a one-line
// message of bounded length. Crashes, sanitizer reports, other exceptions and long or
// multi-line messages are findings. Seed it with data/default-model/tokenizer.json and run
// with a -max_len that covers it (the file is 90 KB).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nanoinfer/error.h"
#include "nanoinfer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    const nanoinfer::Tokenizer tok = nanoinfer::Tokenizer::from_json(json, "fuzz");
    for (int32_t id : tok.encode("Hello, world! <|im_end|> 123 caf\xC3\xA9")) {
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    }
  } catch (const nanoinfer::Error& e) {
    const std::string_view m = e.what();
    if (m.size() > 1000 || m.find('\n') != std::string_view::npos) std::abort();
  }
  return 0;
}
