// Safetensors reader and writer: exact round trips for every dtype, zero-copy views that outlive
// the file object, and one test per way a header can be malformed (code + file + tensor named).
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors_writer.h"

namespace locus {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A fresh folder per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::path(::testing::TempDir()) /
           ("locus_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

Tensor random_tensor(const Dims& shape, DType dtype, uint32_t seed) {
  auto t = Tensor::empty(shape, dtype);
  if (!t) std::abort();
  std::mt19937 rng(seed);
  auto* bytes = static_cast<uint8_t*>(t->raw_data());
  for (size_t i = 0; i < t->nbytes(); ++i) {
    bytes[i] = static_cast<uint8_t>(rng());
  }
  return *t;
}

std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.nbytes()};
}

// A file with an explicit header length (the JSON's own length unless overridden).
std::vector<uint8_t> make_file(std::string_view json, const std::vector<uint8_t>& data = {},
                               std::optional<uint64_t> declared_length = std::nullopt) {
  uint64_t n = declared_length.value_or(json.size());
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  }
  out.insert(out.end(), json.begin(), json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Expected<SafetensorsHeader> parse(const std::vector<uint8_t>& file,
                                  const SafetensorsParseOptions& options = {}) {
  return parse_safetensors_header(file, file.size(), "t.safetensors", options);
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Asserts the parse fails with `code` and a message that names the file and each of `parts`.
void expect_error(const std::vector<uint8_t>& file, ErrorCode code,
                  std::initializer_list<std::string_view> parts,
                  const SafetensorsParseOptions& options = {}) {
  auto header = parse(file, options);
  ASSERT_FALSE(header.has_value()) << "parsed a malformed file";
  EXPECT_EQ(header.error().code(), code) << header.error().to_string();
  EXPECT_THAT(header.error().message(), HasSubstr("t.safetensors"));
  for (auto part : parts) {
    EXPECT_THAT(header.error().message(), HasSubstr(std::string(part)));
  }
}

std::string entry(std::string_view name, std::string_view dtype, std::string_view shape,
                  std::string_view offsets) {
  return "\"" + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) +
         "\",\"shape\":" + std::string(shape) + ",\"data_offsets\":" + std::string(offsets) + "}";
}

// ---- Round trips ----------------------------------------------------------------------------

TEST_F(SafetensorsTest, RoundTripsEveryDtypeByteForByte) {
  NamedTensors tensors;
  uint32_t seed = 1;
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dtype = static_cast<DType>(i);
    std::string name(dtype_info(dtype).safetensors_name);
    tensors.emplace_back(name + ".matrix", random_tensor({3, 4}, dtype, seed++));
    tensors.emplace_back(name + ".cube", random_tensor({2, 3, 6}, dtype, seed++));
    tensors.emplace_back(name + ".empty", random_tensor({0, 4}, dtype, seed++));
    if (!is_sub_byte(dtype)) {
      tensors.emplace_back(name + ".scalar", random_tensor({}, dtype, seed++));
    }
  }
  auto path = dir_ / "all.safetensors";
  ASSERT_TRUE(write_safetensors(path, tensors).is_ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.has_value()) << file.error().to_string();
  ASSERT_EQ(file->num_tensors(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    auto t = file->tensor(name);
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    EXPECT_EQ(t->dtype(), expected.dtype()) << name;
    EXPECT_EQ(t->shape(), expected.shape()) << name;
    EXPECT_EQ(t->nbytes(), expected.nbytes()) << name;
    EXPECT_EQ(tensor_bytes(*t), tensor_bytes(expected)) << name;
  }
  EXPECT_EQ(file->find("F4.matrix")->nbytes(), 6u);  // 12 packed fp4 values
  EXPECT_EQ(file->find("F8_E8M0.cube")->dtype, DType::kUE8M0);
}

TEST_F(SafetensorsTest, HeaderIsLaidOutLikeTheRustCrate) {
  auto a = random_tensor({2, 2}, DType::kF32, 7);
  auto path = dir_ / "a.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"a", a}}, {{"format", "pt"}}).is_ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const size_t padded = (json.size() + 7) / 8 * 8;
  ASSERT_EQ(bytes.size(), 8 + padded + 16);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | bytes[static_cast<size_t>(i)];
  }
  EXPECT_EQ(n, padded);
  EXPECT_EQ(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(json.size())),
            json);
  for (size_t i = 8 + json.size(); i < 8 + padded; ++i) {
    EXPECT_EQ(bytes[i], ' ');
  }
}

