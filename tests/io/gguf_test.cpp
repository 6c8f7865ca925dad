// GGUF reader and writer: golden bytes, round trips of every value and tensor type, and
// corrupted files that must each be rejected with a one-line message naming the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "nanoinfer/error.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using test::TempDir;
using ::testing::HasSubstr;

// Hand-assembled little-endian GGUF bytes, for golden files and for corruptions the writer
// would never produce.
class Raw {
 public:
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& f32(float v) { return put(v); }
  Raw& str(std::string_view s) {
    u64(s.size());
    for (char ch : s) bytes.push_back(static_cast<std::byte>(ch));
    return *this;
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return str_raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& str_raw(std::string_view s) {
    for (char ch : s) bytes.push_back(static_cast<std::byte>(ch));
    return *this;
  }
  // A tensor info: name, dims, type, offset.
  Raw& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Raw& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    return *this;
  }
  Raw& data(size_t n) {  // n bytes 0, 1, 2, ...
    for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<std::byte>(i));
    return *this;
  }
  std::vector<std::byte> bytes;

 private:
  template <class T>
  Raw& put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
};

// The message of the Error that parsing `bytes` throws, or "" if it parses.
std::string gguf_parse_error(const std::vector<std::byte>& bytes) {
  try {
    parse_gguf(bytes, "t.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small valid file: one u32 key, one F32 [2] tensor "t" with data 1.0, 2.0.
Raw small_file() {
  Raw r;
  r.header(1, 1).str("a").u32(4).u32(7);
  r.tensor("t", {2}, 0, 0).pad_to(32).f32(1.0f).f32(2.0f).pad_to(32);
  return r;
}

std::vector<std::byte> some_bytes(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  return v;
}

// ---- valid files ------------------------------------------------------------------------------

TEST(GgufParse, SmallHandBuiltFile) {
  const auto bytes = small_file().bytes;
  const GgufLayout layout = parse_gguf(bytes, "t.gguf");
  EXPECT_EQ(layout.version, 3u);
  EXPECT_EQ(layout.alignment, 32u);
  EXPECT_EQ(layout.data_offset, 96u);  // 74 bytes of header and infos, padded to 32
  EXPECT_EQ(layout.data_size, 32u);
  EXPECT_EQ(layout.get_u32("a"), 7u);
  ASSERT_EQ(layout.tensors.size(), 1u);
  const GgufTensorInfo& t = layout.tensors[0];
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.type, ggml_type_of(WeightType::F32));
  EXPECT_EQ(t.dims, (std::vector<uint64_t>{2}));
  EXPECT_EQ(t.nbytes, 8u);
  EXPECT_EQ(layout.find_tensor("t"), &t);
  EXPECT_EQ(layout.find_tensor("u"), nullptr);
}

TEST(GgufParse, AcceptsVersion2AndAFileWithoutData) {
  Raw r;
  r.header(0, 1, 2).str("general.name").u32(8).str("x");  // ends right after the metadata
  const GgufLayout layout = parse_gguf(r.bytes, "t.gguf");
  EXPECT_EQ(layout.version, 2u);
  EXPECT_EQ(layout.get_string("general.name"), "x");
  EXPECT_EQ(layout.data_size, 0u);
}

TEST(GgufParse, ShapeIsDimsReversed) {
  Raw r;
  r.header(1, 0).tensor("w", {64, 3}, 8, 0).pad_to(32).data(3 * 2 * 34);  // Q8_0 [3][64]
  const GgufLayout layout = parse_gguf(r.bytes, "t.gguf");
  EXPECT_EQ(layout.tensors[0].shape(), (std::vector<uint64_t>{3, 64}));
  EXPECT_EQ(layout.tensors[0].numel(), 192u);
  EXPECT_EQ(layout.tensors[0].nbytes, 204u);
}

TEST(GgufParse, TypedGettersNameKeyAndFoundType) {
  Raw r;
  r.header(0, 4).str("s").u32(8).str("hi").str("neg").u32(5).u32(static_cast<uint32_t>(-3));
  r.str("big").u32(10).u64(uint64_t{1} << 40).str("f").u32(6).f32(0.5f);
  const GgufLayout layout = parse_gguf(r.bytes, "m.gguf");
  EXPECT_EQ(layout.get_uint("big"), uint64_t{1} << 40);
  EXPECT_EQ(layout.get_float("f"), 0.5);
  auto error = [&](auto fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error([&] { layout.get_u32("s"); }),
            "m.gguf: metadata 's': expected an integer in [0, 2^32), found string");
  EXPECT_EQ(error([&] { layout.get_uint("neg"); }),
            "m.gguf: metadata 'neg': expected a non-negative integer, found i32 -3");
  EXPECT_EQ(error([&] { layout.get_u32("big"); }),
            "m.gguf: metadata 'big': expected an integer in [0, 2^32), found u64 1099511627776");
  EXPECT_EQ(error([&] { layout.get_string("nope"); }), "m.gguf: metadata 'nope' is missing");
  EXPECT_EQ(error([&] { layout.get_array("f"); }), "m.gguf: metadata 'f': expected an array, found f32 0.5");
}

// ---- writer -----------------------------------------------------------------------------------

TEST(GgufWriter, WritesExactlyTheSpecifiedBytes) {
  TempDir dir;
  GgufWriter w(dir / "small.gguf");
  w.set_u32("a", 7);
  const float values[2] = {1.0f, 2.0f};
  w.add("t", ggml_type_of(WeightType::F32), {2}, std::as_bytes(std::span(values)));
  w.write();
  EXPECT_EQ(test::read_bytes(dir / "small.gguf"), small_file().bytes);
  // Only the file itself: the temporary file was renamed, not left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  TempDir dir;
  GgufWriter w(dir / "values.gguf");
  std::vector<GgufKeyValue> expected = {
      {"v.u8", {uint8_t{200}}},
      {"v.i8", {int8_t{-100}}},
      {"v.u16", {uint16_t{60000}}},
      {"v.i16", {int16_t{-30000}}},
      {"v.u32", {uint32_t{4000000000u}}},
      {"v.i32", {int32_t{-2000000000}}},
      {"v.f32", {-1.5f}},
      {"v.bool", {true}},
      {"v.string", {std::string("h\xc3\xa9llo")}},
      {"v.empty_string", {std::string()}},
      {"v.u64", {uint64_t{1} << 63}},
      {"v.i64", {int64_t{-1} << 62}},
      {"v.f64", {0.1}},
      {"a.u8", {GgufArray{std::vector<uint8_t>{0, 255}}}},
      {"a.i8", {GgufArray{std::vector<int8_t>{-128, 127}}}},
      {"a.u16", {GgufArray{std::vector<uint16_t>{1, 65535}}}},
      {"a.i16", {GgufArray{std::vector<int16_t>{-1}}}},
      {"a.u32", {GgufArray{std::vector<uint32_t>{}}}},
      {"a.i32", {GgufArray{std::vector<int32_t>{1, 2, 3, 6, 3}}}},
      {"a.f32", {GgufArray{std::vector<float>{0.25f, -0.0f}}}},
      {"a.bool", {GgufArray{std::vector<bool>{true, false, true}}}},
      {"a.string", {GgufArray{std::vector<std::string>{"a", "", "Ġthe"}}}},
      {"a.u64", {GgufArray{std::vector<uint64_t>{UINT64_MAX}}}},
      {"a.i64", {GgufArray{std::vector<int64_t>{INT64_MIN}}}},
      {"a.f64", {GgufArray{std::vector<double>{1e300}}}},
      {"a.nested",
       {GgufArray{std::vector<GgufArray>{GgufArray{std::vector<std::string>{"x"}},
                                         GgufArray{std::vector<GgufArray>{GgufArray{std::vector<int32_t>{-7}}}}}}}},
  };
  for (const auto& kv : expected) w.set(kv.key, kv.value);
  w.set_u32("v.u32", 4000000000u);  // setting again keeps one entry in its first position
  w.write();

  const GgufFile f = GgufFile::open(dir / "values.gguf");
  const GgufLayout& layout = f.layout();
  ASSERT_EQ(layout.metadata.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(layout.metadata[i].key, expected[i].key);
    EXPECT_TRUE(layout.metadata[i].value == expected[i].value) << expected[i].key;
  }
  EXPECT_EQ(layout.get_array_of<std::string>("a.string")[2], "Ġthe");
  EXPECT_EQ(layout.get_array_of<int32_t>("a.i32").size(), 5u);
  EXPECT_EQ(layout.get_bool("v.bool"), true);
  EXPECT_THROW(layout.get_array_of<float>("a.i32"), Error);
}

TEST(GgufWriter, RoundTripsEveryTensorTypeAligned) {
  TempDir dir;
  struct Case {
    GgmlType type;
    std::vector<uint64_t> dims;
  };
  const std::vector<Case> cases = {
      {ggml_type_of(WeightType::F32), {3}},           {GgmlType::F16, {5, 2}},
      {ggml_type_of(WeightType::BF16), {1, 1, 1, 7}}, {ggml_type_of(WeightType::Q8_0), {64, 3}},
      {ggml_type_of(WeightType::Q4_0), {32, 2}},      {ggml_type_of(WeightType::Q4_1), {96}},
      {ggml_type_of(WeightType::Q5_0), {32, 1, 2}},   {ggml_type_of(WeightType::Q5_1), {32}},
      {ggml_type_of(WeightType::Q4_K), {256, 2}},     {ggml_type_of(WeightType::Q5_K), {512}},
      {ggml_type_of(WeightType::Q6_K), {256, 3}},
  };
  std::vector<std::vector<std::byte>> data;
  data.reserve(cases.size());  // the fill callbacks point into it
  GgufWriter w(dir / "tensors.gguf");
  w.set_u32("general.alignment", 64);
  for (size_t i = 0; i < cases.size(); ++i) {
    uint64_t numel = 1;
    for (uint64_t d : cases[i].dims) numel *= d;
    data.push_back(some_bytes(ggml_row_bytes(cases[i].type, numel), static_cast<uint32_t>(i)));
    const std::string name = fmt::format("t{}.{}", i, ggml_type_info(cases[i].type).name);
    if (i % 2 == 0) {
      w.add(name, cases[i].type, cases[i].dims, data.back());
    } else {  // through the chunked fill path
      const auto* src = &data.back();
      w.add(name, cases[i].type, cases[i].dims, [src, pos = size_t{0}](std::span<std::byte> out) mutable {
        std::memcpy(out.data(), src->data() + pos, out.size());
        pos += out.size();
      });
    }
  }
  uint64_t last_done = 0;
  w.write([&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, w.data_bytes());
    last_done = done;
  });
  EXPECT_EQ(last_done, w.data_bytes());

  const GgufFile f = GgufFile::open(dir / "tensors.gguf");
  EXPECT_EQ(f.layout().alignment, 64u);
  EXPECT_EQ(f.layout().data_offset % 64, 0u);
  ASSERT_EQ(f.tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.dims, cases[i].dims);
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
    const auto bytes = f.data(t);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 64, 0u) << t.name;
    ASSERT_EQ(bytes.size(), data[i].size());
    EXPECT_EQ(std::memcmp(bytes.data(), data[i].data(), bytes.size()), 0) << t.name;
  }
  EXPECT_EQ(f.file_size() % 64, 0u);  // the last tensor is padded too
  EXPECT_EQ(&f.get("t3.Q8_0"), &f.tensors()[3]);
  EXPECT_THAT([&] { f.get("missing"); }, ::testing::ThrowsMessage<Error>(HasSubstr("missing tensor 'missing'")));
}

