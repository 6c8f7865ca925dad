#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "nanoinfer/error.h"
#include "support/files.h"

namespace nanoinfer {
namespace {

using test::raw_safetensors;
using ::testing::HasSubstr;

// The message of the Error that parsing `bytes` throws, or "" if it parses.
std::string safetensors_parse_error(const std::vector<std::byte>& bytes) {
  try {
    parse_safetensors(bytes, "t.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsParse, AcceptsValidHeaderWithPaddingScalarAndEmptyTensor) {
  // a: F32 [2, 3] = 24 bytes at [0, 24); s: BF16 scalar at [24, 26); z: I8 [0, 5] empty.
  const auto bytes = raw_safetensors(R"({"__metadata__":{"format":"pt"},)"
                                     R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                                     R"("s":{"dtype":"BF16","shape":[],"data_offsets":[24,26]},)"
                                     R"("z":{"dtype":"I8","shape":[0,5],"data_offsets":[26,26]}}   )",
                                     26);
  const SafetensorsLayout layout = parse_safetensors(bytes, "t");
  ASSERT_EQ(layout.tensors.size(), 3u);
  EXPECT_EQ(layout.data_offset, bytes.size() - 26);
  EXPECT_EQ(layout.tensors[0].name, "a");
  EXPECT_EQ(layout.tensors[0].dtype, DType::F32);
  EXPECT_EQ(layout.tensors[0].shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(layout.tensors[0].numel(), 6u);
  EXPECT_EQ(layout.tensors[1].numel(), 1u);
  EXPECT_EQ(layout.tensors[1].nbytes(), 2u);
  EXPECT_EQ(layout.tensors[2].numel(), 0u);
  EXPECT_EQ(layout.metadata.at("format"), "pt");
}

TEST(SafetensorsParse, EmptyFile) {
  EXPECT_THAT(safetensors_parse_error({}), HasSubstr("file is empty"));
}

TEST(SafetensorsParse, TruncatedFile) {
  auto bytes = raw_safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16);
  bytes.resize(5);  // not even the length field
  EXPECT_THAT(safetensors_parse_error(bytes), HasSubstr("truncated: 5 bytes"));

  // Cut inside the data: the tensor's end is now past the end of the data section.
  bytes = raw_safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16);
  bytes.erase(bytes.end() - 3, bytes.end());
  EXPECT_THAT(safetensors_parse_error(bytes),
              HasSubstr("tensor 'a': data_offsets [0, 16] run past the end of the data section "
                        "(13 bytes)"));
}

TEST(SafetensorsParse, HeaderLengthPastEnd) {
  auto bytes = raw_safetensors(R"({})", 0);
  bytes[0] = std::byte{200};  // claims 200 header bytes, file has 2
  EXPECT_THAT(safetensors_parse_error(bytes), HasSubstr("header length 200 runs past the end of the file (2 bytes"));
}

TEST(SafetensorsParse, HeaderLengthOverCap) {
  auto bytes = raw_safetensors(R"({})", 0);
  bytes[7] = std::byte{0x01};  // 2^56 + 2
  EXPECT_THAT(safetensors_parse_error(bytes), HasSubstr("exceeds the 104857600 byte limit"));
}

TEST(SafetensorsParse, NonJsonHeader) {
  EXPECT_THAT(safetensors_parse_error(raw_safetensors("not json at all", 0)), HasSubstr("header is not valid JSON"));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"F32")", 0)),
              HasSubstr("header is not valid JSON"));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"([1, 2, 3])", 0)),
              HasSubstr("header must be a JSON object, found array"));
}

TEST(SafetensorsParse, UnknownDtype) {
  EXPECT_THAT(
      safetensors_parse_error(raw_safetensors(R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4)),
      HasSubstr("tensor 'w': unknown dtype \"F8_E4M3\""));
}

TEST(SafetensorsParse, WrongByteLength) {
  EXPECT_THAT(
      safetensors_parse_error(raw_safetensors(R"({"w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,20]}})", 20)),
      HasSubstr("tensor 'w': shape [3, 4] BF16 needs 24 bytes, found 20"));
}

TEST(SafetensorsParse, ShapeProductOverflow) {
  // 2^32 x 2^32 x 4 bytes wraps to 0 in 64 bits; it must not be accepted as an empty tensor.
  EXPECT_THAT(safetensors_parse_error(
                  raw_safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)),
              HasSubstr("tensor 'w': shape [4294967296, 4294967296] x 4 bytes overflows"));
}

TEST(SafetensorsParse, NegativeOrFractionalShape) {
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"w":{"dtype":"I8","shape":[-4],"data_offsets":[0,4]}})", 4)),
              HasSubstr("tensor 'w': shape entries must be non-negative integers, found -4"));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"w":{"dtype":"I8","shape":[4.0],"data_offsets":[0,4]}})", 4)),
              HasSubstr("tensor 'w': shape entries must be non-negative integers, found 4.0"));
}

TEST(SafetensorsParse, OverlappingOffsets) {
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                                      16)),
              HasSubstr("tensor 'b' at bytes [8, 16] overlaps tensor 'a' at [0, 16]"));
}

TEST(SafetensorsParse, OffsetsOutsideFile) {
  EXPECT_THAT(
      safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}})", 8)),
      HasSubstr("tensor 'a': data_offsets [100, 104] run past the end of the data "
                "section (8 bytes)"));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[6,2]}})", 8)),
              HasSubstr("tensor 'a': data_offsets begin 6 is after end 2"));
}

