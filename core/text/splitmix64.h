// SplitMix64 (Steele, Lea & Flood 2014; the seeding generator of xoshiro): a tiny generator
// written out here so that seeded results (corpus splits) are the same with every standard
// library, which std::uniform_int_distribution does not promise.
#pragma once

#include <cstdint>

namespace mumoe::text {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, bound) for bound > 0, without modulo bias (rejects the short last block).
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // = 2^64 mod bound
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace mumoe::text
