// .npy reader/writer: round trips for every supported dtype, headers as numpy writes them
// (format 1.0 and 2.0), and clean errors for Fortran order, unsupported or big-endian dtypes,
// truncation and malformed headers.
#include <gtest/gtest.h>

#include <cstring>

#include "io/npy.h"

namespace kiln::io {
namespace {

std::vector<uint8_t> npy_file(const std::string& header_dict, const std::vector<uint8_t>& data, int major = 1) {
  std::string h = header_dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  b.push_back(static_cast<uint8_t>(h.size()));
  b.push_back(static_cast<uint8_t>(h.size() >> 8));
  if (major != 1) {
    b.push_back(0);
    b.push_back(0);
  }
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<uint8_t> floats_le(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.begin(), b.size());
  return b;
}

TEST(Npy, RoundTripsEveryDtype) {
  for (DataType dt : {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64, DataType::kInt8, DataType::kInt16,
                      DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kUInt16, DataType::kUInt32,
                      DataType::kUInt64, DataType::kBool}) {
    for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{0, 3}}) {
      Tensor t(dt, shape);
      auto* p = static_cast<uint8_t*>(t.raw());
      for (size_t i = 0; i < t.nbytes(); ++i) p[i] = dt == DataType::kBool ? (i % 3 == 0) : static_cast<uint8_t>(i * 37 + 11);
      auto bytes = npy_bytes(t);
      ASSERT_TRUE(bytes.ok()) << dtype_name(dt);
      EXPECT_EQ(bytes->size() - t.nbytes(), ((bytes->size() - t.nbytes()) / 64) * 64) << "data starts 64-aligned";
      auto back = parse_npy(bytes->data(), bytes->size(), "test");
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      EXPECT_TRUE(back->bit_equal(t)) << dtype_name(dt) << shape_str(shape);
    }
  }
}

TEST(Npy, ReadsNumpyHeaders) {
  const auto f4 = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", floats_le({1, 2, 3, -4}));
  auto t = parse_npy(f4.data(), f4.size(), "a.npy");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->shape(), (Shape{2, 2}));
  EXPECT_EQ(t->data<float>()[3], -4.f);
  auto v2 = npy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", {7, 8, 9}, 2);
  auto u = parse_npy(v2.data(), v2.size(), "b.npy");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->dtype(), DataType::kUInt8);
  EXPECT_EQ(u->shape(), (Shape{3}));
  auto s = npy_file("{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": ()}", std::vector<uint8_t>(8, 0));
  auto scalar = parse_npy(s.data(), s.size(), "c.npy");
  ASSERT_TRUE(scalar.ok()) << scalar.status().to_string();
  EXPECT_EQ(scalar->rank(), 0);
}

void expect_error(const std::vector<uint8_t>& b, const std::string& part) {
  auto t = parse_npy(b.data(), b.size(), "'x.npy'");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(part), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("'x.npy'"), std::string::npos) << t.status().message();
}

TEST(Npy, ClearErrors) {
  expect_error(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", floats_le({1, 2, 3, 4})),
               "Fortran-order");
  expect_error(npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::vector<uint8_t>(8)),
               "unsupported dtype '<c8'");
  expect_error(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::vector<uint8_t>(4)),
               "big-endian");
  expect_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", floats_le({1, 2, 3})),
               "truncated: shape [2,2] of float32 needs 16 bytes of data, the file has 12");
  expect_error(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", {}), "structured");
  expect_error(npy_file("{'descr': '<f4', 'shape': (1,), }", {}), "fortran_order");
  expect_error(npy_file("{'descr': '<f4' 'fortran_order': False}", {}), "malformed .npy header");
  auto good = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", floats_le({1}));
  expect_error(std::vector<uint8_t>(good.begin(), good.begin() + 40), "truncated");
  expect_error({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}, "not a .npy file");
  auto v9 = good;
  v9[6] = 9;
  expect_error(v9, "format version 9.0");
}

TEST(Npy, RefusesDtypesNpyCannotHold) {
  auto b = npy_bytes(Tensor(DataType::kBFloat16, {2}));
  EXPECT_EQ(b.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(read_npy("/nonexistent.npy").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln::io