TEST(SafetensorsParse, DuplicateTensor) {
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                                      R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                                                      8)),
              HasSubstr("duplicate tensor 'a'"));
}

TEST(SafetensorsParse, MissingFieldsAndBadMetadata) {
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"shape":[4],"data_offsets":[0,4]}})", 4)),
              HasSubstr("tensor 'a': missing string field \"dtype\""));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"U8","data_offsets":[0,4]}})", 4)),
              HasSubstr("tensor 'a': missing array field \"shape\""));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0]}})", 4)),
              HasSubstr("tensor 'a': \"data_offsets\" must be [begin, end]"));
  EXPECT_THAT(safetensors_parse_error(raw_safetensors(R"({"__metadata__":{"k":1}})", 0)),
              HasSubstr("\"__metadata__\" entry 'k' must be a string, found number"));
}

TEST(SafetensorsFile, EmptyFileOnDisk) {
  test::TempDir dir;
  test::write_bytes(dir / "m.safetensors", {});
  try {
    SafetensorsFile::open(dir / "m.safetensors");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("m.safetensors: file is empty"));
  }
  EXPECT_THROW(SafetensorsFile::open(dir / "absent.safetensors"), Error);
}

TEST(SafetensorsWriter, RoundTripSpanAndFillWithMetadata) {
  test::TempDir dir;
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-8f, -0.0f};  // [2, 3]
  const std::vector<uint16_t> b = {0x3f80, 0xbf80, 0x7f80};               // [3] bf16
  // c: I32 [3, 1 << 20] = 12 MiB, more than one fill chunk; element i holds i * 7.
  int fill_calls = 0;
  uint32_t next = 0;
  SafetensorsWriter w(dir / "m.safetensors");
  w.set_metadata("format", "pt");
  w.add("a", DType::F32, {2, 3}, std::as_bytes(std::span(a)));
  w.add("b", DType::BF16, {3}, std::as_bytes(std::span(b)));
  w.add("c", DType::I32, {3, 1 << 20}, [&](std::span<std::byte> chunk) {
    ++fill_calls;
    ASSERT_EQ(chunk.size() % 4, 0u);
    for (size_t i = 0; i < chunk.size(); i += 4) {
      const int32_t v = static_cast<int32_t>(next++ * 7);
      std::memcpy(chunk.data() + i, &v, 4);
    }
  });
  uint64_t last_done = 0;
  int progress_calls = 0;
  w.write([&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, 24u + 6u + (12u << 20));
    EXPECT_GT(done, last_done);
    last_done = done;
    ++progress_calls;
  });
  EXPECT_EQ(fill_calls, 2);  // 12 MiB in 8 MiB chunks
  EXPECT_EQ(progress_calls, 4);
  EXPECT_EQ(last_done, w.data_bytes());
  EXPECT_EQ(next, 3u << 20);

  // Only the final file is left: the temporary was renamed, not copied.
  int entries = 0;
  for (const auto& ent : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(ent.path().filename(), "m.safetensors");
    ++entries;
  }
  EXPECT_EQ(entries, 1);

  const SafetensorsFile f = SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(f.layout().data_offset % 8, 0u);
  EXPECT_EQ(f.file_size(), f.layout().data_offset + w.data_bytes());
  EXPECT_EQ(f.layout().metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "a");  // header keeps insertion order
  EXPECT_EQ(f.tensors()[2].name, "c");

  const TensorView va = f.get("a");
  EXPECT_EQ(va.dtype(), DType::F32);
  EXPECT_EQ(va.shape(), (std::vector<uint64_t>{2, 3}));
  ASSERT_EQ(va.nbytes(), 24u);
  EXPECT_EQ(std::memcmp(va.data, a.data(), 24), 0);
  const TensorView vb = f.get("b");
  EXPECT_EQ(vb.dtype(), DType::BF16);
  EXPECT_EQ(std::memcmp(vb.data, b.data(), 6), 0);
  const TensorView vc = f.get("c");
  ASSERT_EQ(vc.nbytes(), 12u << 20);
  for (uint32_t i : {0u, 1u, 2097151u, 2097152u, 3145727u}) {
    int32_t v;
    std::memcpy(&v, vc.data + size_t{i} * 4, 4);
    EXPECT_EQ(v, static_cast<int32_t>(i * 7)) << "element " << i;
  }
  EXPECT_EQ(f.find("missing"), nullptr);
  try {
    f.get("missing");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing tensor 'missing'"));
  }
}

TEST(SafetensorsWriter, FailedWriteLeavesNothingBehind) {
  test::TempDir dir;
  test::write_text(dir / "m.safetensors", "previous");
  SafetensorsWriter w(dir / "m.safetensors");
  w.add("x", DType::U8, {4}, [](std::span<std::byte>) { throw Error("interrupted"); });
  EXPECT_THROW(w.write(), Error);
  // The old file is untouched and no temporary file remains.
  EXPECT_EQ(test::read_text(dir / "m.safetensors"), "previous");
  int entries = 0;
  for ([[maybe_unused]] const auto& ent : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  test::TempDir dir;
  SafetensorsWriter w(dir / "m.safetensors");
  const std::vector<std::byte> four(4);
  w.add("x", DType::U8, {4}, four);
  EXPECT_THROW(w.add("x", DType::U8, {4}, four), Error);             // duplicate
  EXPECT_THROW(w.add("y", DType::F32, {4}, four), Error);            // 16 bytes needed
  EXPECT_THROW(w.add("__metadata__", DType::U8, {4}, four), Error);  // reserved
}

}  // namespace
}  // namespace nanoinfer
