#include "core/logging.h"

#include <gtest/gtest.h>

namespace locus {
namespace {

TEST(Logging, LevelsByName) {
  log::init();
  EXPECT_TRUE(log::set_level("debug").is_ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  EXPECT_TRUE(log::set_level("off").is_ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::off);
  auto bad = log::set_level("loud");
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'loud'"), std::string::npos);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::off);  // unchanged by a bad name
  EXPECT_TRUE(log::set_level("info").is_ok());
}

}  // namespace
}  // namespace locus
