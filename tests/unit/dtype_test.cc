#include "core/dtype.h"

#include <gtest/gtest.h>

namespace locus {
namespace {

TEST(DType, CatalogueIsConsistent) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto d = static_cast<DType>(i);
    const auto& info = dtype_info(d);
    EXPECT_EQ(info.dtype, d) << info.name;
    EXPECT_EQ(parse_dtype(info.name), d) << info.name;
    if (!info.safetensors_name.empty()) {
      EXPECT_EQ(dtype_from_safetensors(info.safetensors_name), d);
    }
  }
}

TEST(DType, BytesAndBits) {
  EXPECT_EQ(dtype_bytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(dtype_bytes(DType::kF8E4M3, 3), 3u);
  EXPECT_EQ(dtype_bytes(DType::kF4E2M1, 4), 2u);
  EXPECT_EQ(dtype_bytes(DType::kF4E2M1, 3), 2u);  // a half byte rounds up
  EXPECT_TRUE(is_sub_byte(DType::kF4E2M1));
  EXPECT_FALSE(is_sub_byte(DType::kUE8M0));
  EXPECT_EQ(dtype_bits(DType::kI64), 64);
}

TEST(DType, AliasesFromConfigsAndUnknownNames) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::kF8E4M3);
  EXPECT_EQ(parse_dtype("F8_E8M0"), DType::kUE8M0);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_FALSE(parse_dtype("bf17"));
  EXPECT_FALSE(dtype_from_safetensors("bf16"));  // safetensors names are upper case only
}

}  // namespace
}  // namespace locus
