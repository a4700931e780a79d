// Exhaustive checks of core/float_convert.h and core/convert.h against references written
// independently: code values from the textbook formula in double, rounding by comparing distances
// in double (exact for these formats), never by calling the code under test.
#include "core/float_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/tensor.h"

namespace locus {
namespace {

uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float float_of(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// The value of a sign/exponent/mantissa code by the formula
//   sign * 2^(e - bias) * (1 + m / 2^M)   for e > 0,
//   sign * 2^(1 - bias) * (m / 2^M)       for e = 0,
// with no special values: callers handle inf/NaN codes. Exact in double for every format here.
double formula_value(uint32_t code, int exp_bits, int man_bits, int bias) {
  const uint32_t sign = (code >> (exp_bits + man_bits)) & 1u;
  const int e = static_cast<int>((code >> man_bits) & ((1u << exp_bits) - 1u));
  const double m = static_cast<double>(code & ((1u << man_bits) - 1u));
  const double magnitude = e == 0 ? std::ldexp(m, 1 - bias - man_bits)
                                  : std::ldexp(std::ldexp(1.0, man_bits) + m, e - bias - man_bits);
  return sign != 0 ? -magnitude : magnitude;
}

// Index of the nearest of the sorted `values` to x (values[lo] <= x < values[lo + 1]), ties to the
// even index. With codes numbered by magnitude, an even index is an even mantissa.
uint32_t nearest_even_index(const std::vector<double>& values, double x, size_t lo) {
  const double below = x - values[lo];
  const double above = values[lo + 1] - x;
  if (below < above) return static_cast<uint32_t>(lo);
  if (above < below) return static_cast<uint32_t>(lo + 1);
  return static_cast<uint32_t>(lo % 2 == 0 ? lo : lo + 1);
}

// ---- fp8 / fp4: one parametrized suite -------------------------------------------------------

struct SmallFloat {
  const char* name;
  int exp_bits;
  int man_bits;
  int bias;
  uint32_t max_code;  // largest finite magnitude code
  uint8_t nan_code;   // what every NaN encodes to
  bool has_inf;       // the magnitude code after max_code is infinity (e5m2)
  bool has_nan;       // the codes after max_code (after inf) are NaN
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);

  uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  uint32_t num_codes() const { return sign_bit() << 1; }
  double value(uint32_t magnitude_code) const {
    return formula_value(magnitude_code, exp_bits, man_bits, bias);
  }
  double max_value() const { return value(max_code); }
  // The non-negative finite values in code order (increasing).
  std::vector<double> magnitudes() const {
    std::vector<double> values;
    for (uint32_t c = 0; c <= max_code; ++c)
      values.push_back(value(c));
    return values;
  }
};

void PrintTo(const SmallFloat& format, std::ostream* os) {
  *os << format.name;
}

const SmallFloat kE4M3{"e4m3", 4, 3, 7, 0x7E, 0x7F, false, true, f32_to_e4m3, e4m3_to_f32};
const SmallFloat kE5M2{"e5m2", 5, 2, 15, 0x7B, 0x7F, true, true, f32_to_e5m2, e5m2_to_f32};
const SmallFloat kE2M1{"e2m1", 2, 1, 1, 0x7, 0x7, false, false, f32_to_e2m1, e2m1_to_f32};

class SmallFloatTest : public ::testing::TestWithParam<SmallFloat> {};

TEST_P(SmallFloatTest, EveryCodeDecodesToTheFormulaValue) {
  const SmallFloat& f = GetParam();
  for (uint32_t code = 0; code < f.num_codes(); ++code) {
    SCOPED_TRACE(code);
    const uint32_t magnitude = code & (f.sign_bit() - 1u);
    const bool negative = (code & f.sign_bit()) != 0;
    const float decoded = f.decode(static_cast<uint8_t>(code));
    EXPECT_EQ(std::signbit(decoded), negative);
    if (magnitude <= f.max_code) {
      EXPECT_EQ(static_cast<double>(decoded), f.value(code));
    } else if (f.has_inf && magnitude == f.max_code + 1) {
      EXPECT_EQ(decoded, negative ? -kInf : kInf);
    } else {
      ASSERT_TRUE(f.has_nan);
      EXPECT_TRUE(std::isnan(decoded));
      EXPECT_NE(bits_of(decoded) & 0x400000u, 0u) << "decoded NaN must be quiet";
    }
  }
}

// Finite codes round-trip exactly (-0 included). NaN codes canonicalize to nan_code; infinities
// saturate to the largest finite value (satfinite), like CUDA.
TEST_P(SmallFloatTest, DecodeEncodeRoundTripsEveryCode) {
  const SmallFloat& f = GetParam();
  for (uint32_t code = 0; code < f.num_codes(); ++code) {
    SCOPED_TRACE(code);
    const uint32_t magnitude = code & (f.sign_bit() - 1u);
    const uint32_t sign = code & f.sign_bit();
    const uint8_t encoded = f.encode(f.decode(static_cast<uint8_t>(code)));
    if (magnitude <= f.max_code) {
      EXPECT_EQ(encoded, code);
    } else if (f.has_inf && magnitude == f.max_code + 1) {
      EXPECT_EQ(encoded, sign | f.max_code);
    } else {
      EXPECT_EQ(encoded, f.nan_code);
    }
  }
}

// The exact midpoint of every pair of adjacent finite values rounds to the even code, and one f32
// ulp either side rounds to the nearer one; both signs.
TEST_P(SmallFloatTest, EveryMidpointRoundsToEven) {
  const SmallFloat& f = GetParam();
  for (uint32_t lo = 0; lo < f.max_code; ++lo) {
    SCOPED_TRACE(lo);
    const double mid_exact = (f.value(lo) + f.value(lo + 1)) / 2;
    const float mid = static_cast<float>(mid_exact);
    ASSERT_EQ(static_cast<double>(mid), mid_exact) << "midpoint not representable in f32";
    const uint32_t even = lo % 2 == 0 ? lo : lo + 1;
    for (const uint32_t sign : {0u, f.sign_bit()}) {
      const float s = sign != 0 ? -1.0f : 1.0f;
      EXPECT_EQ(f.encode(s * mid), sign | even);
      EXPECT_EQ(f.encode(s * std::nextafter(mid, kInf)), sign | (lo + 1));
      EXPECT_EQ(f.encode(s * std::nextafter(mid, 0.0f)), sign | lo);
      EXPECT_EQ(f.encode(s * static_cast<float>(f.value(lo))), sign | lo);
    }
  }
}

// Under satfinite every finite value past max, and both infinities, give ±max: including
// max + ulp/2, the midpoint to a value the format lacks (464 for e4m3, 61440 for e5m2, 7 for e2m1),
// and values that nearest rounding would carry past it.
TEST_P(SmallFloatTest, SaturatesPastMaxAndAtInfinity) {
  const SmallFloat& f = GetParam();
  const double max = f.max_value();
  const double step = max - f.value(f.max_code - 1);  // the ulp at max
  const float beyond[] = {
      static_cast<float>(max + step / 4),
      static_cast<float>(max + step / 2),  // the midpoint to a value the format lacks
      std::nextafter(static_cast<float>(max + step / 2), kInf),
      static_cast<float>(max + step),
      static_cast<float>(max * 2),
      1e30f,
      std::numeric_limits<float>::max(),
      kInf,
  };
  for (const float x : beyond) {
    SCOPED_TRACE(x);
    EXPECT_EQ(f.encode(x), f.max_code);
    EXPECT_EQ(f.encode(-x), f.sign_bit() | f.max_code);
  }
  EXPECT_EQ(f.encode(static_cast<float>(max)), f.max_code);
  EXPECT_EQ(f.encode(std::nextafter(static_cast<float>(max), 0.0f)), f.max_code);
}

TEST_P(SmallFloatTest, EveryNanEncodesToTheCanonicalCode) {
  const SmallFloat& f = GetParam();
  for (const uint32_t nan_bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu,
                                  0xFFFFFFFFu, 0x7FA00000u, 0x7F80FFFFu}) {
    SCOPED_TRACE(nan_bits);
    EXPECT_EQ(f.encode(float_of(nan_bits)), f.nan_code);
  }
}

TEST_P(SmallFloatTest, UnderflowKeepsTheSignOfZero) {
  const SmallFloat& f = GetParam();
  const float quarter_min_subnormal = static_cast<float>(f.value(1) / 4);
  for (const float x : {0.0f, std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::min(), quarter_min_subnormal}) {
    SCOPED_TRACE(x);
    EXPECT_EQ(f.encode(x), 0u);
    EXPECT_EQ(f.encode(-x), f.sign_bit());
  }
}

// Sweeps the positive f32 bit patterns [first, last]: the expected code steps up by one past each
// midpoint (midpoint_bits[c] lies between codes c and c + 1), a value exactly at a midpoint takes
// the even code, and -x must give the same code with the sign bit.
template <uint8_t (*kEncode)(float)>
uint64_t count_sweep_mismatches(const SmallFloat& f, const std::vector<uint32_t>& midpoint_bits,
                                uint32_t first, uint32_t last) {
  uint32_t lo = 0;  // midpoint_bits[lo - 1] < u <= midpoint_bits[lo]
  uint64_t mismatches = 0;
  for (uint32_t u = first; u <= last; ++u) {
    while (lo < f.max_code && u > midpoint_bits[lo]) {
      ++lo;
    }
    const bool is_tie = lo < f.max_code && u == midpoint_bits[lo];
    const uint32_t expected = is_tie ? (lo % 2 == 0 ? lo : lo + 1) : lo;
    const float x = float_of(u);
    const uint8_t got = kEncode(x);
    const uint8_t got_negative = kEncode(-x);
    if ((got != expected || got_negative != (f.sign_bit() | expected)) && ++mismatches <= 5) {
      ADD_FAILURE() << f.name << ": x = " << x << " (bits " << std::hex << u << ") encodes to "
                    << +got << " / -x to " << +got_negative << ", expected " << expected;
    }
  }
  return mismatches;
}

// Every positive f32 from an eighth of the smallest subnormal to four times the max: hundreds of
// millions of values for fp8, about a second each. Below the range everything is zero
// (UnderflowKeepsTheSignOfZero), above it everything saturates.
TEST_P(SmallFloatTest, EveryF32InRangeMatchesNearestEvenReference) {
  const SmallFloat& f = GetParam();
  std::vector<uint32_t> midpoint_bits;  // midpoint_bits[c]: between codes c and c + 1
  for (uint32_t c = 0; c < f.max_code; ++c) {
    const double mid = (f.value(c) + f.value(c + 1)) / 2;
    ASSERT_EQ(static_cast<double>(static_cast<float>(mid)), mid);
    midpoint_bits.push_back(bits_of(static_cast<float>(mid)));
  }
  const uint32_t first = bits_of(static_cast<float>(f.value(1) / 8));
  const uint32_t last = bits_of(static_cast<float>(f.max_value() * 4));
  // The encoder as a template argument, so it inlines into a loop this long.
  uint64_t mismatches = 0;
  if (f.encode == &f32_to_e4m3) {
    mismatches = count_sweep_mismatches<f32_to_e4m3>(f, midpoint_bits, first, last);
  } else if (f.encode == &f32_to_e5m2) {
    mismatches = count_sweep_mismatches<f32_to_e5m2>(f, midpoint_bits, first, last);
  } else {
    ASSERT_EQ(f.encode, &f32_to_e2m1);
    mismatches = count_sweep_mismatches<f32_to_e2m1>(f, midpoint_bits, first, last);
  }
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, SmallFloatTest, ::testing::Values(kE4M3, kE5M2, kE2M1),
                         [](const ::testing::TestParamInfo<SmallFloat>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST(E4m3, KnownValues) {
  EXPECT_EQ(f32_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(f32_to_e4m3(-2.0f), 0xC0);
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7E);  // midpoint to the absent 480: even 448, and saturation
  EXPECT_EQ(f32_to_e4m3(480.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-500.0f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half of it: tie to even zero
  EXPECT_EQ(f32_to_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormal steps: tie to even 2
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(f32_to_e4m3(kInf), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-kInf), 0xFE);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
}

TEST(E5m2, KnownValues) {
  EXPECT_EQ(f32_to_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(61440.0f), 0x7B);  // midpoint to 65536: RNE would give inf; saturates
  EXPECT_EQ(f32_to_e5m2(kInf), 0x7B);
  EXPECT_EQ(f32_to_e5m2(-kInf), 0xFB);
  EXPECT_EQ(f32_to_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(e5m2_to_f32(0x7C), kInf);
  EXPECT_EQ(e5m2_to_f32(0xFC), -kInf);
  EXPECT_EQ(e5m2_to_f32(0x3C), 1.0f);
}

TEST(E2m1, KnownValuesAndTies) {
  const float expected_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 8; ++code) {
    EXPECT_EQ(e2m1_to_f32(code), expected_values[code]);
    EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(code | 0x8)), -expected_values[code]);
  }
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);  // ties go to the even code
  EXPECT_EQ(f32_to_e2m1(0.75f), 0x2);
  EXPECT_EQ(f32_to_e2m1(1.25f), 0x2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 0x4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 0x4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 0x6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 0x6);
  EXPECT_EQ(f32_to_e2m1(7.0f), 0x7);
  EXPECT_EQ(f32_to_e2m1(-kInf), 0xF);
  EXPECT_EQ(f32_to_e2m1(float_of(0xFFC00000u)), 0x7);  // NaN -> +6 whatever its sign
  EXPECT_EQ(e2m1_to_f32(0xF7), 6.0f);                  // only the low nibble is read
}

TEST(E2m1, PackedElementZeroIsTheLowNibble) {
  EXPECT_EQ(pack_e2m1x2(0x2, 0x7), 0x72);
  EXPECT_EQ(f32x2_to_e2m1x2(1.0f, 6.0f), 0x72);
  EXPECT_EQ(f32x2_to_e2m1x2(-0.5f, 3.0f), 0x59);
  EXPECT_EQ(unpack_e2m1(0x72, 0), 0x2);
  EXPECT_EQ(unpack_e2m1(0x72, 1), 0x7);
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const auto b = static_cast<uint8_t>(byte);
    EXPECT_EQ(pack_e2m1x2(unpack_e2m1(b, 0), unpack_e2m1(b, 1)), b);
  }
}

// ---- bf16 ---------------------------------------------------------------------------------------

// Reference: the two bf16 neighbours of |x| (truncated and one step up, with 0x7F80 valued 2^128
// as IEEE's unbounded-exponent rounding needs), nearest in double, ties to the even code.
uint16_t reference_bf16(uint32_t bits) {
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  if (abs_bits == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7F80u);
  const uint32_t below = abs_bits >> 16;
  const double x = std::fabs(static_cast<double>(float_of(bits)));
  const double to_below = x - formula_value(below, 8, 7, 127);
  const double to_above = formula_value(below + 1, 8, 7, 127) - x;
  uint32_t code = below % 2 == 0 ? below : below + 1;  // a tie
  if (to_below < to_above) code = below;
  if (to_above < to_below) code = below + 1;
  return static_cast<uint16_t>(sign | code);  // code 0x7F80 is the overflow to infinity
}

TEST(Bf16, EveryPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t code = 0; code < 65536; ++code) {
    SCOPED_TRACE(code);
    const float decoded = bf16_bits_to_f32(static_cast<uint16_t>(code));
    ASSERT_EQ(bits_of(decoded), code << 16);
    const bool is_nan = (code & 0x7F80u) == 0x7F80u && (code & 0x7Fu) != 0;
    // A NaN comes back quiet, sign and payload kept.
    EXPECT_EQ(f32_to_bf16_bits(decoded), is_nan ? (code | 0x40u) : code);
  }
}

