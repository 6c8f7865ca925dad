// Loading a Hugging Face tokenizer.json: every field is either reproduced exactly or
// rejected with a message naming it.
#include <simdjson.h>

#include <algorithm>
#include <initializer_list>

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer {

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the other 68 bytes
// are mapped to U+0100.. in byte order. Returns, per code point, the byte (or -1).
std::vector<int> byte_level_decoder_table() {
  std::vector<int> table(256 + 68, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    table[printable ? b : next++] = b;
  }
  return table;
}

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Small accessors that turn JSON shape errors into messages naming the field.
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void bad(std::string_view where, std::string_view what) const {
    fail("tokenizer '{}': {}: {}", origin_, where, what);
  }

  object obj(element e, std::string_view where) const {
    object o;
    if (e.get(o) != simdjson::SUCCESS) bad(where, "expected an object");
    return o;
  }
  array arr(element e, std::string_view where) const {
    array a;
    if (e.get(a) != simdjson::SUCCESS) bad(where, "expected an array");
    return a;
  }
  std::string_view str(element e, std::string_view where) const {
    std::string_view s;
    if (e.get(s) != simdjson::SUCCESS) bad(where, "expected a string");
    return s;
  }
  std::optional<element> field(object o, std::string_view key) const {
    element e;
    if (o.at_key(key).get(e) != simdjson::SUCCESS) return std::nullopt;
    return e;
  }
  element required(object o, std::string_view key, std::string_view where) const {
    auto e = field(o, key);
    if (!e) bad(where, fmt::format("missing field '{}'", key));
    return *e;
  }
  bool is_null(std::optional<element> e) const { return !e || e->is_null(); }
  // A boolean field that must have the given value if present (absent means the default).
  bool flag(object o, std::string_view key, bool default_value, std::string_view where) const {
    auto e = field(o, key);
    if (is_null(e)) return default_value;
    bool b;
    if (e->get(b) != simdjson::SUCCESS) bad(where, fmt::format("field '{}': expected true or false", key));
    return b;
  }
  void require_flag(object o, std::string_view key, bool required, std::string_view where) const {
    if (flag(o, key, required, where) != required) {
      bad(where, fmt::format("{}={} is not supported", key, !required));
    }
  }
  // Every key of `o` must be one we handle.
  void known_fields(object o, std::initializer_list<std::string_view> known, std::string_view where) const {
    for (auto kv : o) {
      bool ok = false;
      for (auto k : known) ok = ok || kv.key == k;
      if (!ok) bad(where, fmt::format("unsupported field '{}'", excerpt(kv.key)));
    }
  }
  std::string_view type_of(object o, std::string_view where) const {
    return str(required(o, "type", where), fmt::format("{}.type", where));
  }

 private:
  std::string_view origin_;
};

void load_normalizer(const Reader& r, std::optional<element> e, Tokenizer::Impl& impl) {
  if (r.is_null(e)) return;
  const object o = r.obj(*e, "normalizer");
  const std::string_view type = r.type_of(o, "normalizer");
  if (type != "NFC") r.bad("normalizer", fmt::format("type '{}' is not supported (supported: NFC)", excerpt(type)));
  r.known_fields(o, {"type"}, "normalizer");
  impl.nfc = true;
}

