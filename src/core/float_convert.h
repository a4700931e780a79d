// Exact scalar conversions between f32 and locus's narrow float formats (bf16, f16, fp8 e4m3fn and
// e5m2, fp4 e2m1, ue8m0 scales). Header-only and free of host libraries so that CUDA kernels and
// the CPU reference use the very same code; it must never allocate, throw or include <string>.
//
// Every f32 -> narrow conversion rounds once, directly from the f32 bits (round to nearest, ties
// to even). Going through an intermediate format (f32 -> f16 -> fp8) would round twice and
// disagree with the GPU on values near a midpoint.
//
// The fp8 and fp4 encoders reproduce CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) and
// __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) bit for bit, NaN and infinity included;
// the ue8m0 encoder reproduces __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, ...) for kUp and kDown.
// Summary of the special cases (x stands for any finite value past the format's largest):
//
//   input         bf16 / f16          e4m3      e5m2      e2m1      ue8m0
//   NaN           quiet NaN, sign     0x7F      0x7F      0x7 (+6)  0xFF
//   ±inf          ±inf                ±448      ±57344    ±6        0xFE (2^127)
//   ±x            ±inf (RNE overflow) ±448      ±57344    ±6        0xFE
//   -0, tiny < 0  -0                  0x80      0x80      0x8       0x00 (sign ignored)
#pragma once

#include <cstdint>
#include <cstring>

#ifndef LOCUS_HOST_DEVICE
#if defined(__CUDACC__)
#define LOCUS_HOST_DEVICE __host__ __device__
#else
#define LOCUS_HOST_DEVICE
#endif
#endif

namespace locus {

namespace float_convert_detail {

LOCUS_HOST_DEVICE inline uint32_t f32_bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof(bits));
  return bits;
}

LOCUS_HOST_DEVICE inline float f32_from_bits(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof(x));
  return x;
}

inline constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
inline constexpr uint32_t kF32Inf = 0x7F800000u;
inline constexpr uint32_t kF32QuietNan = 0x7FC00000u;

// Rounds a non-negative f32 (its bits, sign cleared) to the nearest value of a format
// with `kManBits` stored mantissa bits, exponent bias `kBias` and gradual underflow, ties to even.
// Returns the magnitude code (biased exponent << kManBits | mantissa). Codes past the format's
// largest finite value (infinity included) are returned as they are, large: the caller saturates
// or maps them to infinity. NaN bits give a meaningless code the caller discards.
template <int kManBits, int kBias>
LOCUS_HOST_DEVICE inline uint32_t round_magnitude(uint32_t abs_bits) {
  constexpr int kShift = 23 - kManBits;
  // f32 bits of the target's smallest normal, 2^(1 - kBias).
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 - kBias + 1) << 23;
  if (abs_bits >= kMinNormalBits) {
    // Normal target: re-bias the exponent in place, then round the dropped kShift bits the way the
    // bf16 trick does: adding half-minus-one plus the lowest kept bit carries exactly when the
    // dropped part is above half, or at half with an odd kept part. A carry out of the mantissa
    // moves into the exponent, which is what a round-up to the next binade must do.
    uint32_t rebiased = abs_bits - (static_cast<uint32_t>(127 - kBias) << 23);
    rebiased += ((1u << (kShift - 1)) - 1u) + ((rebiased >> kShift) & 1u);
    return rebiased >> kShift;
  }
  // Subnormal target (rare in real data): the significand, implicit bit included, moves right by
  // kShift plus however many binades the value sits below the smallest normal.
  const uint32_t f32_exponent = abs_bits >> 23;
  uint32_t significand = abs_bits & 0x7FFFFFu;
  if (f32_exponent != 0) significand |= 0x800000u;  // f32 subnormals have no implicit bit
  const int exponent =
      f32_exponent == 0 ? 1 - 127 + kBias : static_cast<int>(f32_exponent) - 127 + kBias;  // < 1
  const int shift = kShift + 1 - exponent;
  // The significand is below 2^24, so from a shift of 25 on it is below half the smallest
  // subnormal and rounds to zero (24 is still a tie or a round-up).
  if (shift > 24) return 0;
  uint32_t code = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (code & 1u) != 0)) ++code;
  return code;
}