TEST(Bf16, RandomF32PatternsMatchReference) {
  std::mt19937 rng(20240611);
  uint64_t mismatches = 0;
  for (int i = 0; i < (1 << 22); ++i) {
    const uint32_t bits = rng();
    // Half the draws keep the top bits and force a tie or near-tie in the dropped half.
    const uint32_t input = (i % 2 == 0) ? bits : ((bits & 0xFFFF0000u) | 0x8000u | (bits & 1u));
    const uint16_t got = f32_to_bf16_bits(float_of(input));
    if (got != reference_bf16(input) && ++mismatches <= 5) {
      ADD_FAILURE() << std::hex << "bits " << input << " -> " << got << ", expected "
                    << reference_bf16(input);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(1.00390625f), 0x3F80);  // 1 + 2^-8: tie, to even 1.0
  EXPECT_EQ(f32_to_bf16_bits(std::nextafter(1.00390625f, 2.0f)), 0x3F81);
  EXPECT_EQ(f32_to_bf16_bits(1.01171875f), 0x3F82);  // 1 + 3 * 2^-8: tie, to even 0x3F82
  EXPECT_EQ(f32_to_bf16_bits(-1.00390625f), 0xBF80);
  EXPECT_EQ(f32_to_bf16_bits(float_of(0x7F7F7FFFu)), 0x7F7F);  // just below overflow
  EXPECT_EQ(f32_to_bf16_bits(float_of(0x7F7F8000u)), 0x7F80);  // tie past the max: inf
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(f32_to_bf16_bits(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16_bits(-kInf), 0xFF80);
  EXPECT_EQ(f32_to_bf16_bits(float_of(0x00008000u)), 0x0000);  // f32 subnormal tie, to even
  EXPECT_EQ(f32_to_bf16_bits(float_of(0x00018000u)), 0x0002);
  // A signaling NaN whose payload sits in the dropped half must not become infinity.
  EXPECT_EQ(f32_to_bf16_bits(float_of(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16_bits(float_of(0xFFC00000u)), 0xFFC0);
  EXPECT_EQ(bf16_bits_to_f32(0x3F80), 1.0f);
}

// ---- f16 ----------------------------------------------------------------------------------------

// All finite non-negative f16 values in code order, plus 2^16 standing for the code 0x7C00, the
// value IEEE rounding compares against before overflowing to infinity.
const std::vector<double>& f16_values() {
  static const std::vector<double> values = [] {
    std::vector<double> v;
    for (uint32_t c = 0; c <= 0x7C00u; ++c)
      v.push_back(formula_value(c, 5, 10, 15));
    return v;
  }();
  return values;
}

uint16_t reference_f16(uint32_t bits) {
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u)
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
  const double x = std::fabs(static_cast<double>(float_of(bits)));
  const std::vector<double>& values = f16_values();
  if (x >= values.back()) return static_cast<uint16_t>(sign | 0x7C00u);
  const size_t lo =
      static_cast<size_t>(std::upper_bound(values.begin(), values.end(), x) - values.begin()) - 1;
  return static_cast<uint16_t>(sign | nearest_even_index(values, x, lo));
}

TEST(F16, EveryPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t code = 0; code < 65536; ++code) {
    SCOPED_TRACE(code);
    const float decoded = f16_bits_to_f32(static_cast<uint16_t>(code));
    const bool negative = (code & 0x8000u) != 0;
    const uint32_t magnitude = code & 0x7FFFu;
    EXPECT_EQ(std::signbit(decoded), negative);
    if (magnitude < 0x7C00u) {
      EXPECT_EQ(static_cast<double>(decoded), formula_value(code, 5, 10, 15));
      EXPECT_EQ(f32_to_f16_bits(decoded), code);
    } else if (magnitude == 0x7C00u) {
      EXPECT_EQ(decoded, negative ? -kInf : kInf);
      EXPECT_EQ(f32_to_f16_bits(decoded), code);
    } else {
      EXPECT_TRUE(std::isnan(decoded));
      EXPECT_EQ(f32_to_f16_bits(decoded), code | 0x200u);  // quiet, payload kept
    }
  }
}

TEST(F16, RandomF32MatchesReference) {
  std::mt19937 rng(7);
  uint64_t mismatches = 0;
  for (int i = 0; i < (1 << 21); ++i) {
    uint32_t bits = rng();
    if (i % 2 == 1) {
      // Random patterns mostly miss f16's range; steer the exponent into [2^-27, 2^17).
      const uint32_t exponent = 127 - 27 + rng() % 44;
      bits = (bits & 0x807FFFFFu) | (exponent << 23);
    }
    const uint16_t got = f32_to_f16_bits(float_of(bits));
    if (got != reference_f16(bits) && ++mismatches <= 5) {
      ADD_FAILURE() << std::hex << "bits " << bits << " -> " << got << ", expected "
                    << reference_f16(bits);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(F16, SubnormalAndOverflowRounding) {
  const float step = std::ldexp(1.0f, -24);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(step), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(step / 2), 0x0000);  // tie, to even zero
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(step / 2, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(-step / 2), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(step * 1.5f), 0x0002);     // tie between 1 and 2
  EXPECT_EQ(f32_to_f16_bits(step * 2.5f), 0x0002);     // tie between 2 and 3
  EXPECT_EQ(f32_to_f16_bits(step * 1023.5f), 0x0400);  // tie, largest subnormal -> min normal
  EXPECT_EQ(f32_to_f16_bits(step * 1022.5f), 0x03FE);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65519.996f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);  // tie past the max: inf
  EXPECT_EQ(f32_to_f16_bits(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16_bits(kInf), 0x7C00);
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(float_of(0x7F800001u)), 0x7E00);  // signaling NaN stays NaN
}

// ---- ue8m0 --------------------------------------------------------------------------------------

constexpr Ue8m0Rounding kAllUe8m0Roundings[] = {Ue8m0Rounding::kUp, Ue8m0Rounding::kNearest,
                                                Ue8m0Rounding::kDown};

// Reference through frexp: |x| = fraction * 2^p with fraction in [0.5, 1), so floor(log2) = p - 1
// and |x| / 2^floor = 2 * fraction; the log2-nearest boundary is (2 * fraction)^2 vs 2, exact in
// double for a 24-bit fraction.
uint8_t reference_ue8m0(float x, Ue8m0Rounding rounding) {
  if (std::isnan(x)) return 0xFF;
  if (std::isinf(x)) return 0xFE;
  if (x == 0.0f) return 0x00;
  int p = 0;
  const double fraction = std::frexp(std::fabs(static_cast<double>(x)), &p);
  int floor_log2 = p - 1;
  int result = floor_log2;
  if (rounding == Ue8m0Rounding::kUp && fraction != 0.5) result = floor_log2 + 1;
  if (rounding == Ue8m0Rounding::kNearest && (2 * fraction) * (2 * fraction) > 2.0) {
    result = floor_log2 + 1;
  }
  return static_cast<uint8_t>(std::clamp(result + 127, 0, 254));
}

TEST(Ue8m0, EveryCodeDecodesToAPowerOfTwoAndRoundTrips) {
  for (uint32_t code = 0; code < 256; ++code) {
    SCOPED_TRACE(code);
    const float decoded = ue8m0_to_f32(static_cast<uint8_t>(code));
    if (code == 0xFF) {
      EXPECT_TRUE(std::isnan(decoded));
    } else {
      EXPECT_EQ(static_cast<double>(decoded), std::ldexp(1.0, static_cast<int>(code) - 127));
    }
    for (const Ue8m0Rounding rounding : kAllUe8m0Roundings) {
      EXPECT_EQ(f32_to_ue8m0(decoded, rounding), code);
    }
  }
}

TEST(Ue8m0, PowerOfTwoBoundaries) {
  for (int code = 1; code <= 254; ++code) {
    SCOPED_TRACE(code);
    const float power = ue8m0_to_f32(static_cast<uint8_t>(code));
    const float above = std::nextafter(power, kInf);
    const float below = std::nextafter(power, 0.0f);
    EXPECT_EQ(f32_to_ue8m0(above, Ue8m0Rounding::kUp), std::min(code + 1, 254));
    EXPECT_EQ(f32_to_ue8m0(below, Ue8m0Rounding::kUp), code);
    EXPECT_EQ(f32_to_ue8m0(above, Ue8m0Rounding::kDown), code);
    EXPECT_EQ(f32_to_ue8m0(below, Ue8m0Rounding::kDown), code - 1);
    EXPECT_EQ(f32_to_ue8m0(above, Ue8m0Rounding::kNearest), code);
    EXPECT_EQ(f32_to_ue8m0(below, Ue8m0Rounding::kNearest), code);
  }
}

// kNearest switches between the f32 neighbours of 2^k * sqrt(2), in every binade.
TEST(Ue8m0, NearestSwitchesAtSqrtTwo) {
  float below_sqrt2 = std::sqrt(2.0f);
  while (static_cast<double>(below_sqrt2) * below_sqrt2 > 2.0) {
    below_sqrt2 = std::nextafter(below_sqrt2, 0.0f);
  }
  const float above_sqrt2 = std::nextafter(below_sqrt2, kInf);
  ASSERT_GT(static_cast<double>(above_sqrt2) * above_sqrt2, 2.0);
  for (int code = 1; code <= 254; ++code) {
    SCOPED_TRACE(code);
    const float power = ue8m0_to_f32(static_cast<uint8_t>(code));
    EXPECT_EQ(f32_to_ue8m0(below_sqrt2 * power, Ue8m0Rounding::kNearest), code);
    EXPECT_EQ(f32_to_ue8m0(above_sqrt2 * power, Ue8m0Rounding::kNearest), std::min(code + 1, 254));
  }
  EXPECT_EQ(f32_to_ue8m0(1.4f * ue8m0_to_f32(0), Ue8m0Rounding::kNearest), 0);  // f32 subnormal
  EXPECT_EQ(f32_to_ue8m0(1.5f * ue8m0_to_f32(0), Ue8m0Rounding::kNearest), 1);
}

TEST(Ue8m0, SpecialInputs) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float fmax = std::numeric_limits<float>::max();
  for (const Ue8m0Rounding rounding : kAllUe8m0Roundings) {
    EXPECT_EQ(f32_to_ue8m0(float_of(0x7FC00000u), rounding), 0xFF);
    EXPECT_EQ(f32_to_ue8m0(float_of(0xFF800001u), rounding), 0xFF);
    EXPECT_EQ(f32_to_ue8m0(kInf, rounding), 0xFE);
    EXPECT_EQ(f32_to_ue8m0(-kInf, rounding), 0xFE);
    EXPECT_EQ(f32_to_ue8m0(fmax, rounding), 0xFE);
    EXPECT_EQ(f32_to_ue8m0(0.0f, rounding), 0x00);
    EXPECT_EQ(f32_to_ue8m0(-0.0f, rounding), 0x00);
    EXPECT_EQ(f32_to_ue8m0(tiny, rounding), 0x00);
    EXPECT_EQ(f32_to_ue8m0(-4.0f, rounding), 127 + 2);  // the sign is ignored
    EXPECT_EQ(f32_to_ue8m0(-3.0f, rounding), f32_to_ue8m0(3.0f, rounding));
  }
  EXPECT_EQ(f32_to_ue8m0(3.0f, Ue8m0Rounding::kUp), 127 + 2);
  EXPECT_EQ(f32_to_ue8m0(3.0f, Ue8m0Rounding::kNearest), 127 + 2);  // 3 > 2 * sqrt(2)
  EXPECT_EQ(f32_to_ue8m0(2.8f, Ue8m0Rounding::kNearest), 127 + 1);
  EXPECT_EQ(f32_to_ue8m0(3.0f, Ue8m0Rounding::kDown), 127 + 1);
  EXPECT_EQ(f32_to_ue8m0(std::nextafter(ue8m0_to_f32(0), kInf), Ue8m0Rounding::kUp), 1);
}

TEST(Ue8m0, RandomF32MatchesReference) {
  std::mt19937 rng(99);
  uint64_t mismatches = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    const float x = float_of(rng());
    for (const Ue8m0Rounding rounding : kAllUe8m0Roundings) {
      const uint8_t got = f32_to_ue8m0(x, rounding);
      if (got != reference_ue8m0(x, rounding) && ++mismatches <= 5) {
        ADD_FAILURE() << "x = " << x << " rounding " << static_cast<int>(rounding) << " -> " << +got
                      << ", expected " << +reference_ue8m0(x, rounding);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

// The scale rule kUp exists for: amax / scale never exceeds the fp8 max.
TEST(Ue8m0, UpScalesKeepAmaxWithinE4m3) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  for (int i = 0; i < 100000; ++i) {
    const float amax = std::exp2(exponent(rng));
    const float scale = ue8m0_to_f32(f32_to_ue8m0(amax / 448.0f, Ue8m0Rounding::kUp));
    ASSERT_LE(amax / scale, 448.0f * (1 + 1e-6f)) << amax;
    ASSERT_GT(amax / scale, 448.0f / 2 * (1 - 1e-6f)) << amax;
  }
}

// ---- convert.h ----------------------------------------------------------------------------------

const DType kConvertibleDtypes[] = {DType::kF32,    DType::kF16,    DType::kBF16,  DType::kF8E4M3,
                                    DType::kF8E5M2, DType::kF4E2M1, DType::kUE8M0, DType::kF64};

// What one element becomes after f32 -> dtype -> f32, by the scalar routines.
float scalar_round_trip(float x, DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return f16_bits_to_f32(f32_to_f16_bits(x));
    case DType::kBF16:
      return bf16_bits_to_f32(f32_to_bf16_bits(x));
    case DType::kF8E4M3:
      return e4m3_to_f32(f32_to_e4m3(x));
    case DType::kF8E5M2:
      return e5m2_to_f32(f32_to_e5m2(x));
    case DType::kF4E2M1:
      return e2m1_to_f32(f32_to_e2m1(x));
    case DType::kUE8M0:
      return ue8m0_to_f32(f32_to_ue8m0(x, Ue8m0Rounding::kUp));
    default:
      return x;
  }
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  std::vector<float> values;
  for (size_t i = 0; i < n; ++i) {
    const float sign = rng() % 2 == 0 ? 1.0f : -1.0f;
    values.push_back(sign * std::exp2(exponent(rng)));
  }
  values[0] = 0.0f;
  values[1] = -0.0f;
  values[2] = kInf;
  values[3] = std::numeric_limits<float>::quiet_NaN();
  return values;
}

bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}

TEST(Convert, RoundTripThroughEveryDtype) {
  for (const DType dtype : kConvertibleDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::vector<float> input = random_values(301, 11);  // odd: exercises the fp4 tail
    std::vector<uint8_t> encoded(dtype_bytes(dtype, input.size()));
    std::vector<float> decoded(input.size());
    ASSERT_TRUE(convert_from_f32(input.data(), dtype, encoded.data(), input.size()).is_ok());
    ASSERT_TRUE(convert_to_f32(dtype, encoded.data(), decoded.data(), input.size()).is_ok());
    for (size_t i = 0; i < input.size(); ++i) {
      ASSERT_TRUE(same_value(decoded[i], scalar_round_trip(input[i], dtype)))
          << i << ": " << input[i] << " -> " << decoded[i];
    }
    // Values already representable come back unchanged, bit for bit.
    std::vector<float> again(input.size());
    std::vector<uint8_t> encoded_again(encoded.size());
    ASSERT_TRUE(
        convert_from_f32(decoded.data(), dtype, encoded_again.data(), input.size()).is_ok());
    ASSERT_TRUE(convert_to_f32(dtype, encoded_again.data(), again.data(), input.size()).is_ok());
    for (size_t i = 0; i < input.size(); ++i)
      ASSERT_TRUE(same_value(again[i], decoded[i])) << i;
  }
}

TEST(Convert, PackedFp4LayoutAndOddTail) {
  const float values[] = {1.0f, 6.0f, -0.5f, 0.0f, 2.0f};
  uint8_t packed[3] = {0xAA, 0xAA, 0xAA};
  ASSERT_TRUE(convert_from_f32(values, DType::kF4E2M1, packed, 5).is_ok());
  EXPECT_EQ(packed[0], 0x72);  // element 0 (1.0 = 0x2) low, element 1 (6.0 = 0x7) high
  EXPECT_EQ(packed[1], 0x09);
  EXPECT_EQ(packed[2], 0x04);  // odd tail: high nibble written as zero
  const uint8_t tail_with_garbage[3] = {0x72, 0x09, 0xF4};
  float decoded[5];
  ASSERT_TRUE(convert_to_f32(DType::kF4E2M1, tail_with_garbage, decoded, 5).is_ok());
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(decoded[i], values[i]) << i;
}

TEST(Convert, UnsupportedDtypeNamesIt) {
  const float values[2] = {1.0f, 2.0f};
  int32_t ints[2] = {};
  float decoded[2] = {};
  Status to = convert_to_f32(DType::kI32, ints, decoded, 2);
  EXPECT_EQ(to.code(), ErrorCode::kUnsupported);
  EXPECT_NE(to.message().find("i32"), std::string::npos) << to.message();
  Status from = convert_from_f32(values, DType::kBool, ints, 2);
  EXPECT_EQ(from.code(), ErrorCode::kUnsupported);
  EXPECT_NE(from.message().find("bool"), std::string::npos) << from.message();
  EXPECT_EQ(convert_from_f32(nullptr, DType::kBF16, ints, 2).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(convert_from_f32(nullptr, DType::kBF16, nullptr, 0).is_ok());
}

Tensor make_tensor(const Dims& shape, DType dtype) {
  auto t = Tensor::empty(shape, dtype);
  if (!t) ADD_FAILURE() << t.status().to_string();
  return std::move(t).value();
}

TEST(ConvertTensor, F32ToEveryDtypeMatchesTheScalarRoutines) {
  const std::vector<float> input = random_values(4 * 6, 3);
  Tensor src = make_tensor({4, 6}, DType::kF32);
  std::memcpy(src.raw_data(), input.data(), input.size() * sizeof(float));
  for (const DType dtype : kConvertibleDtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor narrow = make_tensor({4, 6}, dtype);
    Tensor back = make_tensor({4, 6}, DType::kF32);
    ASSERT_TRUE(convert_tensor(src, narrow).is_ok());
    ASSERT_TRUE(convert_tensor(narrow, back).is_ok());
    for (size_t i = 0; i < input.size(); ++i) {
      EXPECT_TRUE(same_value(back.data<float>()[i], scalar_round_trip(input[i], dtype))) << i;
    }
  }
}

TEST(ConvertTensor, ShapeMismatchNamesBothShapes) {
  Tensor src = make_tensor({4, 6}, DType::kF32);
  Tensor dst = make_tensor({6, 4}, DType::kBF16);
  Status status = convert_tensor(src, dst);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("[4, 6]"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("[6, 4]"), std::string::npos) << status.message();
}

TEST(ConvertTensor, RejectsUnsupportedDtypeAndNonContiguous) {
  Tensor src = make_tensor({4, 6}, DType::kF32);
  Tensor ints = make_tensor({4, 6}, DType::kI32);
  Status status = convert_tensor(src, ints);
  EXPECT_EQ(status.code(), ErrorCode::kUnsupported);
  EXPECT_NE(status.message().find("i32"), std::string::npos) << status.message();

  auto transposed = src.transpose(0, 1);
  ASSERT_TRUE(transposed.has_value());
  Tensor dst = make_tensor({6, 4}, DType::kBF16);
  status = convert_tensor(*transposed, dst);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("contiguous"), std::string::npos) << status.message();
}

// f64 -> narrow must round once: a value a hair above a bf16/e4m3 midpoint rounds up, although
// rounding it to f32 first would land exactly on the midpoint and then tie to even (down).
TEST(ConvertTensor, F64RoundsOnceIntoNarrowFormats) {
  const double hair = std::ldexp(1.0, -40);
  const double values[] = {1.0 + std::ldexp(1.0, -8) + hair,  // bf16: above 1 + 2^-8 -> 0x3F81
                           1.0 + std::ldexp(1.0, -8) - hair,  // bf16: below -> 0x3F80
                           -(1.0625 + hair),                  // e4m3: above 1.0625 -> 1.125
                           1e300,
                           -1e-300,
                           std::numeric_limits<double>::quiet_NaN()};
  Tensor src = make_tensor({6}, DType::kF64);
  std::memcpy(src.raw_data(), values, sizeof(values));

  Tensor bf16 = make_tensor({6}, DType::kBF16);
  ASSERT_TRUE(convert_tensor(src, bf16).is_ok());
  const uint16_t* b = bf16.data<uint16_t>();
  EXPECT_EQ(b[0], 0x3F81);
  EXPECT_EQ(b[1], 0x3F80);
  EXPECT_EQ(b[3], 0x7F80);  // overflow to inf, as nearest rounding of 1e300 would
  EXPECT_EQ(b[4], 0x8000);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(b[5])));

  Tensor e4m3 = make_tensor({6}, DType::kF8E4M3);
  ASSERT_TRUE(convert_tensor(src, e4m3).is_ok());
  const uint8_t* e = e4m3.data<uint8_t>();
  EXPECT_EQ(e[2], f32_to_e4m3(-1.125f));
  EXPECT_EQ(e[3], 0x7E);
  EXPECT_EQ(e[4], 0x80);
  EXPECT_EQ(e[5], 0x7F);

  Tensor f32 = make_tensor({6}, DType::kF32);
  ASSERT_TRUE(convert_tensor(src, f32).is_ok());
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(f32.data<float>()[i], static_cast<float>(values[i])) << i;

  Tensor copy = make_tensor({6}, DType::kF64);
  ASSERT_TRUE(convert_tensor(src, copy).is_ok());
  EXPECT_EQ(std::memcmp(copy.raw_data(), values, sizeof(values)), 0);
}

TEST(ConvertTensor, PackedFp4Tensor) {
  const float values[] = {1.0f, 6.0f, -0.5f, 0.0f, 2.0f, -6.0f, 0.5f, 3.0f};
  Tensor src = make_tensor({2, 4}, DType::kF32);
  std::memcpy(src.raw_data(), values, sizeof(values));
  Tensor fp4 = make_tensor({2, 4}, DType::kF4E2M1);
  ASSERT_TRUE(convert_tensor(src, fp4).is_ok());
  ASSERT_EQ(fp4.nbytes(), 4u);
  const uint8_t* packed = fp4.data<uint8_t>();
  EXPECT_EQ(packed[0], 0x72);
  EXPECT_EQ(packed[1], 0x09);
  EXPECT_EQ(packed[2], 0xF4);
  EXPECT_EQ(packed[3], 0x51);
  Tensor back = make_tensor({2, 4}, DType::kBF16);
  ASSERT_TRUE(convert_tensor(fp4, back).is_ok());
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(bf16_bits_to_f32(back.data<uint16_t>()[i]), values[i]);
}

}  // namespace
}  // namespace locus