void load_pre_tokenizer(const Reader& r, std::optional<element> e, Tokenizer::Impl& impl) {
  if (r.is_null(e)) r.bad("pre_tokenizer", "null is not supported (byte-level BPE needs ByteLevel)");
  std::vector<object> steps;
  const object top = r.obj(*e, "pre_tokenizer");
  if (r.type_of(top, "pre_tokenizer") == "Sequence") {
    r.known_fields(top, {"type", "pretokenizers"}, "pre_tokenizer");
    for (element step : r.arr(r.required(top, "pretokenizers", "pre_tokenizer"), "pre_tokenizer.pretokenizers")) {
      steps.push_back(r.obj(step, "pre_tokenizer.pretokenizers[]"));
    }
  } else {
    steps.push_back(top);
  }
  // Supported: [Split(Isolated)] followed by ByteLevel(use_regex=false).
  bool byte_level = false;
  for (object step : steps) {
    const std::string_view type = r.type_of(step, "pre_tokenizer");
    if (type == "Split" && !impl.split && !byte_level) {
      constexpr std::string_view where = "pre_tokenizer Split";
      r.known_fields(step, {"type", "pattern", "behavior", "invert"}, where);
      const object pattern = r.obj(r.required(step, "pattern", where), "pre_tokenizer Split.pattern");
      auto regex = r.field(pattern, "Regex");
      if (!regex) r.bad(where, "only a {\"Regex\": ...} pattern is supported");
      const std::string_view text = r.str(*regex, "pre_tokenizer Split.pattern.Regex");
      impl.split = SplitPattern::from_regex(text);
      if (!impl.split) {
        r.bad(where, fmt::format("regex '{}' is not supported (supported: {})", excerpt(text),
                                 SplitPattern::supported_description()));
      }
      const std::string_view behavior = r.str(r.required(step, "behavior", where), "pre_tokenizer Split.behavior");
      if (behavior != "Isolated")
        r.bad(where, fmt::format("behavior '{}' is not supported (supported: Isolated)", excerpt(behavior)));
      r.require_flag(step, "invert", false, where);
    } else if (type == "ByteLevel" && !byte_level) {
      constexpr std::string_view where = "pre_tokenizer ByteLevel";
      r.known_fields(step, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, where);
      r.require_flag(step, "add_prefix_space", false, where);
      if (r.flag(step, "use_regex", true, where)) r.bad(where, "use_regex=true (the GPT-2 split) is not supported");
      byte_level = true;
    } else {
      r.bad("pre_tokenizer",
            fmt::format("'{}' is not supported here (supported: Split then ByteLevel)", excerpt(type)));
    }
  }
  if (!byte_level) r.bad("pre_tokenizer", "a ByteLevel step is required");
}

// One post-processor step: ByteLevel (adds nothing), or TemplateProcessing whose "single"
// template is special tokens, the text ($A), special tokens (Llama 3's "<|begin_of_text|> $A",
// Qwen3-Embedding's "$A <|endoftext|>"). The ids before the text are appended to `prefix`,
// those after it to `suffix`.
void load_post_step(const Reader& r, object p, std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  const std::string_view type = r.type_of(p, "post_processor");
  if (type == "ByteLevel") {
    r.known_fields(p, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, "post_processor");
    return;
  }
  if (type != "TemplateProcessing") {
    r.bad(
        "post_processor",
        fmt::format("type '{}' is not supported (supported: ByteLevel, TemplateProcessing, Sequence)", excerpt(type)));
  }
  constexpr std::string_view where = "post_processor TemplateProcessing";
  r.known_fields(p, {"type", "single", "pair", "special_tokens"}, where);
  const object specials = r.obj(r.required(p, "special_tokens", where), where);
  bool text_seen = false;
  for (element piece : r.arr(r.required(p, "single", where), where)) {
    const object o = r.obj(piece, where);
    if (auto seq = r.field(o, "Sequence")) {
      if (r.str(r.required(r.obj(*seq, where), "id", where), where) != "A" || text_seen)
        r.bad(where, "the single template must hold the text ($A) once");
      text_seen = true;
      continue;
    }
    const auto special = r.field(o, "SpecialToken");
    if (!special) r.bad(where, "a single-template piece is neither Sequence nor SpecialToken");
    std::vector<int32_t>& ids = text_seen ? suffix : prefix;
    const std::string_view name = r.str(r.required(r.obj(*special, where), "id", where), where);
    const auto entry = r.field(specials, name);
    if (!entry) r.bad(where, fmt::format("special token '{}' is not in special_tokens", excerpt(name)));
    for (element id : r.arr(r.required(r.obj(*entry, where), "ids", where), where)) {
      int64_t v;
      if (id.get(v) != simdjson::SUCCESS || v < 0 || v >= (int64_t{1} << 24))
        r.bad(where, "expected a non-negative integer id below 2^24");
      if (ids.size() >= 8) r.bad(where, fmt::format("more than 8 tokens {} the text", text_seen ? "after" : "before"));
      ids.push_back(static_cast<int32_t>(v));
    }
  }
  if (!text_seen) r.bad(where, "the single template must hold the text ($A) once");
}

