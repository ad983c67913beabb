// safetensors reader: a valid file parses into the right views; every kind of malformed file is
// rejected with a message that names the file and the tensor.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>

#include "model/safetensors.h"
#include "model_test_util.h"

using namespace jet;
using namespace jet::test;

namespace {

constexpr const char* kSource = "test.safetensors";

std::vector<TensorInfo> parse(const std::string& image) {
  return parse_safetensors(reinterpret_cast<const unsigned char*>(image.data()), image.size(), kSource);
}

// One tensor entry of a header.
Json entry(const std::string& dtype, const std::vector<int64_t>& shape, uint64_t begin, uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

// An image with the given header (padded to 8 bytes, so offsets keep their alignment) and
// `data_bytes` zero bytes of data.
std::string image(const Json& header, size_t data_bytes) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return safetensors_image(text, std::string(data_bytes, '\0'));
}

}  // namespace

TEST(Safetensors, ParsesTensorsAsViewsIntoTheBuffer) {
  const std::string bytes = safetensors_image({{"b.weight", "F32", {2}, std::string("\0\0\x80?\0\0\0@", 8)},
                                               {"a.weight", "BF16", {2, 3}, std::string(12, '\x01')}});
  const auto tensors = parse(bytes);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "a.weight");  // sorted by name
  EXPECT_EQ(tensors[0].dtype, DType::BF16);
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensors[0].nbytes, 12u);
  EXPECT_EQ(tensors[0].numel(), 6);
  EXPECT_EQ(tensors[1].name, "b.weight");
  EXPECT_EQ(tensors[1].dtype, DType::F32);
  float values[2];
  std::memcpy(values, tensors[1].data, sizeof values);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 2.0f);
  // Zero-copy: the views point into the buffer that was parsed.
  const char* begin = bytes.data();
  EXPECT_GE(static_cast<const char*>(tensors[1].data), begin);
  EXPECT_LE(static_cast<const char*>(tensors[1].data) + 8, begin + bytes.size());
}

TEST(Safetensors, IgnoresMetadataAndAllowsGapsAndEmptyTensors) {
  Json header = {
      {"__metadata__", {{"format", "pt"}}}, {"x", entry("F16", {2}, 8, 12)}, {"empty", entry("F32", {0, 4}, 12, 12)}};
  const auto tensors = parse(image(header, 16));
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "empty");
  EXPECT_EQ(tensors[0].nbytes, 0u);
  EXPECT_EQ(tensors[1].name, "x");
}

TEST(Safetensors, AcceptsAnEmptyHeader) { EXPECT_TRUE(parse(image(Json::object(), 0)).empty()); }

TEST(Safetensors, RejectsFileShorterThanTheLengthPrefix) {
  expect_error([] { parse(std::string("\x05\0\0", 3)); }, {kSource, "too short", "3 bytes"});
}

TEST(Safetensors, RejectsHeaderLengthLargerThanTheFile) {
  expect_error([] { parse(safetensors_image("{}", "", 1000)); }, {kSource, "header length 1000", "exceeds the file"});
}

TEST(Safetensors, RejectsHugeDeclaredHeaderLength) {
  expect_error([] { parse(safetensors_image("{}", "", int64_t{1} << 62)); }, {kSource, "exceeds the file"});
}

TEST(Safetensors, RejectsInvalidJsonHeader) {
  expect_error([] { parse(safetensors_image("{\"a\": {", "")); }, {kSource, "not valid JSON"});
}

TEST(Safetensors, RejectsHeaderThatIsNotAnObject) {
  expect_error([] { parse(safetensors_image("[1, 2]", "")); }, {kSource, "must be a JSON object", "array"});
}

TEST(Safetensors, RejectsEntryThatIsNotAnObject) {
  expect_error([] { parse(image({{"w", 5}}, 0)); }, {kSource, "tensor 'w'", "must be an object"});
}