// Decodes a magnitude code of a format with gradual underflow and no special values at this code
// into f32 bits. Every such value is exactly representable in f32.
template <int kManBits, int kBias>
LOCUS_HOST_DEVICE inline uint32_t decode_magnitude(uint32_t code) {
  constexpr uint32_t kManMask = (1u << kManBits) - 1u;
  int exponent = static_cast<int>(code >> kManBits);
  uint32_t mantissa = code & kManMask;
  if (exponent == 0) {
    if (mantissa == 0) return 0;
    // Subnormal: normalize so the leading one becomes the implicit bit of an f32 normal.
    exponent = 1;
    while ((mantissa & (1u << kManBits)) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= kManMask;
  }
  return (static_cast<uint32_t>(exponent - kBias + 127) << 23) | (mantissa << (23 - kManBits));
}

}  // namespace float_convert_detail

// ---------------------------------------------------------------------------------------------
// bf16: the top half of an f32.

// Round to nearest even. Finite values past the largest bf16 become infinity (IEEE overflow),
// infinities stay, and a NaN stays a quiet NaN with its sign and top payload bits.
LOCUS_HOST_DEVICE inline uint16_t f32_to_bf16_bits(float x) {
  using namespace float_convert_detail;
  const uint32_t bits = f32_bits(x);
  if ((bits & kF32AbsMask) > kF32Inf) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit carries into bit 16 exactly when the dropped half is
  // above the midpoint, or at it with an odd kept part. Inf plus 0x7FFF(+1) stays below 0x7F81.
  const uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

LOCUS_HOST_DEVICE inline float bf16_bits_to_f32(uint16_t bits) {
  return float_convert_detail::f32_from_bits(static_cast<uint32_t>(bits) << 16);
}

// ---------------------------------------------------------------------------------------------
// f16: IEEE binary16 (bias 15, 10 mantissa bits, max 65504, smallest subnormal 2^-24).

// Round to nearest even, subnormals included. Values from 65520 (the midpoint between 65504 and
// 2^16) up become infinity, as IEEE overflow rounding requires. A NaN stays a quiet NaN with its
// sign and top payload bits.
LOCUS_HOST_DEVICE inline uint16_t f32_to_f16_bits(float x) {
  using namespace float_convert_detail;
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf)
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
  uint32_t code = round_magnitude<10, 15>(abs_bits);  // infinity comes out past 0x7C00 too
  if (code > 0x7C00u) code = 0x7C00u;
  return static_cast<uint16_t>(sign | code);
}

// Exact. A NaN keeps its sign and payload and comes back quiet.
LOCUS_HOST_DEVICE inline float f16_bits_to_f32(uint16_t bits) {
  using namespace float_convert_detail;
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t magnitude = bits & 0x7FFFu;
  if (magnitude >= 0x7C00u) {
    const uint32_t payload = static_cast<uint32_t>(magnitude & 0x3FFu) << 13;
    return f32_from_bits(sign | kF32Inf | payload | (payload != 0 ? 0x400000u : 0u));
  }
  return f32_from_bits(sign | decode_magnitude<10, 15>(magnitude));
}

// ---------------------------------------------------------------------------------------------
// fp8 e4m3fn: bias 7, 3 mantissa bits, no infinities, NaN = S.1111.111, max 448 (S.1111.110),
// smallest subnormal 2^-9.

// Round to nearest even, saturating like __NV_SATFINITE: every finite value past 448 and both
// infinities become ±448 (values up to the would-be midpoint 464 round to 448 anyway, the rest
// saturate). Any NaN becomes 0x7F, the positive NaN: CUDA canonicalizes NaN inputs the same way.
LOCUS_HOST_DEVICE inline uint8_t f32_to_e4m3(float x) {
  using namespace float_convert_detail;
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs_bits = bits & kF32AbsMask;
  uint32_t code = round_magnitude<3, 7>(abs_bits);  // infinity comes out past the max too
  if (code > 0x7Eu) code = 0x7Eu;
  return static_cast<uint8_t>(abs_bits > kF32Inf ? 0x7Fu : sign | code);
}