TEST(GgufWriter, RejectsBadInputAndLeavesNoFile) {
  TempDir dir;
  GgufWriter w(dir / "bad.gguf");
  const std::vector<std::byte> four(4);
  EXPECT_THAT(
      [&] { w.add("x", ggml_type_of(WeightType::Q8_0), {16}, four); },
      ::testing::ThrowsMessage<Error>(HasSubstr("row length 16 is not a multiple of the 32-element Q8_0 block")));
  EXPECT_THAT([&] { w.add("x", ggml_type_of(WeightType::F32), {2}, four); },
              ::testing::ThrowsMessage<Error>(HasSubstr("need 8 bytes, given 4")));
  EXPECT_THAT([&] { w.set_u32("general.alignment", 12); }, ::testing::ThrowsMessage<Error>(HasSubstr("power of two")));
  w.add("x", ggml_type_of(WeightType::F32), {1}, four);
  EXPECT_THAT([&] { w.add("x", ggml_type_of(WeightType::F32), {1}, four); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'x' added twice")));
  w.add("y", ggml_type_of(WeightType::F32), {1}, [](std::span<std::byte>) { throw Error("fill failed"); });
  EXPECT_THROW(w.write(), Error);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

// ---- corrupted files: one message each ---------------------------------------------------------

TEST(GgufCorrupt, EmptyAndWrongMagic) {
  EXPECT_EQ(gguf_parse_error({}), "t.gguf: file is empty");
  Raw r;
  r.str_raw("GGUG").u32(3).u64(0).u64(0);
  EXPECT_EQ(gguf_parse_error(r.bytes),
            "t.gguf: not a GGUF file: magic bytes are 47 47 55 47, expected 47 47 55 46 (\"GGUF\")");
  Raw two;
  two.str_raw("GG");
  EXPECT_EQ(gguf_parse_error(two.bytes),
            "t.gguf: header: truncated: magic needs 4 bytes at offset 0, but the file ends 2 bytes "
            "later");
}

TEST(GgufCorrupt, BadVersion) {
  EXPECT_EQ(gguf_parse_error(Raw().header(0, 0, 1).bytes),
            "t.gguf: header: version 1 is not supported (supported: 2, 3)");
  EXPECT_EQ(gguf_parse_error(Raw().header(0, 0, 4).bytes),
            "t.gguf: header: version 4 is not supported (supported: 2, 3)");
  EXPECT_THAT(gguf_parse_error(Raw().header(0, 0, 0x03000000u).bytes),
              HasSubstr("version field reads 0x03000000: a big-endian GGUF file"));
}

TEST(GgufCorrupt, TruncatedHeaderAtEveryField) {
  // small_file(): header [0, 24), key "a" [24, 33), type [33, 37), value [37, 41), tensor info
  // [41, 74), padding to 96, data [96, 104), padding to 128.
  const auto full = small_file().bytes;
  auto cut = [&](size_t size) {
    return gguf_parse_error(std::vector<std::byte>(full.begin(), full.begin() + static_cast<ptrdiff_t>(size)));
  };
  EXPECT_EQ(cut(6),
            "t.gguf: header: truncated: version needs 4 bytes at offset 4, but the file ends 2 "
            "bytes later");
  EXPECT_EQ(cut(12),
            "t.gguf: header: truncated: tensor_count needs 8 bytes at offset 8, but the file ends "
            "4 bytes later");
  EXPECT_EQ(cut(20),
            "t.gguf: header: truncated: metadata_kv_count needs 8 bytes at offset 16, but the file "
            "ends 4 bytes later");
  // The counts are checked against what is left before anything is read or allocated.
  EXPECT_EQ(cut(30),
            "t.gguf: header: metadata_kv_count 1 needs at least 14 bytes per pair, but only 6 "
            "bytes follow the header");
  EXPECT_EQ(cut(50),
            "t.gguf: header: tensor_count 1 needs at least 25 bytes per tensor info, but only 9 "
            "bytes follow the metadata");
  // Cut in the data: the tensor runs past the end.
  EXPECT_EQ(cut(100),
            "t.gguf: tensor 't': data [0, +8 bytes) runs past the end of the data section (4 bytes "
            "from file offset 96)");

  Raw key;  // a key length longer than the file
  key.header(0, 1).u64(100).data(6);
  EXPECT_EQ(gguf_parse_error(key.bytes),
            "t.gguf: metadata pair 0: truncated: key of length 100 needs 100 bytes at offset 32, "
            "but the file ends 6 bytes later");
  Raw value;  // a u32 value with one byte left
  value.header(0, 1).str("k").u32(4).u8(0);
  EXPECT_EQ(gguf_parse_error(value.bytes),
            "t.gguf: metadata 'k': truncated: u32 value needs 4 bytes at offset 37, but the file "
            "ends 1 bytes later");
  Raw info;  // a tensor info without its offset
  info.header(1, 0).tensor("t", {2}, 0, 0);
  info.bytes.resize(49);
  EXPECT_EQ(gguf_parse_error(info.bytes),
            "t.gguf: tensor 't': truncated: offset needs 8 bytes at offset 49, but the file ends 0 "
            "bytes later");
}

TEST(GgufCorrupt, StringLengthPastEnd) {
  Raw r;
  r.header(0, 1).str("k").u32(8).u64(1000).str_raw("short");
  EXPECT_EQ(gguf_parse_error(r.bytes),
            "t.gguf: metadata 'k': truncated: string of length 1000 needs 1000 bytes at offset 45, "
            "but the file ends 5 bytes later");
}

TEST(GgufCorrupt, HugeKeyLength) {
  Raw r;
  r.header(0, 1).u64(uint64_t{1} << 62).u32(0).u8(0).u8(0);
  EXPECT_EQ(gguf_parse_error(r.bytes),
            "t.gguf: metadata pair 0: key length 4611686018427387904 exceeds the limit of 65535 bytes");
}

TEST(GgufCorrupt, HugeArrayCount) {
  Raw r;
  r.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(uint64_t{1} << 60).u64(1).str_raw("x");
  EXPECT_THAT(gguf_parse_error(r.bytes),
              HasSubstr("t.gguf: metadata 'tokenizer.ggml.tokens': array length 1152921504606846976 exceeds the "
                        "limit of 4194304 elements"));
}

TEST(GgufCorrupt, HugeCounts) {
  EXPECT_EQ(gguf_parse_error(Raw().header(uint64_t{1} << 40, 0).data(100).bytes),
            "t.gguf: header: tensor_count 1099511627776 needs at least 25 bytes per tensor info, "
            "but only 100 bytes follow the header");
  EXPECT_EQ(gguf_parse_error(Raw().header(0, UINT64_MAX).bytes),
            "t.gguf: header: metadata_kv_count 18446744073709551615 exceeds the limit of 4096 keys");
}

TEST(GgufCorrupt, UnknownTypes) {
  Raw tensor;
  tensor.header(1, 0).tensor("blk.0.ffn_down.weight", {256}, 10, 0).pad_to(32).data(84);
  EXPECT_EQ(gguf_parse_error(tensor.bytes),
            "t.gguf: tensor 'blk.0.ffn_down.weight': ggml type 10 (Q2_K) is not supported "
            "(supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q3_K, Q4_K, Q5_K, Q6_K, BF16)");
  Raw retired;
  retired.header(1, 0).tensor("w", {32}, 4, 0).pad_to(32).data(32);
  EXPECT_THAT(gguf_parse_error(retired.bytes), HasSubstr("ggml type 4 (?) is not supported"));
  Raw value;
  value.header(0, 1).str("k").u32(13).u32(0);
  EXPECT_EQ(gguf_parse_error(value.bytes), "t.gguf: metadata 'k': unknown value type 13 (valid: 0..12)");
  Raw element;
  element.header(0, 1).str("k").u32(9).u32(99).u64(0);
  EXPECT_EQ(gguf_parse_error(element.bytes), "t.gguf: metadata 'k': unknown array element type 99 (valid: 0..12)");
  Raw boolean;
  boolean.header(0, 1).str("k").u32(7).u8(2);
  EXPECT_EQ(gguf_parse_error(boolean.bytes), "t.gguf: metadata 'k': bool value 2 is neither 0 nor 1");
}

TEST(GgufCorrupt, BadAlignment) {
  Raw r;
  r.header(0, 1).str("general.alignment").u32(4).u32(48);
  EXPECT_EQ(gguf_parse_error(r.bytes), "t.gguf: metadata 'general.alignment': 48 is not a power of two of at least 8");
  Raw wrong_type;
  wrong_type.header(0, 1).str("general.alignment").u32(10).u64(32);
  EXPECT_EQ(gguf_parse_error(wrong_type.bytes), "t.gguf: metadata 'general.alignment': expected u32, found u64 32");
  Raw unaligned;
  unaligned.header(1, 0).tensor("t", {2}, 0, 8).pad_to(32).data(64);
  EXPECT_EQ(gguf_parse_error(unaligned.bytes), "t.gguf: tensor 't': offset 8 is not a multiple of the alignment 32");
}

TEST(GgufCorrupt, OffsetOutOfBounds) {
  Raw r;
  r.header(1, 0).tensor("t", {2}, 0, uint64_t{1} << 63).pad_to(32).data(32);
  EXPECT_EQ(gguf_parse_error(r.bytes),
            "t.gguf: tensor 't': data [9223372036854775808, +8 bytes) runs past the end of the "
            "data section (32 bytes from file offset 64)");
}

TEST(GgufCorrupt, OverlappingTensors) {
  Raw r;
  r.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad_to(32).data(64);
  EXPECT_EQ(gguf_parse_error(r.bytes), "t.gguf: tensor 'b': data [32, 48) overlaps tensor 'a' at [0, 64)");
}

TEST(GgufCorrupt, TooManyDims) {
  Raw r;
  r.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).pad_to(32).data(32);
  EXPECT_EQ(gguf_parse_error(r.bytes), "t.gguf: tensor 't': n_dims 5 exceeds the maximum of 4");
}

TEST(GgufCorrupt, DimsOverflow) {
  Raw r;
  r.header(1, 0).tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0).pad_to(32).data(32);
  EXPECT_EQ(gguf_parse_error(r.bytes),
            "t.gguf: tensor 't': dims [4294967296, 4294967296] overflow a 64-bit element count");
  Raw bytes_overflow;  // 2^62 f32 elements fit an int64 count but not a 64-bit byte size
  bytes_overflow.header(1, 0).tensor("t", {uint64_t{1} << 62}, 0, 0).pad_to(32).data(32);
  EXPECT_EQ(gguf_parse_error(bytes_overflow.bytes),
            "t.gguf: tensor 't': dims [4611686018427387904] of F32 overflow a 64-bit byte count");
  Raw partial_block;
  partial_block.header(1, 0).tensor("t", {48, 2}, 2, 0).pad_to(32).data(64);
  EXPECT_EQ(gguf_parse_error(partial_block.bytes),
            "t.gguf: tensor 't': row length 48 (dims[0] of [48, 2]) is not a multiple of the "
            "32-element Q4_0 block");
}

TEST(GgufCorrupt, DuplicateKeyAndTensor) {
  Raw keys;
  keys.header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2);
  EXPECT_EQ(gguf_parse_error(keys.bytes), "t.gguf: metadata 'k': duplicate key");
  Raw tensors;
  tensors.header(2, 0).tensor("t", {1}, 0, 0).tensor("t", {1}, 0, 32).pad_to(32).data(64);
  EXPECT_EQ(gguf_parse_error(tensors.bytes), "t.gguf: tensor 't': duplicate name");
}