TEST(Safetensors, RejectsEntryWithoutDtype) {
  Json header = {{"w", {{"shape", {1}}, {"data_offsets", {0, 4}}}}};
  expect_error([&] { parse(image(header, 4)); }, {kSource, "tensor 'w'", "missing 'dtype'"});
}

TEST(Safetensors, RejectsEntryWithoutShape) {
  Json header = {{"w", {{"dtype", "F32"}, {"data_offsets", {0, 4}}}}};
  expect_error([&] { parse(image(header, 4)); }, {"tensor 'w'", "missing 'shape'"});
}

TEST(Safetensors, RejectsEntryWithoutDataOffsets) {
  Json header = {{"w", {{"dtype", "F32"}, {"shape", {1}}}}};
  expect_error([&] { parse(image(header, 4)); }, {"tensor 'w'", "missing 'data_offsets'"});
}

TEST(Safetensors, RejectsDtypeOfWrongJsonType) {
  Json header = {{"w", {{"dtype", 7}, {"shape", {1}}, {"data_offsets", {0, 4}}}}};
  expect_error([&] { parse(image(header, 4)); }, {"tensor 'w'", "dtype must be a string", "integer"});
}

TEST(Safetensors, RejectsShapeOfWrongJsonType) {
  Json header = {{"w", {{"dtype", "F32"}, {"shape", "1"}, {"data_offsets", {0, 4}}}}};
  expect_error([&] { parse(image(header, 4)); }, {"tensor 'w'", "shape must be an array", "string"});
}

TEST(Safetensors, RejectsNonIntegerDimension) {
  Json header = {{"w", {{"dtype", "F32"}, {"shape", {1.5}}, {"data_offsets", {0, 4}}}}};
  expect_error([&] { parse(image(header, 4)); }, {"tensor 'w'", "shape dimension must be an integer", "number"});
}

TEST(Safetensors, RejectsOffsetsThatAreNotAPair) {
  Json header = {{"w", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4, 8}}}}};
  expect_error([&] { parse(image(header, 8)); }, {"tensor 'w'", "data_offsets must be an array [begin, end]", "of 3"});
}

TEST(Safetensors, RejectsUnsupportedDtypeListingTheSupportedOnes) {
  for (const char* dtype : {"F64", "I64", "U8", "F8_E5M2", "BOOL"}) {
    expect_error(
        [&] {
          parse(image({{"w", entry(dtype, {1}, 0, 8)}}, 8));
        },
        {"tensor 'w'", str("unsupported dtype '", dtype, "'"), "supported: BF16, F16, F32, I32, F8_E4M3"});
  }
}

TEST(Safetensors, RejectsNegativeDimension) {
  expect_error([] { parse(image({{"w", entry("F32", {-1, 4}, 0, 16)}}, 16)); }, {"tensor 'w'", "negative", "-1"});
}

TEST(Safetensors, RejectsNegativeOffset) {
  Json header = {{"w", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {-4, 0}}}}};
  expect_error([&] { parse(image(header, 4)); }, {"tensor 'w'", "data_offsets begin is negative"});
}

TEST(Safetensors, RejectsOffsetsBeginAfterEnd) {
  expect_error([] { parse(image({{"w", entry("F32", {1}, 8, 4)}}, 8)); }, {"tensor 'w'", "begin 8 > end 4"});
}

TEST(Safetensors, RejectsOffsetsBeyondTheDataSection) {
  expect_error(
      [] {
        parse(image({{"w", entry("F32", {4}, 0, 16)}}, 12));
      },
      {kSource, "tensor 'w'", "end 16 lies beyond the data section (12 bytes)"});
}

TEST(Safetensors, RejectsByteLengthThatDoesNotMatchShapeAndDtype) {
  expect_error(
      [] {
        parse(image({{"w", entry("F32", {3}, 0, 8)}}, 8));
      },
      {"tensor 'w'", "holds 8 bytes but F32 [3] needs 12"});
}

