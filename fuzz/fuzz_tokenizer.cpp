// libFuzzer target for the tokenizer's handling of untrusted bytes: any byte string must
// encode without crashing, every id must be valid, decode(encode(x)) must equal x with
// invalid UTF-8 replaced (the documented policy), and streaming decode must equal decode.
// The tokenizer is a small byte-level BPE built here, so the target needs no assets.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nanoinfer/tokenizer.h"
#include "tokenizer/tokenizer_utf8.h"

namespace {

// bytes_to_unicode spelling of one byte.
std::string byte_char(int b) {
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  int cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += !printable(x);
  }
  std::string s;
  nanoinfer::utf8::append(static_cast<char32_t>(cp), s);
  return s;
}

nanoinfer::Tokenizer make_tokenizer() {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    std::string key = byte_char(b);
    if (key == "\"" || key == "\\") key = "\\" + key;
    vocab += (b ? ",\"" : "\"") + key + "\":" + std::to_string(b);
  }
  vocab += ",\"aa\":256,\"Ġt\":257,\"Ġth\":258}";
  const std::string json =
      R"({"version":"1.0","truncation":null,"padding":null,)"
      R"("added_tokens":[{"id":259,"content":"<|im_end|>","special":true,"normalized":false}],)"
      R"("normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"Sequence","pretokenizers":[)"
      R"({"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},)"
      R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]},)"
      R"("post_processor":null,"decoder":{"type":"ByteLevel"},)"
      R"("model":{"type":"BPE","vocab":)" +
      vocab + R"(,"merges":[["a","a"],["Ġ","t"],["Ġt","h"]]}})";
  return nanoinfer::Tokenizer::from_json(json, "fuzz");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nanoinfer::Tokenizer tok = make_tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  // NFC may change text holding a code point >= U+0300 (lead byte >= 0xCC) other than the
  // inert U+FFFD; compare the round trip only when there is none.
  std::string expected;
  nanoinfer::utf8::append_lossy(text, expected);
  const std::string decoded = tok.decode(ids);
  bool nfc_inert = true;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected.compare(i, 3, "\xEF\xBF\xBD") == 0) {
      i += 2;
    } else if (static_cast<uint8_t>(expected[i]) >= 0xCC) {
      nfc_inert = false;
    }
  }
  if (nfc_inert && decoded != expected) std::abort();
  nanoinfer::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != decoded) std::abort();
  return 0;
}
