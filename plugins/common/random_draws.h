// The counter-based random streams of Fleet's random kernels (uniform_random, gaussian_random,
// truncated_gaussian_random, dropout), written once for both the CPU and the CUDA plugin.
//
// Contract: every function is a pure function of its arguments (no generator state), so
// element i of a random tensor depends only on the seed and i, whatever the thread layout, and
// the two plugins produce the same bits: a model initialised on one device starts from the
// other's weights, and a dropout mask is reproduced exactly after a checkpoint resume.
//
// Floating-point rounding: the CPU plugin is built without FMA contraction, so on the host each
// multiply and add below rounds on its own. nvcc would fuse a multiply feeding an add into one
// FMA (one rounding instead of two), which differs in the last bit; so on the device the
// arithmetic of the uniform/Gaussian paths goes through the round-to-nearest intrinsics
// (__dmul_rn, __dadd_rn, __dsub_rn), which nvcc never contracts. sqrt is correctly rounded on
// both sides; log, sin and cos come from glibc on the host and CUDA's libdevice on the device
// and agree to an ulp or two, which a float32 result almost never shows.
//
// Header-only, C++17, usable from g++ and nvcc (see host_device.h); tests/conformance/ref/
// ref_tensor.py implements the same streams independently in NumPy.
#pragma once

#include <cmath>
#include <cstdint>

#include "host_device.h"

namespace fleet::kernel {

// SplitMix64's increment (the golden ratio in 64-bit fixed point).
inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;
inline constexpr double kTwoPi = 6.283185307179586476925286766559;

// ---- rounding that does not depend on the compiler ------------------------------------------
// Host: plain operators (the CPU build does not contract them). Device: the _rn intrinsics, so
// the result is the same separately rounded value the host computes.

FLEET_HOST_DEVICE inline double MulRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

FLEET_HOST_DEVICE inline double AddRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

FLEET_HOST_DEVICE inline double SubRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// ---- SplitMix64 -------------------------------------------------------------------------------
// Unsigned arithmetic wraps modulo 2^64 identically in both compilers, so these are exact.

// SplitMix64's output function (the finaliser) applied to a state z.
FLEET_HOST_DEVICE inline uint64_t SplitMixFinalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Output i (counting from 0) of the SplitMix64 stream that starts at state `seed`: its state
// after i + 1 increments, finalised. Also the key of element i's own stream in the truncated
// Gaussian.
FLEET_HOST_DEVICE inline uint64_t SplitMixAt(uint64_t seed, uint64_t i) {
  return SplitMixFinalize(seed + (i + 1) * kSplitMixGamma);
}

// u(i) in [0, 1): the top 53 bits of output i scaled by 2^-53. Both steps are exact, but the
// device still uses the intrinsic so that nothing after it can be fused into the multiply.
FLEET_HOST_DEVICE inline double UnitAt(uint64_t seed, uint64_t i) {
  return MulRn(static_cast<double>(SplitMixAt(seed, i) >> 11), 0x1.0p-53);
}

// ---- uniform_random ---------------------------------------------------------------------------

// lo + range * u in double; the caller rounds to its dtype and moves a value that rounded up
// to max just below it.
FLEET_HOST_DEVICE inline double UniformAt(uint64_t seed, uint64_t i, double lo, double range) {
  return AddRn(lo, MulRn(range, UnitAt(seed, i)));
}

// ---- gaussian_random --------------------------------------------------------------------------

// Box-Muller on the pair (u(2k), u(2k+1)): elements 2k and 2k+1 are
// mean + scale * cos(theta) and mean + scale * sin(theta), with scale = std * r. Kept as a pair
// so a caller with an odd element count need not evaluate the last sin.
struct GaussianPair {
  double scale;  // std * sqrt(-2 ln(1 - u(2k)))
  double theta;  // 2 pi u(2k+1)
};

FLEET_HOST_DEVICE inline GaussianPair GaussianPairAt(uint64_t seed, uint64_t k, double stddev) {
  const double u1 = SubRn(1.0, UnitAt(seed, 2 * k));
  const double u2 = UnitAt(seed, 2 * k + 1);
  const double r = sqrt(MulRn(-2.0, log(u1)));
  // std * r first: the CPU's original `stddev * r * cos(...)` associates from the left.
  return GaussianPair{MulRn(stddev, r), MulRn(kTwoPi, u2)};
}

FLEET_HOST_DEVICE inline double GaussianFirst(const GaussianPair& g, double mean) {
  return AddRn(mean, MulRn(g.scale, cos(g.theta)));
}

FLEET_HOST_DEVICE inline double GaussianSecond(const GaussianPair& g, double mean) {
  return AddRn(mean, MulRn(g.scale, sin(g.theta)));
}

// ---- truncated_gaussian_random ----------------------------------------------------------------

// Element i draws from its own stream, key(i) = SplitMix64 output i for the seed, and takes the
// cos value of Box-Muller on (u_key(2a), u_key(2a + 1)) for attempts a = 0, 1, ... until it
// lies within 2 std (about 95% of first attempts do); returns mean + std * z in double.
FLEET_HOST_DEVICE inline double TruncatedGaussianAt(uint64_t seed, uint64_t i, double mean,
                                                    double stddev) {
  const uint64_t key = SplitMixAt(seed, i);
  double z = 0.0;
  for (uint64_t a = 0;; ++a) {
    const double u1 = SubRn(1.0, UnitAt(key, 2 * a));
    const double u2 = UnitAt(key, 2 * a + 1);
    z = MulRn(sqrt(MulRn(-2.0, log(u1))), cos(MulRn(kTwoPi, u2)));
    if (fabs(z) <= 2.0) break;
  }
  return AddRn(mean, MulRn(stddev, z));
}

// ---- dropout ----------------------------------------------------------------------------------
// Dropout's stream is keyed rather than offset: element i's draw hashes (key, i), so the key
// alone (derived once per launch, on the host or from a device Seed tensor) fixes the mask.

// One full SplitMix64 step from state z: increment, then finalise.
FLEET_HOST_DEVICE inline uint64_t DropoutMix(uint64_t z) {
  return SplitMixFinalize(z + kSplitMixGamma);
}

// The key for an explicit seed (the Seed input or the fixed `seed` attribute).
FLEET_HOST_DEVICE inline uint64_t DropoutKeyOfSeed(uint64_t seed) { return DropoutMix(seed); }

// The key for the op's host seed at launch `step`, so every step draws a fresh mask and a
// resumed run (which restores the launch count) redraws the same one.
FLEET_HOST_DEVICE inline uint64_t DropoutKeyOfStep(uint64_t op_seed, uint64_t step) {
  return DropoutMix(op_seed ^ DropoutMix(step + 0x5eedULL));
}

// Element i's draw in [0, 1). 53 random bits times 2^-53 is exact and nothing is added to it,
// so plain operators give the same double on both sides.
FLEET_HOST_DEVICE inline double DropoutUniform(uint64_t key, int64_t i) {
  return static_cast<double>(DropoutMix(key ^ DropoutMix(static_cast<uint64_t>(i))) >> 11) *
         0x1.0p-53;
}

}  // namespace fleet::kernel