TEST(Safetensors, RejectsShapeWhoseElementCountOverflows) {
  const int64_t big = int64_t{1} << 40;
  expect_error([&] { parse(image({{"w", entry("F32", {big, big}, 0, 8)}}, 8)); }, {"tensor 'w'", "too many elements"});
}

TEST(Safetensors, RejectsShapeWhoseByteSizeOverflows) {
  const int64_t big = int64_t{1} << 62;  // fits int64 as elements, not as F32 bytes
  expect_error([&] { parse(image({{"w", entry("F32", {big}, 0, 8)}}, 8)); }, {"tensor 'w'", "overflows"});
}

TEST(Safetensors, RejectsOverlappingTensors) {
  Json header = {{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {4}, 8, 24)}};
  expect_error([&] { parse(image(header, 24)); }, {kSource, "'a' [0, 16)", "'b' [8, 24)", "overlap"});
}

TEST(Safetensors, RejectsTensorMisalignedToItsElementSize) {
  // The data section starts at an 8-byte boundary; offset 2 breaks F32.
  expect_error(
      [] {
        parse(image({{"w", entry("F32", {1}, 2, 6)}}, 8));
      },
      {"tensor 'w'", "not aligned to its 4-byte elements"});
}

TEST(Safetensors, RejectsDuplicateTensorNames) {
  const std::string header = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                             R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  expect_error([&] { parse(safetensors_image(header, std::string(8, '\0'))); }, {"tensor 'w' appears twice"});
}

TEST(Safetensors, RejectsNonStringMetadata) {
  expect_error(
      [] {
        parse(image({{"__metadata__", {{"step", 5}}}}, 0));
      },
      {kSource, "__metadata__ value 'step' must be a string"});
}

TEST(Safetensors, RejectsDeeplyNestedHeader) {
  const std::string header = R"({"w": {"dtype": "F32", "shape": [[[1]]], "data_offsets": [0, 4]}})";
  expect_error([&] { parse(safetensors_image(header, std::string(4, '\0'))); }, {kSource, "nests deeper"});
}

TEST(Safetensors, RejectsHeaderWithANulByte) {
  // The JSON parser would stop at the NUL and never see what follows.
  const std::string header = std::string("{}") + '\0' + "THIS IS NOT JSON {{{";
  expect_error([&] { parse(safetensors_image(header, "")); }, {kSource, "holds a NUL byte"});
}

TEST(SafetensorsFile, ReadsAFileFromDisk) {
  TempDir dir;
  write_file(dir.file("x.safetensors"), safetensors_image({{"w", "F16", {3}, std::string(6, '\0')}}));
  SafetensorsFile file(dir.file("x.safetensors"));
  EXPECT_EQ(file.names(), std::vector<std::string>{"w"});
  EXPECT_EQ(file.get("w").shape, std::vector<int64_t>{3});
  EXPECT_EQ(file.find("v"), nullptr);
  expect_error([&] { file.get("v"); }, {dir.file("x.safetensors"), "no tensor named 'v'"});
}

TEST(SafetensorsFile, RejectsAFifoInsteadOfWaitingForAWriter) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.file("model.safetensors").c_str(), 0600), 0);
  expect_error([&] { SafetensorsFile(dir.file("model.safetensors")); }, {"not a regular file"});
}

TEST(SafetensorsFile, RejectsMissingFile) {
  expect_error([] { SafetensorsFile("/nonexistent/model.safetensors"); }, {"/nonexistent/model.safetensors"});
}

TEST(SafetensorsFile, RejectsTruncatedFileNamingThePath) {
  TempDir dir;
  const std::string full = safetensors_image({{"w", "F32", {4}, std::string(16, '\0')}});
  write_file(dir.file("cut.safetensors"), full.substr(0, full.size() - 5));
  expect_error([&] { SafetensorsFile(dir.file("cut.safetensors")); },
               {dir.file("cut.safetensors"), "tensor 'w'", "beyond the data section"});
}
