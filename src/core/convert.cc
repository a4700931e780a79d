// Bulk dtype conversion on the host. The scalar rules live in core/float_convert.h; this file only
// loops, decodes 8-bit formats through 256-entry tables, and checks arguments.
#include "core/convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/float_convert.h"

namespace locus {
namespace {

using DecodeTable = std::array<float, 256>;

template <typename Decode>
DecodeTable make_decode_table(Decode decode) {
  DecodeTable table{};
  for (int code = 0; code < 256; ++code)
    table[code] = decode(static_cast<uint8_t>(code));
  return table;
}

// A table lookup is several times faster than decoding bit fields per element, and every entry is
// produced by the scalar decoder, so the two cannot disagree.
const DecodeTable& e4m3_table() {
  static const DecodeTable table = make_decode_table(e4m3_to_f32);
  return table;
}
const DecodeTable& e5m2_table() {
  static const DecodeTable table = make_decode_table(e5m2_to_f32);
  return table;
}
const DecodeTable& ue8m0_table() {
  static const DecodeTable table = make_decode_table(ue8m0_to_f32);
  return table;
}

void decode_with_table(const DecodeTable& table, const uint8_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i)
    dst[i] = table[src[i]];
}

void decode_e2m1(const uint8_t* src, float* dst, size_t n) {
  for (size_t i = 0; i + 1 < n; i += 2) {
    dst[i] = e2m1_to_f32(unpack_e2m1(src[i / 2], 0));
    dst[i + 1] = e2m1_to_f32(unpack_e2m1(src[i / 2], 1));
  }
  if (n % 2 != 0) dst[n - 1] = e2m1_to_f32(unpack_e2m1(src[n / 2], 0));
}

void encode_e2m1(const float* src, uint8_t* dst, size_t n) {
  for (size_t i = 0; i + 1 < n; i += 2)
    dst[i / 2] = f32x2_to_e2m1x2(src[i], src[i + 1]);
  if (n % 2 != 0) dst[n / 2] = pack_e2m1x2(f32_to_e2m1(src[n - 1]), 0);
}

// f64 -> f32 rounding to odd: truncate toward zero, then set the last bit if anything was lost.
// A value rounded to odd in a format with at least two more significand bits than the target
// rounds to nearest-even in the target exactly as the original would (f32 has 24 bits; the
// widest narrow target, f16, has 11), so f64 -> f32 -> bf16/f16/fp8/fp4 rounds once in effect.
// Out-of-range values truncate to ±FLT_MAX, which every narrow target saturates or overflows
// exactly as it would the original.
float f64_to_f32_round_to_odd(double x) {
  if (std::isnan(x)) return static_cast<float>(x);
  float nearest = static_cast<float>(x);
  if (static_cast<double>(nearest) == x) return nearest;
  uint32_t bits = float_convert_detail::f32_bits(nearest);
  // Nearest rounding went away from zero: step one ulp back toward zero (inf -> FLT_MAX too).
  if (std::fabs(static_cast<double>(nearest)) > std::fabs(x)) --bits;
  return float_convert_detail::f32_from_bits(bits | 1u);
}

Status unsupported_dtype(std::string_view what, DType dtype) {
  return unsupported(fmt::format(
      "{}: dtype {} is not a float format (supported: f32, f16, bf16, f8_e4m3, f8_e5m2, "
      "f4_e2m1, ue8m0, f64)",
      what, dtype_name(dtype)));
}

Status check_pointers(std::string_view what, const void* src, const void* dst, size_t n) {
  if (n > 0 && (src == nullptr || dst == nullptr)) {
    return invalid_argument(fmt::format("{}: null pointer for {} elements", what, n));
  }
  return Status::ok();
}

// Encodes f32 -> dtype where the f32 values came from f64 rounded to odd (or from f32 itself).
void encode_from_f32(const float* src, DType dtype, void* dst, size_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i)
        out[i] = f32_to_f16_bits(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i)
        out[i] = f32_to_bf16_bits(src[i]);
      return;
    }
    case DType::kF8E4M3: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i)
        out[i] = f32_to_e4m3(src[i]);
      return;
    }
    case DType::kF8E5M2: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i)
        out[i] = f32_to_e5m2(src[i]);
      return;
    }
    case DType::kF4E2M1:
      encode_e2m1(src, static_cast<uint8_t*>(dst), n);
      return;
    case DType::kUE8M0: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i)
        out[i] = f32_to_ue8m0(src[i], Ue8m0Rounding::kUp);
      return;
    }
    case DType::kF64: {
      auto* out = static_cast<double*>(dst);
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<double>(src[i]);
      return;
    }
    default:
      return;  // callers check is_convertible_dtype first
  }
}

