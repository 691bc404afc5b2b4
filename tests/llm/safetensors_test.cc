// The safetensors reader on files the tests write: valid ones read back byte for byte, each kind
// of damage refused with a message naming the file and tensor.
#include "llm/safetensors.h"

#include <gtest/gtest.h>

#include <random>

#include "llm/llm_test_util.h"

namespace kiln::llm {
namespace {

using testing::st_bytes;
using testing::st_file;
using testing::st_header;
using testing::st_tensor;
using testing::StTensor;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("st"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& bytes, const std::string& name = "model.safetensors") {
    const std::string p = dir_ + "/" + name;
    testing::write_file(p, bytes);
    return p;
  }
  // Opens `bytes` and expects `code` with every fragment in the message.
  void expect_error(const std::string& bytes, StatusCode code, std::vector<std::string> fragments) {
    const std::string p = write(bytes);
    auto f = SafetensorsFile::open(p);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), code) << f.status().to_string();
    EXPECT_NE(f.status().message().find(p), std::string::npos) << f.status().message();
    for (const auto& s : fragments) EXPECT_NE(f.status().message().find(s), std::string::npos) << f.status().message();
  }
  std::string dir_;
};

TEST_F(SafetensorsTest, ReadsTensorsMetadataAndBytes) {
  const std::vector<StTensor> ts = {st_tensor("a.weight", "F32", {2, 3}, 10), st_tensor("b", "BF16", {4}, 50),
                                    st_tensor("flag", "BOOL", {}, 7), st_tensor("ids", "I64", {2}, 90),
                                    st_tensor("fp8", "F8_E4M3", {3}, 3)};
  const std::string p = write(st_file(ts, {{"format", "pt"}}));
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors().size(), 5u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsTensor* a = f->find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DataType::kFloat32);
  EXPECT_EQ(a->shape, (Shape{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a->data), a->nbytes), ts[0].bytes);
  EXPECT_EQ(f->find("b")->dtype, DataType::kBFloat16);
  EXPECT_EQ(f->find("flag")->dtype, DataType::kBool);
  EXPECT_EQ(f->find("flag")->shape, Shape{});
  EXPECT_EQ(f->find("ids")->dtype, DataType::kInt64);
  EXPECT_EQ(f->find("fp8")->dtype, DataType::kFloat8E4M3FN);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->find("ids")->data), 16), ts[3].bytes);
  EXPECT_EQ(f->find("missing"), nullptr);
  // The tensor view holds the same bytes (wrapped or copied) and outlives the file object.
  Tensor t = a->to_tensor();
  f = Status(StatusCode::kInternal, "dropped");
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(t.raw(), ts[0].bytes.data(), 24), 0);
}

TEST_F(SafetensorsTest, EmptyTensorsAndNoTensors) {
  auto f = SafetensorsFile::open(write(st_file({st_tensor("e", "F16", {0, 5}), st_tensor("x", "U8", {3})})));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->find("e")->nbytes, 0u);
  auto g = SafetensorsFile::open(write(st_bytes("{}", ""), "empty.safetensors"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(g->tensors().empty());
}

TEST_F(SafetensorsTest, TruncatedFileAndHeader) {
  expect_error(std::string("\x10\x00\x00", 3), StatusCode::kInvalidModel, {"8-byte header length"});
  const std::string good = st_file({st_tensor("w", "F32", {4})});
  // The header length points past the end: cut inside the header.
  expect_error(good.substr(0, 20), StatusCode::kInvalidModel, {"header length", "truncated"});
  // Data cut short: the tensor's offsets run past it.
  expect_error(good.substr(0, good.size() - 3), StatusCode::kInvalidModel, {"tensor 'w'", "run past the data"});
  // A header length beyond the format's limit.
  std::string huge = good;
  huge[4] = 0x7f;
  expect_error(huge, StatusCode::kInvalidModel, {"limit"});
}

TEST_F(SafetensorsTest, BadHeaderJson) {
  expect_error(st_bytes("[1, 2]", ""), StatusCode::kInvalidModel, {"does not start with '{'"});
  expect_error(st_bytes("{\"a\": ", ""), StatusCode::kInvalidModel, {"not a valid JSON object"});
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [1]}})", "abcd"), StatusCode::kInvalidModel, {"tensor 'a'", "data_offsets"});
  expect_error(st_bytes(R"({"__metadata__": {"k": 3}})", ""), StatusCode::kInvalidModel, {"__metadata__", "'k'"});
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd"), StatusCode::kInvalidModel,
               {"tensor 'a'", "negative"});
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                        "abcdefgh"),
               StatusCode::kInvalidModel, {"'a' appears twice"});
}