// Exact. 0x7F and 0xFF decode to a quiet NaN carrying the code's sign.
LOCUS_HOST_DEVICE inline float e4m3_to_f32(uint8_t code) {
  using namespace float_convert_detail;
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t magnitude = code & 0x7Fu;
  if (magnitude == 0x7Fu) return f32_from_bits(sign | kF32QuietNan);
  return f32_from_bits(sign | decode_magnitude<3, 7>(magnitude));
}

// ---------------------------------------------------------------------------------------------
// fp8 e5m2: bias 15, 2 mantissa bits, IEEE-like (inf = S.11111.00, NaN = S.11111.{01,10,11}),
// max 57344, smallest subnormal 2^-16. It is the top byte of an f16.

// Round to nearest even, saturating like __NV_SATFINITE: finite values past 57344 and both
// infinities become ±57344, so this never produces an infinity. Any NaN becomes 0x7F (positive,
// all mantissa bits set), the canonical NaN CUDA produces.
LOCUS_HOST_DEVICE inline uint8_t f32_to_e5m2(float x) {
  using namespace float_convert_detail;
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs_bits = bits & kF32AbsMask;
  uint32_t code = round_magnitude<2, 15>(abs_bits);  // infinity comes out past the max too
  if (code > 0x7Bu) code = 0x7Bu;
  return static_cast<uint8_t>(abs_bits > kF32Inf ? 0x7Fu : sign | code);
}

// Exact; ±inf for 0x7C/0xFC, a quiet NaN keeping sign and payload for the other 0x7D-0x7F codes.
LOCUS_HOST_DEVICE inline float e5m2_to_f32(uint8_t code) {
  return f16_bits_to_f32(static_cast<uint16_t>(code << 8));
}

// ---------------------------------------------------------------------------------------------
// fp4 e2m1: bias 1, 1 mantissa bit, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, no
// infinities or NaN. Nibbles are packed two per byte, element 2i in the low nibble.

// Round to nearest even, saturating to ±6 (infinities included). A NaN becomes 0x7 (+6): the
// format has no NaN and this is what __nv_cvt_float_to_fp4 and PTX cvt.rn.satfinite.e2m1x2 give.
// Returns a nibble in the low 4 bits.
LOCUS_HOST_DEVICE inline uint8_t f32_to_e2m1(float x) {
  using namespace float_convert_detail;
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 28) & 0x8u;
  const uint32_t abs_bits = bits & kF32AbsMask;
  uint32_t code = round_magnitude<1, 1>(abs_bits);  // infinity comes out past the max too
  if (code > 0x7u) code = 0x7u;
  return static_cast<uint8_t>(abs_bits > kF32Inf ? 0x7u : sign | code);
}

// Exact. Only the low 4 bits of `nibble` are read.
LOCUS_HOST_DEVICE inline float e2m1_to_f32(uint8_t nibble) {
  using namespace float_convert_detail;
  const uint32_t sign = static_cast<uint32_t>(nibble & 0x8u) << 28;
  return f32_from_bits(sign | decode_magnitude<1, 1>(nibble & 0x7u));
}

// Two fp4 nibbles in one byte: element 2i (`even`) in the low nibble, 2i+1 (`odd`) in the high.
LOCUS_HOST_DEVICE inline uint8_t pack_e2m1x2(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even & 0xFu) | ((odd & 0xFu) << 4));
}

// Element `index` (0: low nibble, 1: high nibble) of a packed byte, as a nibble.
LOCUS_HOST_DEVICE inline uint8_t unpack_e2m1(uint8_t packed, int index) {
  return static_cast<uint8_t>((index == 0 ? packed : packed >> 4) & 0xFu);
}

