#include "core/dtype.h"

#include <array>
#include <cstdlib>

namespace locus {
namespace {

// Safetensors names follow the format's spec (huggingface/safetensors): F8_E8M0 and F4 are the
// names it gives the MX scale and packed fp4 types.
constexpr std::array<DTypeInfo, kNumDTypes> kInfos = {{
    {DType::kF32, "f32", "F32", 32, true},
    {DType::kF16, "f16", "F16", 16, true},
    {DType::kBF16, "bf16", "BF16", 16, true},
    {DType::kF8E4M3, "f8_e4m3", "F8_E4M3", 8, true},
    {DType::kF8E5M2, "f8_e5m2", "F8_E5M2", 8, true},
    {DType::kF4E2M1, "f4_e2m1", "F4", 4, true},
    {DType::kUE8M0, "ue8m0", "F8_E8M0", 8, true},
    {DType::kF64, "f64", "F64", 64, true},
    {DType::kI8, "i8", "I8", 8, false},
    {DType::kU8, "u8", "U8", 8, false},
    {DType::kI16, "i16", "I16", 16, false},
    {DType::kI32, "i32", "I32", 32, false},
    {DType::kI64, "i64", "I64", 64, false},
    {DType::kBool, "bool", "BOOL", 8, false},
    {DType::kU16, "u16", "U16", 16, false},
    {DType::kU32, "u32", "U32", 32, false},
    {DType::kU64, "u64", "U64", 64, false},
}};

struct Alias {
  std::string_view name;
  DType dtype;
};
// Spellings users and configs write (vLLM --dtype, torch dtype names in config.json).
constexpr std::array<Alias, 14> kAliases = {{
    {"float32", DType::kF32},
    {"float", DType::kF32},
    {"float16", DType::kF16},
    {"half", DType::kF16},
    {"bfloat16", DType::kBF16},
    {"float8_e4m3fn", DType::kF8E4M3},
    {"fp8_e4m3", DType::kF8E4M3},
    {"fp8", DType::kF8E4M3},
    {"float8_e5m2", DType::kF8E5M2},
    {"fp8_e5m2", DType::kF8E5M2},
    {"float4_e2m1fn_x2", DType::kF4E2M1},
    {"float8_e8m0fnu", DType::kUE8M0},
    {"float64", DType::kF64},
    {"int64", DType::kI64},
}};

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  auto index = static_cast<size_t>(dtype);
  if (index >= kInfos.size()) std::abort();  // an out-of-range enum value is memory corruption
  return kInfos[index];
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kInfos) {
    if (info.name == name || info.safetensors_name == name) return info.dtype;
  }
  for (const auto& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& info : kInfos) {
    if (info.safetensors_name == name) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace locus