TEST_F(SafetensorsTest, ReadsTheRustCrateDocExample) {
  // The example file from the crate's SafeTensors::deserialize documentation.
  std::string json = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  auto header = parse(make_file(json, std::vector<uint8_t>(16, 0)));
  ASSERT_TRUE(header.has_value()) << header.error().to_string();
  ASSERT_EQ(header->tensors.size(), 1u);
  EXPECT_EQ(header->tensors[0].dtype, DType::kI32);
  EXPECT_EQ(header->data_offset, 8u + json.size());
}

TEST_F(SafetensorsTest, ViewsAreZeroCopyAndOutliveTheFile) {
  auto w = random_tensor({64, 32}, DType::kBF16, 3);
  auto path = dir_ / "w.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"w", w}}).is_ok());
  Tensor view;
  {
    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.has_value());
    auto t = file->tensor("w");
    ASSERT_TRUE(t.has_value());
    auto mapped = file->bytes();
    const auto* p = static_cast<const uint8_t*>(t->raw_data());
    EXPECT_GE(p, mapped.data());
    EXPECT_LE(p + t->nbytes(), mapped.data() + mapped.size());
    EXPECT_EQ(p, mapped.data() + file->header().data_offset);
    EXPECT_FALSE(t->storage()->is_owning());
    view = *t;
  }                  // the SafetensorsFile is gone; the view keeps the mapping alive
  fs::remove(path);  // even the name is gone
  EXPECT_EQ(tensor_bytes(view), tensor_bytes(w));
}

TEST_F(SafetensorsTest, MetadataAndLazyInfo) {
  auto a = random_tensor({4}, DType::kF16, 1);
  auto b = random_tensor({2, 2}, DType::kF8E4M3, 2);
  auto path = dir_ / "m.safetensors";
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"quant_method", "fp8"}};
  ASSERT_TRUE(write_safetensors(path, {{"z.second", a}, {"a.first", b}}, meta).is_ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->metadata(), meta);
  EXPECT_EQ(file->names(), (std::vector<std::string>{"a.first", "z.second"}));
  auto info = file->info("a.first");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->dtype, DType::kF8E4M3);
  EXPECT_EQ(info->shape, (Dims{2, 2}));
  // Stored in the order given: z.second first.
  EXPECT_EQ(info->data_begin, 8u);
  EXPECT_EQ(info->data_end, 12u);
  EXPECT_TRUE(file->contains("z.second"));
  EXPECT_FALSE(file->contains("a"));

  auto missing = file->tensor("model.layers.0.nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("m.safetensors"));
  EXPECT_THAT(missing.error().message(), HasSubstr("model.layers.0.nope"));
  EXPECT_EQ(file->info("x").error().code(), ErrorCode::kNotFound);
}

TEST_F(SafetensorsTest, EmptyFileOfTensorsAndEmptyTensors) {
  auto path = dir_ / "none.safetensors";
  ASSERT_TRUE(write_safetensors(path, {}).is_ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.has_value()) << file.error().to_string();
  EXPECT_EQ(file->num_tensors(), 0u);
  EXPECT_EQ(fs::file_size(path), 16u);  // 8 + "{}" padded to 8

  auto empty = random_tensor({0}, DType::kF32, 1);
  ASSERT_TRUE(write_safetensors(path, {{"e", empty}}).is_ok());  // replaces the file
  file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.has_value()) << file.error().to_string();
  auto t = file->tensor("e");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->numel(), 0);
}

