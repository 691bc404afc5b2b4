#include <gtest/gtest.h>

#include "kiln/status.h"

namespace kiln {
namespace {

StatusOr<int> half(int x) {
  if (x % 2) return invalid_argument("odd");
  return x / 2;
}

Status use(int x, int* out) {
  KILN_ASSIGN_OR_RETURN(*out, half(x));
  return Status::Ok();
}

TEST(Status, PropagatesErrorsAndValues) {
  int v = 0;
  EXPECT_TRUE(use(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = use(3, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "InvalidArgument: odd");
  EXPECT_EQ(s.with_context("ctx").message(), "ctx: odd");
}

}  // namespace
}  // namespace kiln
