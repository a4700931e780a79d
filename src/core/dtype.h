// Element types locus stores and computes with, and their names in checkpoints.
// The numeric conversions live in core/float_convert.h; this file is only the catalogue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace locus {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // float8_e4m3fn: no infinities, NaN = S.1111.111, max 448 (also NVFP4 per-16 scales)
  kF8E5M2,  // float8_e5m2: IEEE-like, has inf/NaN, max 57344
  kF4E2M1,  // float4_e2m1fn, packed two per byte, element 2i in the low nibble (NVFP4, MXFP4)
  kUE8M0,   // unsigned exponent-only scale 2^(e-127), 0xFF = NaN (MX block scales)
  kF64,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kBool,
  kU16,
  kU32,
  kU64,
};

inline constexpr int kNumDTypes = 17;

struct DTypeInfo {
  DType dtype;
  std::string_view name;              // locus's name: "bf16", "f8_e4m3", ...
  std::string_view safetensors_name;  // "BF16", "F8_E4M3", ... (empty: none)
  int bits;                           // bits per element (4 for packed fp4)
  bool is_float;
};

const DTypeInfo& dtype_info(DType dtype);

inline std::string_view dtype_name(DType dtype) {
  return dtype_info(dtype).name;
}
inline int dtype_bits(DType dtype) {
  return dtype_info(dtype).bits;
}
inline bool is_sub_byte(DType dtype) {
  return dtype_info(dtype).bits < 8;
}

// Bytes taken by `numel` elements stored densely. Packed sub-byte types round up to whole bytes.
inline size_t dtype_bytes(DType dtype, size_t numel) {
  return (numel * static_cast<size_t>(dtype_bits(dtype)) + 7) / 8;
}

// Parses locus names ("bf16", "float8_e4m3fn" aliases included) and safetensors names ("BF16").
std::optional<DType> parse_dtype(std::string_view name);
std::optional<DType> dtype_from_safetensors(std::string_view name);

}  // namespace locus