void decode_to_f32(DType dtype, const void* src, float* dst, size_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i)
        dst[i] = f16_bits_to_f32(in[i]);
      return;
    }
    case DType::kBF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i)
        dst[i] = bf16_bits_to_f32(in[i]);
      return;
    }
    case DType::kF8E4M3:
      decode_with_table(e4m3_table(), static_cast<const uint8_t*>(src), dst, n);
      return;
    case DType::kF8E5M2:
      decode_with_table(e5m2_table(), static_cast<const uint8_t*>(src), dst, n);
      return;
    case DType::kF4E2M1:
      decode_e2m1(static_cast<const uint8_t*>(src), dst, n);
      return;
    case DType::kUE8M0:
      decode_with_table(ue8m0_table(), static_cast<const uint8_t*>(src), dst, n);
      return;
    case DType::kF64: {
      const auto* in = static_cast<const double*>(src);
      for (size_t i = 0; i < n; ++i)
        dst[i] = static_cast<float>(in[i]);
      return;
    }
    default:
      return;
  }
}

}  // namespace

bool is_convertible_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF4E2M1:
    case DType::kUE8M0:
    case DType::kF64:
      return true;
    default:
      return false;
  }
}

Status convert_to_f32(DType src_dtype, const void* src, float* dst, size_t n) {
  if (!is_convertible_dtype(src_dtype)) return unsupported_dtype("convert_to_f32", src_dtype);
  LOCUS_RETURN_IF_ERROR(check_pointers("convert_to_f32", src, dst, n));
  decode_to_f32(src_dtype, src, dst, n);
  return Status::ok();
}

Status convert_from_f32(const float* src, DType dst_dtype, void* dst, size_t n) {
  if (!is_convertible_dtype(dst_dtype)) return unsupported_dtype("convert_from_f32", dst_dtype);
  LOCUS_RETURN_IF_ERROR(check_pointers("convert_from_f32", src, dst, n));
  encode_from_f32(src, dst_dtype, dst, n);
  return Status::ok();
}

Status convert_tensor(const Tensor& src, Tensor& dst) {
  const auto describe = [&] {
    return fmt::format("convert_tensor {} -> {}", src.to_string(), dst.to_string());
  };
  if (!is_convertible_dtype(src.dtype())) return unsupported_dtype(describe(), src.dtype());
  if (!is_convertible_dtype(dst.dtype())) return unsupported_dtype(describe(), dst.dtype());
  if (!(src.shape() == dst.shape())) {
    return invalid_argument(fmt::format("{}: shapes differ ({} vs {})", describe(),
                                        src.shape().to_string(), dst.shape().to_string()));
  }
  if (!src.device().is_cpu() || !dst.device().is_cpu()) {
    return invalid_argument(fmt::format("{}: both tensors must be on the host", describe()));
  }
  if (!src.is_contiguous() || !dst.is_contiguous()) {
    return invalid_argument(fmt::format("{}: both tensors must be contiguous", describe()));
  }
  const auto n = static_cast<size_t>(src.numel());
  if (n == 0) return Status::ok();
  if (!src.defined() || !dst.defined()) {
    return invalid_argument(fmt::format("{}: tensor has no storage", describe()));
  }
  const DType src_dtype = src.dtype();
  const DType dst_dtype = dst.dtype();
  if (src_dtype == dst_dtype) {
    std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
    return Status::ok();
  }
  // Through f32 in chunks: every decode into f32 is exact, except f64 whose rounding is handled
  // below. The chunk is even so packed fp4 chunks start on a byte.
  constexpr size_t kChunk = 4096;
  static_assert(kChunk % 2 == 0);
  std::array<float, kChunk> buffer;
  const auto* src_bytes = static_cast<const uint8_t*>(src.raw_data());
  auto* dst_bytes = static_cast<uint8_t*>(dst.raw_data());
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t count = std::min(kChunk, n - start);
    const uint8_t* chunk_src = src_bytes + dtype_bytes(src_dtype, start);
    uint8_t* chunk_dst = dst_bytes + dtype_bytes(dst_dtype, start);
    if (src_dtype == DType::kF64 && dst_dtype != DType::kF32) {
      const auto* in = static_cast<const double*>(static_cast<const void*>(chunk_src));
      for (size_t i = 0; i < count; ++i)
        buffer[i] = f64_to_f32_round_to_odd(in[i]);
    } else {
      decode_to_f32(src_dtype, chunk_src, buffer.data(), count);
    }
    encode_from_f32(buffer.data(), dst_dtype, chunk_dst, count);
  }
  return Status::ok();
}

}  // namespace locus