// Keys and names may hold any bytes: messages quote them as one-line excerpts (found by
// fuzz_gguf once it checked messages; before, a newline split the line and a 64 KB key was
// quoted whole).
TEST(GgufCorrupt, KeysAndNamesAreQuotedAsExcerpts) {
  Raw newline;
  newline.header(0, 2).str("a\nb").u32(4).u32(1).str("a\nb").u32(4).u32(2);
  EXPECT_EQ(gguf_parse_error(newline.bytes), "t.gguf: metadata 'a\\nb': duplicate key");
  Raw long_key;
  const std::string key(4000, 'k');
  long_key.header(0, 2).str(key).u32(4).u32(1).str(key).u32(4).u32(2);
  EXPECT_EQ(gguf_parse_error(long_key.bytes),
            "t.gguf: metadata '" + std::string(64, 'k') + "... (4000 bytes)': duplicate key");
  Raw tensor;
  tensor.header(1, 0).tensor("x\ty", {1}, 999, 0).pad_to(32).data(32);
  EXPECT_THAT(gguf_parse_error(tensor.bytes), ::testing::StartsWith("t.gguf: tensor 'x\\ty': "));
}

TEST(GgufCorrupt, EmptyNames) {
  Raw key;
  key.header(0, 1).str("").u32(4).u32(1).u8(0);
  EXPECT_EQ(gguf_parse_error(key.bytes), "t.gguf: metadata pair 0: empty key");
  Raw tensor;
  tensor.header(1, 0).tensor("", {1}, 0, 0).pad_to(32).data(32);
  EXPECT_EQ(gguf_parse_error(tensor.bytes), "t.gguf: tensor info 0: empty tensor name");
  Raw long_name;
  long_name.header(1, 0).tensor(std::string(65, 'n'), {1}, 0, 0).pad_to(32).data(32);
  EXPECT_EQ(gguf_parse_error(long_name.bytes), "t.gguf: tensor info 0: name length 65 exceeds the limit of 64 bytes");
}