void load_decoder_and_post_processor(const Reader& r, object root, Tokenizer::Impl& impl) {
  auto decoder = r.field(root, "decoder");
  if (r.is_null(decoder)) r.bad("decoder", "null is not supported (expected ByteLevel)");
  const object d = r.obj(*decoder, "decoder");
  if (auto type = r.type_of(d, "decoder"); type != "ByteLevel") {
    r.bad("decoder", fmt::format("type '{}' is not supported (supported: ByteLevel)", excerpt(type)));
  }
  // The ByteLevel decoder's flags only affect offsets, never the decoded text.
  r.known_fields(d, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, "decoder");

  auto post = r.field(root, "post_processor");
  if (r.is_null(post)) return;
  const object p = r.obj(*post, "post_processor");
  if (r.type_of(p, "post_processor") != "Sequence") return load_post_step(r, p, impl.prompt_prefix, impl.prompt_suffix);
  r.known_fields(p, {"type", "processors"}, "post_processor");
  for (element step : r.arr(r.required(p, "processors", "post_processor"), "post_processor"))
    load_post_step(r, r.obj(step, "post_processor"), impl.prompt_prefix, impl.prompt_suffix);
}

void set_token(Tokenizer::Impl& impl, int32_t id, std::string bytes, Tokenizer::Impl::Kind kind) {
  if (static_cast<size_t>(id) >= impl.bytes.size()) {
    impl.bytes.resize(id + 1);
    impl.kind.resize(id + 1, Tokenizer::Impl::Kind::kNone);
  }
  impl.bytes[id] = std::move(bytes);
  impl.kind[id] = kind;
}

// `where` is called only to name the field in an error (formatting it eagerly for each of
// 151k vocabulary entries would cost more than parsing them).
template <class Where>
int32_t token_id_field(const Reader& r, element e, Where where) {
  int64_t id;
  if (e.get(id) != simdjson::SUCCESS || id < 0 || id >= (int64_t{1} << 24)) {
    r.bad(where(), "expected a non-negative integer id below 2^24");
  }
  return static_cast<int32_t>(id);
}

void load_model(const Reader& r, object root, Tokenizer::Impl& impl) {
  constexpr std::string_view where = "model";
  const object m = r.obj(r.required(root, "model", "tokenizer"), where);
  if (auto type = r.type_of(m, where); type != "BPE") {
    r.bad(where, fmt::format("type '{}' is not supported (supported: BPE)", excerpt(type)));
  }
  r.known_fields(m,
                 {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                  "byte_fallback", "ignore_merges", "vocab", "merges"},
                 where);
  if (!r.is_null(r.field(m, "dropout"))) r.bad(where, "dropout is not supported (must be null)");
  for (std::string_view affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto e = r.field(m, affix);
    if (!r.is_null(e) && !r.str(*e, affix).empty()) r.bad(where, fmt::format("a non-empty {} is not supported", affix));
  }
  r.require_flag(m, "byte_fallback", false, where);
  const bool ignore_merges = r.flag(m, "ignore_merges", false, where);
  // unk_token and fuse_unk never apply: every byte has a token (checked below), so BPE
  // never meets an unknown symbol.

  static const std::vector<int> byte_of = byte_level_decoder_table();
  StringTable whole_tokens;  // bytes -> id, for ignore_merges
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  const object vocab = r.obj(r.required(m, "vocab", where), "model.vocab");
  impl.content_to_id.reserve(vocab.size() + 1024);  // + room for added tokens
  impl.bytes.reserve(vocab.size() + 1024);
  for (auto kv : vocab) {
    const int32_t id = token_id_field(r, kv.value, [&] { return fmt::format("model.vocab['{}']", excerpt(kv.key)); });
    std::string bytes;
    for (size_t pos = 0; pos < kv.key.size();) {
      const utf8::Decoded d = utf8::decode(kv.key, pos);
      if (d.status != utf8::Status::kValid || d.cp >= byte_of.size() || byte_of[d.cp] < 0) {
        r.bad("model.vocab", fmt::format("token '{}' (id {}) is not in the byte-level alphabet", excerpt(kv.key), id));
      }
      bytes += static_cast<char>(byte_of[d.cp]);
      pos += d.length;
    }
    if (bytes.size() == 1) byte_ids[static_cast<uint8_t>(bytes[0])] = id;
    if (ignore_merges) whole_tokens.insert(bytes, static_cast<uint32_t>(id));
    if (static_cast<size_t>(id) < impl.kind.size() && impl.kind[id] != Tokenizer::Impl::Kind::kNone) {
      // A second token for the same id would silently replace the first in decode.
      r.bad("model.vocab", fmt::format("id {} is given to two tokens (the second is '{}')", id, excerpt(kv.key)));
    }
    set_token(impl, id, std::move(bytes), Tokenizer::Impl::Kind::kVocab);
    if (!impl.content_to_id.insert(kv.key, static_cast<uint32_t>(id))) {
      r.bad("model.vocab", fmt::format("token '{}' appears twice", excerpt(kv.key)));
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_ids[b] < 0) r.bad("model.vocab", fmt::format("no token for byte 0x{:02X}", b));
  }

  std::vector<BpeMerge> merges;
  auto lookup = [&](std::string_view content, size_t rank) {
    const uint32_t* id = impl.content_to_id.find(content);
    if (id == nullptr) {
      r.bad("model.merges", fmt::format("merge {} uses '{}', which is not in the vocabulary", rank, excerpt(content)));
    }
    return static_cast<int32_t>(*id);
  };
  std::string joined;
  for (element e : r.arr(r.required(m, "merges", where), "model.merges")) {
    std::string_view left, right;
    if (e.type() == element_type::STRING) {  // the old "left right" format
      const std::string_view s = r.str(e, "model.merges[]");
      const size_t space = s.find(' ');
      if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
        r.bad("model.merges",
              fmt::format("merge {} ('{}') is not two tokens separated by one space", merges.size(), excerpt(s)));
      }
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {
      const array pair = r.arr(e, "model.merges[]");
      if (pair.size() != 2) r.bad("model.merges", fmt::format("merge {} is not a pair", merges.size()));
      left = r.str(pair.at(0).value_unsafe(), "model.merges[][0]");
      right = r.str(pair.at(1).value_unsafe(), "model.merges[][1]");
    }
    const size_t rank = merges.size();
    joined.assign(left).append(right);
    merges.push_back({lookup(left, rank), lookup(right, rank), lookup(joined, rank)});
  }
  impl.bpe.emplace(byte_ids, merges, ignore_merges, std::move(whole_tokens));
}