LOCUS_HOST_DEVICE inline uint8_t f32x2_to_e2m1x2(float even, float odd) {
  return pack_e2m1x2(f32_to_e2m1(even), f32_to_e2m1(odd));
}

// ---------------------------------------------------------------------------------------------
// ue8m0: an unsigned power-of-two scale 2^(e - 127), e in 0..254; 0xFF is NaN. There is no zero:
// e = 0 is 2^-127 (an f32 subnormal, still exact).

LOCUS_HOST_DEVICE inline float ue8m0_to_f32(uint8_t code) {
  using namespace float_convert_detail;
  if (code == 0xFF) return f32_from_bits(kF32QuietNan);
  if (code == 0) return f32_from_bits(0x00400000u);  // 2^-127
  return f32_from_bits(static_cast<uint32_t>(code) << 23);
}

enum class Ue8m0Rounding : uint8_t {
  // Smallest power of two >= |x| (ceil in log2). The choice for quantization scales
  // (DeepSeek/DeepGEMM-style scale = ceil_pow2(amax / fp8_max)): amax / scale then never exceeds
  // the element format's max. Same as __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf).
  kUp,
  // Nearest power of two in log2 space: 2^k for |x| in (2^(k-1/2), 2^(k+1/2)). The boundary
  // 2^(k+1/2) = 2^k * sqrt(2) is irrational, so no f32 value is ever a tie; the comparison is done
  // exactly on integers (significand^2 against 2^47).
  kNearest,
  // Largest power of two <= |x| (floor in log2), as the OCP MX spec's shared-scale rule uses.
  // Same as __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero).
  kDown,
};

// Encodes |x| as a power-of-two scale. The sign is ignored (a scale is a magnitude; CUDA does the
// same). NaN -> 0xFF. Zero and every |x| below the smallest scale clamp to 0x00 (2^-127): a zero
// amax comes from an all-zero block, which any scale quantizes to zeros. Infinity and every
// finite |x| whose rounding lands past 2^127 saturate to 0xFE (2^127), never to NaN, like
// __NV_SATFINITE; note that kUp then returns a scale below |x| for |x| > 2^127.
LOCUS_HOST_DEVICE inline uint8_t f32_to_ue8m0(float x, Ue8m0Rounding rounding) {
  using namespace float_convert_detail;
  const uint32_t abs_bits = f32_bits(x) & kF32AbsMask;
  if (abs_bits > kF32Inf) return 0xFF;
  if (abs_bits == kF32Inf) return 0xFE;
  if (abs_bits == 0) return 0x00;
  // |x| = significand * 2^(exponent - 23) with significand in [2^23, 2^24): normalize f32
  // subnormals so that one rule covers every input.
  int exponent = static_cast<int>(abs_bits >> 23) - 127;  // floor(log2 |x|) for normals
  uint32_t significand = abs_bits & 0x7FFFFFu;
  if ((abs_bits >> 23) == 0) {
    exponent = -126;
    while ((significand & 0x800000u) == 0) {
      significand <<= 1;
      --exponent;
    }
  } else {
    significand |= 0x800000u;
  }
  const bool is_power_of_two = significand == 0x800000u;
  int code = exponent + 127;  // floor(log2 |x|) + bias; may be below 0 for tiny |x|
  switch (rounding) {
    case Ue8m0Rounding::kUp:
      if (!is_power_of_two) ++code;
      break;
    case Ue8m0Rounding::kNearest: {
      // Round up iff significand / 2^23 > sqrt(2), i.e. significand^2 > 2^47 (never equal).
      const uint64_t squared = static_cast<uint64_t>(significand) * significand;
      if (squared > (uint64_t{1} << 47)) ++code;
      break;
    }
    case Ue8m0Rounding::kDown:
      break;
  }
  if (code < 0) code = 0;
  if (code > 0xFE) code = 0xFE;
  return static_cast<uint8_t>(code);
}

}  // namespace locus