TEST(GgufCorrupt, NestingTooDeep) {
  auto nested = [](int depth) {
    Raw r;
    r.header(0, 1).str("deep").u32(9);
    for (int i = 1; i < depth; ++i) r.u32(9).u64(1);  // an array holding one array ...
    r.u32(0).u64(0);                                  // ... holding an empty u8 array
    return r.bytes;
  };
  EXPECT_EQ(gguf_parse_error(nested(kGgufMaxArrayDepth)), "");
  EXPECT_EQ(gguf_parse_error(nested(kGgufMaxArrayDepth + 1)),
            "t.gguf: metadata 'deep': arrays nested more than 8 deep");
}

// Metadata is bounded before it is stored (unbounded, a 320 MB file of tiny pairs would take
// 4.2 GB): at most kGgufMaxMetadataKeys keys, arrays of at most kGgufMaxArrayElems elements.
TEST(GgufParse, MetadataKeyCountIsBounded) {
  const auto file_with_keys = [](uint64_t n) {
    Raw r;
    r.header(0, n);
    for (uint64_t i = 0; i < n; ++i) r.str("k" + std::to_string(i)).u32(0).u8(1);
    return r.pad_to(32).bytes;
  };
  EXPECT_EQ(gguf_parse_error(file_with_keys(kGgufMaxMetadataKeys)), "");
  EXPECT_EQ(gguf_parse_error(file_with_keys(kGgufMaxMetadataKeys + 1)),
            "t.gguf: header: metadata_kv_count 4097 exceeds the limit of 4096 keys");
  // The count is refused from the header alone, whatever follows.
  Raw r;
  r.header(0, uint64_t{1} << 24).data(64);
  EXPECT_THAT(gguf_parse_error(r.bytes), HasSubstr("metadata_kv_count 16777216 exceeds the limit of 4096 keys"));
}

TEST(GgufParse, ArrayLengthIsBounded) {
  const auto file_with_array = [](uint64_t n) {
    Raw r;
    r.header(0, 1).str("a").u32(9).u32(0).u64(n);  // array of u8
    r.data(static_cast<size_t>(n));
    return r.pad_to(32).bytes;
  };
  EXPECT_EQ(gguf_parse_error(file_with_array(kGgufMaxArrayElems)), "");
  EXPECT_EQ(gguf_parse_error(file_with_array(kGgufMaxArrayElems + 1)),
            "t.gguf: metadata 'a': array length 4194305 exceeds the limit of 4194304 elements");
}

}  // namespace
}  // namespace nanoinfer