void load_added_tokens(const Reader& r, object root, Tokenizer::Impl& impl, std::string (*nfc)(std::string_view)) {
  auto e = r.field(root, "added_tokens");
  if (r.is_null(e)) return;
  for (element t : r.arr(*e, "added_tokens")) {
    const object o = r.obj(t, "added_tokens[]");
    const int32_t id = token_id_field(r, r.required(o, "id", "added_tokens[]"), [] { return "added_tokens[].id"; });
    const std::string where = fmt::format("added token {}", id);
    r.known_fields(o, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}, where);
    const std::string content(r.str(r.required(o, "content", where), where));
    if (content.empty()) r.bad(where, "empty content");
    for (std::string_view f : {"single_word", "lstrip", "rstrip"}) r.require_flag(o, f, false, where);
    const bool special = r.flag(o, "special", false, where);
    const bool normalized = r.flag(o, "normalized", !special, where);
    set_token(impl, id, content, special ? Tokenizer::Impl::Kind::kAddedSpecial : Tokenizer::Impl::Kind::kAdded);
    impl.content_to_id.set(content, static_cast<uint32_t>(id));
    if (normalized && impl.nfc) {
      impl.normalized_added.add(nfc(content), id, special);
    } else if (normalized) {
      impl.normalized_added.add(content, id, special);
    } else {
      impl.raw_added.add(content, id, special);
    }
  }
}

std::optional<int32_t> config_token(const Reader& r, object config, std::string_view key, const Tokenizer::Impl& impl) {
  auto e = r.field(config, key);
  if (r.is_null(e)) return std::nullopt;
  std::string_view content;
  if (e->type() == element_type::OBJECT) {  // {"content": "...", ...} (AddedToken form)
    content = r.str(r.required(r.obj(*e, key), "content", key), key);
  } else {
    content = r.str(*e, fmt::format("tokenizer_config.json {}", key));
  }
  const uint32_t* id = impl.content_to_id.find(content);
  if (id == nullptr) r.bad("tokenizer_config.json", fmt::format("{} '{}' is not a token", key, excerpt(content)));
  return static_cast<int32_t>(*id);
}

