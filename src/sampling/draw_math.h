// The integer arithmetic of a draw (sampler.h, steps 3 and 4), shared by the host Sampler and
// the CUDA sampler so both pick by one rule. constexpr, so device code may call it too (the
// CUDA build passes --expt-relaxed-constexpr).
#pragma once

#include <cstdint>

namespace lockstep::draw {

// Exact sums of up to 2^31 weights of at most 2^52, and their products with a 24-bit mantissa.
using WideSum = unsigned __int128;

constexpr uint64_t kTopWeight = uint64_t(1) << 52;  // the weight of the top token
// Below this exponent exp() is under 2^-53, so the weight is 0; skips exp() for the long tail.
constexpr double kZeroWeightExponent = -37.0;

// floor(r * total / 2^53) exactly, for r < 2^53 and total < 2^83.
constexpr WideSum scale_by_draw(uint64_t r, WideSum total) {
  const WideSum high = total >> 53;
  const WideSum low = total & ((WideSum(1) << 53) - 1);
  return high * r + ((low * r) >> 53);
}

// ceil(fraction * total) exactly, for total < 2^83 and a float fraction in (0, 1] given by its
// bits (normal or subnormal).
constexpr WideSum mass_threshold(uint32_t fraction_bits, WideSum total) {
  const uint32_t biased_exponent = fraction_bits >> 23 & 0xffu;
  const uint32_t field = fraction_bits & 0x7fffffu;
  // fraction = mantissa / 2^shift; shift >= 23 since fraction <= 1.
  const WideSum mantissa = biased_exponent != 0 ? (field | 0x800000u) : field;
  const int shift = biased_exponent != 0 ? 150 - int(biased_exponent) : 149;
  const WideSum product = mantissa * total;
  if (shift >= 128) return product != 0 ? 1 : 0;  // product < 2^107: the quotient is 0
  const WideSum quotient = product >> shift;
  return quotient + ((quotient << shift) != product ? 1 : 0);
}

}  // namespace lockstep::draw