TEST_F(SafetensorsTest, OffsetsOutOfRangeOrInconsistent) {
  // end past the buffer.
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})", "12345678"), StatusCode::kInvalidModel,
               {"tensor 'a'", "[0, 12]", "run past"});
  // end before begin.
  expect_error(st_bytes(R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})", "1234"), StatusCode::kInvalidModel,
               {"tensor 'a'", "end before"});
  // span disagrees with dtype x shape.
  expect_error(st_bytes(R"({"a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 8]}})", "12345678"), StatusCode::kInvalidModel,
               {"tensor 'a'", "span 8 bytes", "needs 6"});
}

TEST_F(SafetensorsTest, OverlapsHolesAndTrailingBytes) {
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                        "12345678"),
               StatusCode::kInvalidModel, {"'a' and 'b' overlap"});
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                        "123456789abc"),
               StatusCode::kInvalidModel, {"bytes 4..8", "tensor 'b'", "no holes"});
  expect_error(st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", "12345678"), StatusCode::kInvalidModel,
               {"4 bytes after the last tensor"});
}

TEST_F(SafetensorsTest, Dtypes) {
  expect_error(st_bytes(R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", "12345678"), StatusCode::kUnsupported,
               {"tensor 'a'", "F64", "not supported"});
  expect_error(st_bytes(R"({"a": {"dtype": "Q4_K", "shape": [1], "data_offsets": [0, 1]}})", "1"), StatusCode::kInvalidModel,
               {"tensor 'a'", "unknown dtype 'Q4_K'"});
  for (const char* d : {"F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I8", "I32", "I64", "U8", "BOOL"}) {
    EXPECT_NE(dtype_from_safetensors(d), DataType::kUndefined) << d;
    EXPECT_STREQ(safetensors_dtype_name(dtype_from_safetensors(d)), d);
  }
}

TEST_F(SafetensorsTest, CorruptedBytesNeverCrash) {
  // Every single-byte corruption of a valid file (header and data) either still reads — with
  // each tensor's bytes inside the file — or is an error; 2000 deterministic mutations.
  const std::string good = st_file({st_tensor("a.weight", "F32", {2, 3}), st_tensor("b", "BF16", {4}), st_tensor("c", "I8", {5})},
                                   {{"format", "pt"}});
  std::mt19937 rng(1234);
  int errors = 0;
  for (int k = 0; k < 2000; ++k) {
    std::string bad = good;
    const size_t pos = rng() % bad.size();
    bad[pos] = static_cast<char>(rng() % 256);
    if (k % 7 == 0) bad.resize(rng() % bad.size());  // and some truncations
    const std::string p = write(bad);
    auto f = SafetensorsFile::open(p);
    if (!f.ok()) {
      ++errors;
      EXPECT_NE(f.status().message().find(p), std::string::npos) << f.status().message();
      continue;
    }
    for (const auto& t : f->tensors()) {
      EXPECT_GE(t.data, t.file->data());
      EXPECT_LE(t.data + t.nbytes, t.file->data() + t.file->size());
    }
  }
  EXPECT_GT(errors, 500);  // most mutations of header bytes or lengths are caught
}

TEST_F(SafetensorsTest, MissingFileAndDirectory) {
  auto f = SafetensorsFile::open(dir_ + "/nope.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  auto d = SafetensorsFile::open(dir_);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::llm