// Parses `text` with `parser` (which owns the result). simdjson's parser is iterative and
// enforces a nesting limit itself; the limit is the one every JSON reader uses (json_limits.h).
element parse_json(simdjson::dom::parser& parser, std::string_view text, const Reader& r, std::string_view file) {
  if (parser.allocate(std::max<size_t>(text.size(), 64), kMaxJsonDepth) != simdjson::SUCCESS) {
    r.bad(file, fmt::format("cannot allocate a parser for {} bytes", text.size()));
  }
  element root;
  if (auto err = parser.parse(simdjson::padded_string(text)).get(root); err) {
    if (err == simdjson::DEPTH_ERROR) r.bad(file, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
    r.bad(file, fmt::format("not valid JSON ({})", simdjson::error_message(err)));
  }
  return root;
}

// Hugging Face writes an unbounded model_max_length as int(1e30), a 31-digit integer (Llama 3's
// tokenizer_config.json has one), which simdjson's DOM refuses: integers beyond 64 bits are not
// numbers it can hold. Such a literal outside strings gets ".0" appended, making it a double
// (no field read here is one).
std::string widen_big_integers(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        in_string = false;
      ++i;
      continue;
    }
    if (c == '"') in_string = true;
    if (c < '0' || c > '9') {
      out += c;
      ++i;
      continue;
    }
    // A whole integer literal: not digits of a fraction or an exponent, not followed by one.
    const char before = out.empty() ? ' ' : out.back();
    const bool exponent_sign = (before == '-' || before == '+') && out.size() >= 2 &&
                               (out[out.size() - 2] == 'e' || out[out.size() - 2] == 'E');
    const bool inside = before == '.' || before == 'e' || before == 'E' || exponent_sign;
    const size_t end = std::min(text.find_first_not_of("0123456789", i), text.size());
    out.append(text.substr(i, end - i));
    const bool fraction = end < text.size() && (text[end] == '.' || text[end] == 'e' || text[end] == 'E');
    if (end - i > 19 && !fraction && !inside) out += ".0";
    i = end;
  }
  return out;
}

}  // namespace

std::string nfc_normalize(std::string_view text);  // tokenizer.cpp

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                               std::string_view origin) {
  auto impl = std::make_shared<Impl>();
  impl->origin = origin;
  const Reader r(impl->origin);
  simdjson::dom::parser parser;
  const object root = r.obj(parse_json(parser, tokenizer_json, r, "tokenizer.json"), "tokenizer.json");
  r.known_fields(root,
                 {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor",
                  "decoder", "model"},
                 "tokenizer.json");
  for (std::string_view f : {"truncation", "padding"}) {
    if (!r.is_null(r.field(root, f))) r.bad("tokenizer.json", fmt::format("{} is not supported (must be null)", f));
  }
  load_normalizer(r, r.field(root, "normalizer"), *impl);
  load_pre_tokenizer(r, r.field(root, "pre_tokenizer"), *impl);
  load_decoder_and_post_processor(r, root, *impl);
  load_model(r, root, *impl);
  load_added_tokens(r, root, *impl, &nfc_normalize);
  for (const std::vector<int32_t>* ids : {&impl->prompt_prefix, &impl->prompt_suffix}) {
    for (const int32_t id : *ids) {
      if (static_cast<size_t>(id) >= impl->kind.size() || impl->kind[id] == Tokenizer::Impl::Kind::kNone)
        r.bad("post_processor", fmt::format("token id {} is not in the vocabulary", id));
    }
  }

  if (!tokenizer_config_json.empty()) {
    simdjson::dom::parser config_parser;
    const std::string config_text = widen_big_integers(tokenizer_config_json);
    const object config =
        r.obj(parse_json(config_parser, config_text, r, "tokenizer_config.json"), "tokenizer_config.json");
    impl->clean_up_tokenization_spaces = r.flag(config, "clean_up_tokenization_spaces", false, "tokenizer_config.json");
    impl->eos_id = config_token(r, config, "eos_token", *impl);
    impl->pad_id = config_token(r, config, "pad_token", *impl);
    // A string, or (newer files) a list of named templates of which "default" is the one used.
    if (auto t = r.field(config, "chat_template"); t && t->type() == element_type::STRING)
      impl->chat_format = chat_format_of(r.str(*t, "tokenizer_config.json chat_template"));
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view origin) {
  return from_json(tokenizer_json, {}, origin);
}

Tokenizer Tokenizer::load(const std::filesystem::path& model_dir) {
  const auto json_path = model_dir / "tokenizer.json";
  const std::string json = read_file(json_path, kMaxTokenizerFileBytes);
  const auto config_path = model_dir / "tokenizer_config.json";
  const std::string config = path_exists(config_path) ? read_file(config_path, kMaxConfigFileBytes) : std::string();
  return from_json(json, config, json_path.string());
}

}  // namespace nanoinfer
