// The one dtype enum. Scale encodings (ue8m0, E4M3 block scales) are dtypes too, so a tensor view
// says exactly how its bytes are to be read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace b12x {

enum class DType : uint8_t {
  bf16,
  f16,
  f32,
  f64,
  f8_e4m3,  // float8_e4m3fn; also the NVFP4 block-scale encoding
  f8_e5m2,
  ue8m0,    // float8_e8m0fnu: unsigned power-of-two scale (MX)
  u8,       // raw bytes: packed FP4 pairs, GGML blocks
  i8,
  i32,
  i64,
};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses the names dtype_name() prints; throws BadArgument naming `arg` otherwise.
DType parse_dtype(std::string_view name, const std::string& arg = "dtype");
bool is_float_activation(DType t);  // bf16, f16, f32

}  // namespace b12x
