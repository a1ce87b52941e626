// GEMM-like problem shapes for `b12x bench --shapes MxNxK,...`. Header-only (unit-tested without a GPU).
// Suites take what they need: linear uses all three, weight-only ops (dequantize) use N and K.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "b12x/core/error.h"

namespace b12x::bench {

struct Shape {
  int64_t m = 0, n = 0, k = 0;
  std::string str() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
  bool operator==(const Shape&) const = default;
};

namespace shape_detail {
inline std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A positive decimal integer below 2^31 (cuBLAS and grid dimensions are int).
inline bool parse_extent(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v <= 0 || v > INT32_MAX) return false;
  out = v;
  return true;
}
}  // namespace shape_detail

// Parses "MxNxK[,MxNxK...]" ('x' or 'X'); throws BadArgument naming `arg` with the offending entry.
inline std::vector<Shape> parse_shapes(const std::string& text, const std::string& arg = "--shapes") {
  std::vector<Shape> shapes;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string entry =
        shape_detail::trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    std::vector<std::string> parts;
    size_t p = 0;
    while (true) {
      const size_t x = entry.find_first_of("xX", p);
      parts.push_back(entry.substr(p, x == std::string::npos ? std::string::npos : x - p));
      if (x == std::string::npos) break;
      p = x + 1;
    }
    Shape s;
    const bool ok = parts.size() == 3 && shape_detail::parse_extent(parts[0], s.m) &&
                    shape_detail::parse_extent(parts[1], s.n) && shape_detail::parse_extent(parts[2], s.k);
    B12X_CHECK_ARG(ok, arg, "each shape must be MxNxK with positive integers below 2^31 (e.g. 16x28672x8192), got '",
                   entry, "' in '", text, "'");
    shapes.push_back(s);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return shapes;
}

}  // namespace b12x::bench
