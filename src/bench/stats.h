// Summary statistics of timing samples. Pure host code, header-only, so the unit tests use it
// without a GPU.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace b12x::bench {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Times of one case in microseconds. NaN statistics and no samples: the case was not timed.
struct TimeStats {
  double median_us = kNaN, min_us = kNaN, p10_us = kNaN, p90_us = kNaN;
  std::vector<double> samples_us;  // in measurement order
  std::string timing;              // how the L2 was made cold: "write", "clean" or "rotate xN" (N copies)
  bool valid() const { return !samples_us.empty(); }
};

// Percentile q in [0, 100] of an unsorted sample, interpolating linearly between the two closest
// ranks (numpy's default, so the numbers can be re-derived from the JSON samples). NaN if empty.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

inline double median(const std::vector<double>& v) { return percentile(v, 50.0); }

// Copies of an operand set of `bytes` that a case timed with rotated operands (L2Flush::rotate)
// binds: the fewest with the other copies holding at least 2x `l2_bytes`, so two uses of one copy are
// separated by 2x L2 of other traffic; at most kMaxRotationCopies. 1 (no rotation: the timer falls
// back to the clean flush) when even that many cannot evict the L2, or for an empty operand set.
constexpr int kMaxRotationCopies = 64;
constexpr int rotation_copies(size_t bytes, size_t l2_bytes) {
  if (bytes == 0) return 1;
  const size_t others = (2 * l2_bytes + bytes - 1) / bytes;
  return others + 1 <= static_cast<size_t>(kMaxRotationCopies) ? static_cast<int>(others + 1) : 1;
}

inline TimeStats summarize(std::vector<double> samples_us) {
  TimeStats s;
  if (samples_us.empty()) return s;
  s.median_us = percentile(samples_us, 50.0);
  s.p10_us = percentile(samples_us, 10.0);
  s.p90_us = percentile(samples_us, 90.0);
  s.min_us = *std::min_element(samples_us.begin(), samples_us.end());
  s.samples_us = std::move(samples_us);
  return s;
}

// ||got - ref||_2 / ||ref||_2 over paired values (the METHOD's error measure: FP32 arithmetic lands
// far under 1e-3, BF16 operands between 1e-3 and 1e-2). Inf when any value is NaN or Inf, so NaN
// never passes; the absolute norm when ref is all zeros.
inline double relative_l2_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace b12x::bench