TEST_F(SafetensorsTest, OpenReportsMissingAndNonRegularFiles) {
  auto missing = SafetensorsFile::open(dir_ / "model-00003-of-00004.safetensors");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("model-00003-of-00004.safetensors"));
  auto directory = SafetensorsFile::open(dir_);
  ASSERT_FALSE(directory.has_value());
  EXPECT_EQ(directory.error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(SafetensorsTest, OpenReportsHeaderErrorsWithThePath) {
  auto path = dir_ / "model-00003-of-00004.safetensors";
  write_bytes(path, {1, 2, 3, 4, 5});
  auto tiny = SafetensorsFile::open(path);
  ASSERT_FALSE(tiny.has_value());
  EXPECT_EQ(tiny.error().code(), ErrorCode::kParseError);
  EXPECT_THAT(tiny.error().message(), HasSubstr(path.string()));

  std::string json =
      "{" + entry("model.layers.7.mlp.experts.3.w1.weight", "U8", "[128]", "[912,1040]") + "}";
  write_bytes(path, make_file(json, std::vector<uint8_t>(1000, 0)));
  auto truncated = SafetensorsFile::open(path);
  ASSERT_FALSE(truncated.has_value());
  EXPECT_EQ(truncated.error().code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(truncated.error().message(),
              HasSubstr("model-00003-of-00004.safetensors: tensor "
                        "'model.layers.7.mlp.experts.3.w1.weight': data offsets [912, 1040) end "
                        "past data size 1000"));
}

TEST_F(SafetensorsTest, ParsesFromAHeaderPrefix) {
  std::string json = "{" + entry("w", "F32", "[4]", "[0,16]") + "}";
  auto file = make_file(json, std::vector<uint8_t>(16, 1));
  std::span<const uint8_t> prefix(file.data(), 8 + json.size());
  auto header = parse_safetensors_header(prefix, file.size(), "p.safetensors");
  ASSERT_TRUE(header.has_value()) << header.error().to_string();
  EXPECT_EQ(header->data_size, 16u);
  auto short_prefix = parse_safetensors_header(prefix.first(10), file.size(), "p.safetensors");
  EXPECT_EQ(short_prefix.error().code(), ErrorCode::kInvalidArgument);
}

// ---- Malformed files: truncation and the header length ----------------------------------------

TEST(SafetensorsMalformed, TruncatedBelowTheLengthPrefix) {
  expect_error({}, ErrorCode::kParseError, {"0 bytes"});
  expect_error({1, 2, 3}, ErrorCode::kParseError, {"3 bytes"});
}

TEST(SafetensorsMalformed, HeaderLengthPastEndOfFile) {
  expect_error(make_file("{}", {}, 100), ErrorCode::kOutOfRange, {"header length 100", "end"});
  expect_error(make_file("", {}, 1), ErrorCode::kOutOfRange, {"header length 1"});
}

TEST(SafetensorsMalformed, HeaderLengthOverTheLimit) {
  expect_error(make_file("{}", {}, kSafetensorsMaxHeaderBytes + 1), ErrorCode::kOutOfRange,
               {"limit"});
  expect_error(make_file("{}", {}, std::numeric_limits<uint64_t>::max()), ErrorCode::kOutOfRange,
               {"limit"});
}

TEST(SafetensorsMalformed, DataPastEndOfFile) {
  std::string json = "{" + entry("w", "F32", "[4]", "[0,16]") + "}";
  expect_error(make_file(json, std::vector<uint8_t>(8, 0)), ErrorCode::kOutOfRange,
               {"tensor 'w'", "[0, 16) end past data size 8"});
}

// ---- Malformed files: JSON ------------------------------------------------------------------

TEST(SafetensorsMalformed, HeaderNotJsonOrNotAnObject) {
  expect_error(make_file("{not json}"), ErrorCode::kParseError, {"not valid JSON"});
  expect_error(make_file("{\"a\":{\"dtype\":\"U8\","), ErrorCode::kParseError, {"not valid JSON"});
  expect_error(make_file("{} x"), ErrorCode::kParseError, {"not valid JSON"});
  expect_error(make_file("[1, 2]"), ErrorCode::kParseError, {"start with '{'"});
  expect_error(make_file("\"s\"    "), ErrorCode::kParseError, {"start with '{'"});
  expect_error(make_file(""), ErrorCode::kParseError, {"start with '{'"});
  expect_error(make_file(" {}"), ErrorCode::kParseError, {"start with '{'"});
  // The crate pads with spaces; NUL padding is not JSON whitespace and is rejected like there.
  expect_error(make_file(std::string("{}\0\0\0\0\0\0", 8)), ErrorCode::kParseError, {"NUL"});
  // nlohmann alone would stop at the NUL and accept the trailing garbage.
  expect_error(make_file(std::string("{}\0 junk!", 10)), ErrorCode::kParseError, {"NUL"});
  expect_error(make_file("{\"\xff\":1}"), ErrorCode::kParseError, {"JSON"});  // not UTF-8
}

TEST(SafetensorsMalformed, DuplicateKeysAreRejected) {
  std::string a = entry("a", "U8", "[1]", "[0,1]");
  expect_error(make_file("{" + a + "," + a + "}", {7}), ErrorCode::kParseError,
               {"duplicate key 'a'"});
  expect_error(
      make_file(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", {7}),
      ErrorCode::kParseError, {"duplicate key 'dtype'", "'a'"});
  expect_error(make_file(R"({"__metadata__":{"k":"1","k":"2"}})"), ErrorCode::kParseError,
               {"duplicate key 'k'", "__metadata__"});
}

TEST(SafetensorsMalformed, DeepNestingIsRejectedWithoutRecursion) {
  expect_error(make_file(R"({"a":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}})"),
               ErrorCode::kParseError, {"nests deeper", "'a'"});
  std::string deep =
      "{\"a\":{\"shape\":" + std::string(200000, '[') + std::string(200000, ']') + "}}";
  expect_error(make_file(deep), ErrorCode::kParseError, {"nests deeper"});
}

TEST(SafetensorsMalformed, BadMetadataTypes) {
  expect_error(make_file(R"({"__metadata__":["pt"]})"), ErrorCode::kInvalidArgument,
               {"__metadata__", "array"});
  expect_error(make_file(R"({"__metadata__":{"format":1}})"), ErrorCode::kInvalidArgument,
               {"__metadata__", "'format'", "number"});
  expect_error(make_file(R"({"__metadata__":{"nested":{}}})"), ErrorCode::kInvalidArgument,
               {"'nested'"});
  auto ok = parse(make_file(R"({"__metadata__":{}})"));
  EXPECT_TRUE(ok.has_value());
}

TEST(SafetensorsMalformed, EntryShapeOfTheJson) {
  expect_error(make_file(R"({"w":3})"), ErrorCode::kInvalidArgument, {"tensor 'w'", "object"});
  expect_error(make_file(R"({"w":{"dtype":"U8","shape":[1]}})"), ErrorCode::kInvalidArgument,
               {"tensor 'w'", "missing 'data_offsets'"});
  expect_error(make_file(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", {1}),
               ErrorCode::kInvalidArgument, {"tensor 'w'", "unexpected field 'x'"});
  expect_error(make_file(R"({"w":{"dtype":5,"shape":[1],"data_offsets":[0,1]}})", {1}),
               ErrorCode::kInvalidArgument, {"tensor 'w'", "dtype"});
}

// ---- Malformed files: dtype, shape, offsets -------------------------------------------------

TEST(SafetensorsMalformed, UnknownDtypeIsUnsupported) {
  auto file = make_file("{" + entry("model.embed", "F6_E2M3", "[2]", "[0,2]") + "}", {0, 0});
  expect_error(file, ErrorCode::kUnsupported, {"tensor 'model.embed'", "F6_E2M3", "BF16"});
  expect_error(make_file("{" + entry("w", "bf16", "[1]", "[0,2]") + "}", {0, 0}),
               ErrorCode::kUnsupported, {"tensor 'w'", "bf16"});
}

TEST(SafetensorsMalformed, NegativeOrNonIntegerShape) {
  for (const char* shape : {"[-1]", "[2.5]", "[\"2\"]", "[true]", "[null]", "4", "{}"}) {
    expect_error(make_file("{" + entry("w", "U8", shape, "[0,0]") + "}"),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "shape"});
  }
}

TEST(SafetensorsMalformed, ShapeOverflow) {
  expect_error(make_file("{" + entry("w", "U8", "[4294967296,4294967296]", "[0,0]") + "}"),
               ErrorCode::kOutOfRange, {"tensor 'w'", "64 bits"});
  expect_error(make_file("{" + entry("w", "U8", "[18446744073709551615]", "[0,0]") + "}"),
               ErrorCode::kOutOfRange, {"tensor 'w'"});
  // numel fits, numel * 64 bits does not.
  expect_error(make_file("{" + entry("w", "F64", "[2305843009213693952]", "[0,0]") + "}"),
               ErrorCode::kOutOfRange, {"tensor 'w'", "bits"});
  expect_error(make_file("{" + entry("w", "U8", "[1,1,1,1,1,1,1,1,1]", "[0,1]") + "}", {0}),
               ErrorCode::kUnsupported, {"tensor 'w'", "9 dimensions"});
}

TEST(SafetensorsMalformed, PackedFp4Shapes) {
  expect_error(make_file("{" + entry("w", "F4", "[3]", "[0,2]") + "}", {0, 0}),
               ErrorCode::kInvalidArgument, {"tensor 'w'", "12 bits"});
  expect_error(make_file("{" + entry("w", "F4", "[2,3]", "[0,3]") + "}", {0, 0, 0}),
               ErrorCode::kUnsupported, {"tensor 'w'", "even last dimension"});
  expect_error(make_file("{" + entry("w", "F4", "[]", "[0,1]") + "}", {0}),
               ErrorCode::kInvalidArgument, {"tensor 'w'"});
  auto ok = parse(make_file("{" + entry("w", "F4", "[3,2]", "[0,3]") + "}", {1, 2, 3}));
  ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
}

TEST(SafetensorsMalformed, BadOffsets) {
  expect_error(make_file("{" + entry("w", "U8", "[4]", "[4,0]") + "}", {0, 0, 0, 0}),
               ErrorCode::kInvalidArgument, {"tensor 'w'", "[4, 0) are reversed"});
  for (const char* offsets : {"[0]", "[0,4,8]", "\"0-4\"", "[-1,3]", "[0.0,4]", "[0,4.5]"}) {
    expect_error(make_file("{" + entry("w", "U8", "[4]", offsets) + "}", {0, 0, 0, 0}),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "data_offsets"});
  }
}

TEST(SafetensorsMalformed, SizeDoesNotMatchDtypeTimesShape) {
  expect_error(
      make_file("{" + entry("w", "F32", "[2,2]", "[0,12]") + "}", std::vector<uint8_t>(12, 0)),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "hold 12 bytes", "needs 16"});
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  std::string json =
      "{" + entry("a", "F32", "[4]", "[0,16]") + "," + entry("b", "F32", "[4]", "[8,24]") + "}";
  expect_error(make_file(json, std::vector<uint8_t>(24, 0)), ErrorCode::kInvalidArgument,
               {"tensor 'b'", "overlap tensor 'a'", "[0, 16)"});
  std::string same =
      "{" + entry("a", "F32", "[4]", "[0,16]") + "," + entry("b", "I32", "[4]", "[0,16]") + "}";
  expect_error(make_file(same, std::vector<uint8_t>(16, 0)), ErrorCode::kInvalidArgument,
               {"overlap"});
  SafetensorsParseOptions lenient;
  lenient.require_full_coverage = false;
  expect_error(make_file(json, std::vector<uint8_t>(24, 0)), ErrorCode::kInvalidArgument,
               {"overlap"}, lenient);
}

TEST(SafetensorsMalformed, HolesAndTrailingBytes) {
  std::string hole =
      "{" + entry("a", "U8", "[8]", "[0,8]") + "," + entry("b", "U8", "[8]", "[16,24]") + "}";
  auto with_hole = make_file(hole, std::vector<uint8_t>(24, 0));
  expect_error(with_hole, ErrorCode::kInvalidArgument,
               {"tensor 'b'", "bytes [8, 16)", "without holes"});
  std::string trailing = "{" + entry("a", "U8", "[8]", "[0,8]") + "}";
  auto with_tail = make_file(trailing, std::vector<uint8_t>(16, 0));
  expect_error(with_tail, ErrorCode::kInvalidArgument,
               {"bytes [8, 16)", "after tensor 'a'", "exactly"});
  expect_error(make_file("{}", std::vector<uint8_t>(8, 0)), ErrorCode::kInvalidArgument,
               {"no tensors"});

  SafetensorsParseOptions lenient;
  lenient.require_full_coverage = false;
  auto header = parse(with_hole, lenient);
  ASSERT_TRUE(header.has_value()) << header.error().to_string();
  EXPECT_EQ(header->find("b")->data_begin, 16u);
  EXPECT_TRUE(parse(with_tail, lenient).has_value());
}

TEST(SafetensorsMalformed, EmptyTensorsMayShareAnOffset) {
  std::string json = "{" + entry("a", "F32", "[0]", "[4,4]") + "," +
                     entry("b", "F32", "[0,3]", "[4,4]") + "," + entry("c", "F32", "[1]", "[0,4]") +
                     "}";
  auto header = parse(make_file(json, std::vector<uint8_t>(4, 0)));
  ASSERT_TRUE(header.has_value()) << header.error().to_string();
  EXPECT_EQ(header->tensors.size(), 3u);
}

// ---- Writer errors --------------------------------------------------------------------------

TEST_F(SafetensorsTest, WriterRejectsWhatItCannotWriteAndLeavesNoFile) {
  auto m = random_tensor({4, 6}, DType::kF32, 1);
  auto transposed = m.transpose(0, 1);
  ASSERT_TRUE(transposed.has_value());
  auto path = dir_ / "bad.safetensors";
  struct Case {
    NamedTensors tensors;
    std::string_view expected;
  };
  std::vector<Case> cases = {
      {{{"t", *transposed}}, "not contiguous"},
      {{{"a", m}, {"a", m}}, "more than once"},
      {{{"__metadata__", m}}, "reserved"},
      {{{"u", Tensor()}}, "undefined"},
      {{{"bad\xff", m}}, "JSON"},
  };
  for (const auto& c : cases) {
    Status s = write_safetensors(path, c.tensors);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
    EXPECT_THAT(s.message(), HasSubstr(std::string(c.expected)));
    EXPECT_THAT(s.message(), HasSubstr("bad.safetensors"));
  }
  Status no_dir = write_safetensors(dir_ / "missing" / "x.safetensors", {{"a", m}});
  EXPECT_EQ(no_dir.code(), ErrorCode::kIoError);
  // Nothing was left behind: no final file, no temporary.
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(SafetensorsTest, WriterReplacesAtomicallyAndLeavesNoTemporary) {
  auto path = dir_ / "x.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"a", random_tensor({8}, DType::kU8, 1)}}).is_ok());
  auto before = SafetensorsFile::open(path);
  ASSERT_TRUE(before.has_value());
  auto old_view = before->tensor("a");
  ASSERT_TRUE(old_view.has_value());
  auto old_bytes = tensor_bytes(*old_view);
  ASSERT_TRUE(write_safetensors(path, {{"b", random_tensor({16}, DType::kU8, 2)}}).is_ok());
  // The old mapping still sees the old file (rename replaced the name, not the inode).
  EXPECT_EQ(tensor_bytes(*old_view), old_bytes);
  auto after = SafetensorsFile::open(path);
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(after->contains("b"));
  EXPECT_FALSE(after->contains("a"));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) {
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

// ---- The fuzz seeds stay meaningful ---------------------------------------------------------

TEST(SafetensorsCorpus, SeedsParseOrFailAsTheirNamesSay) {
  fs::path corpus =
      fs::path(LOCUS_TEST_DATA_DIR) / ".." / "fuzz" / "corpus" / "safetensors_header_fuzz";
  ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
  int valid = 0;
  int invalid = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    auto header = parse_safetensors_header(bytes, bytes.size(), e.path().filename().string());
    std::string name = e.path().filename().string();
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(header.has_value()) << name << ": " << header.error().to_string();
      ++valid;
    } else if (name.rfind("bad_", 0) == 0) {
      EXPECT_FALSE(header.has_value()) << name;
      ++invalid;
    }
  }
  EXPECT_GE(valid, 5);
  EXPECT_GE(invalid, 3);
}

}  // namespace
}  // namespace locus
