#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace locus {
namespace {

Expected<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value " + std::to_string(v) + " is not positive");
  return v;
}

Expected<int> doubled(int v) {
  LOCUS_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_both(int a, int b) {
  LOCUS_RETURN_IF_ERROR(parse_positive(a));
  LOCUS_RETURN_IF_ERROR(parse_positive(b));
  return Status::ok();
}

TEST(Status, OkAndErrorsCarryCodeAndMessage) {
  EXPECT_TRUE(Status::ok().is_ok());
  EXPECT_EQ(Status::ok().to_string(), "ok");
  Status s = not_found("model.safetensors");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.to_string(), "not_found: model.safetensors");
}

TEST(Status, WithContextPrependsAndKeepsCode) {
  Status s = parse_error("unexpected token").with_context("config.json");
  EXPECT_EQ(s.code(), ErrorCode::kParseError);
  EXPECT_EQ(s.message(), "config.json: unexpected token");
  EXPECT_TRUE(Status::ok().with_context("ignored").is_ok());
}

TEST(Expected, HoldsValueOrError) {
  Expected<std::string> v = std::string("x");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, "x");
  EXPECT_TRUE(v.status().is_ok());
  Expected<std::string> e = io_error("disk");
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kIoError);
  EXPECT_EQ(e.value_or("fallback"), "fallback");
}

TEST(Expected, OkStatusIsNotAValue) {
  Expected<int> e = Status::ok();
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kInternal);
}

TEST(Expected, MoveOnlyValues) {
  Expected<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p);
  std::unique_ptr<int> owned = std::move(p).value();
  EXPECT_EQ(*owned, 7);
}

TEST(Expected, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "value -1 is not positive");
  EXPECT_TRUE(check_both(1, 2).is_ok());
  EXPECT_EQ(check_both(1, 0).message(), "value 0 is not positive");
}

TEST(ExpectedDeathTest, ReadingTheValueOfAnErrorAborts) {
  Expected<int> e = internal_error("boom");
  EXPECT_DEATH({ (void)*e; }, "");
}

}  // namespace
}  // namespace locus
