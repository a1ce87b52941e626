// quantize.activations: x [M, K] (bf16 / f16 / f32) -> the quantized operands of the linear GEMMs,
// bit for bit quantize_activations() on the host (include/b12x/linear/reference.h), per mode:
//   fp8_tensor  q = e4m3_sat(x / s)                      s = input_scale[0]
//   fp8_token   q = e4m3_sat(x / s_r), s_r = amax_row / 448 (1 for a zero row)   -> f32 [M, 1]
//   fp8_block   the same per 1x128 group                                           -> f32 [M, K/128]
//   mxfp8       s = UE8M0 ceil(amax_32 / 448), q = e4m3_sat(x * 2^-(s-127))        -> u8 [M, K/32]
//   nvfp4       g = 1 / input_scale[0], sb = e4m3_sat(amax_16 * g / 6),
//               q = e2m1((x * g) / sb) (0 for sb = 0), two per byte, even element low -> u8 [M, K/16]
// The MX / NVFP4 scale bytes are written row-major or in the 128x4 swizzled layout (swizzle.h),
// padding included (127 for UE8M0, 0 for E4M3), so the whole buffer equals swizzle_scales().
//
// Work unit: a vector = 8 consecutive elements of a row (one 16-byte load of 16-bit x). Group modes
// (quantize_groups_kernel): CTA c owns vectors [c * 1024, c * 1024 + 1024), thread t slot s the
// vector c * 1024 + s * 256 + t; all four loads are issued before any is used. A group (32 / 128
// elements = 4 / 16 vectors) is held by consecutive aligned lanes (K % group == 0), so its amax is
// a shuffle reduction and its first lane writes the scale. nvfp4 (quantize_nvfp4_kernel): the same
// 1024 vectors per CTA, but a thread takes a whole group (2 vectors) per slot. fp8_token
// (quantize_rows_kernel): one CTA per row, the row in registers (kSlots vectors per thread; kSlots =
// 0: K too long, the row is read twice), amax by a block reduction.
//
// amax is the integer maximum of |x|'s bits (for 16-bit x on packed pairs): every NaN pattern is
// above Inf, so a block with a NaN gets the NaN amax the host's block_amax returns (0x7FC00000).
//
// Speed: an element may cost only a handful of instructions, or the kernel stops being memory-bound
// (docs/perf/NOTES.md, docs/QUANTIZE.md). So divisions by a scale fixed per tensor / group / row are
// div_by_rcp (three FMA-class instructions, exact in its range; div_rn otherwise, on a branch taken
// per group), scales come from bit rules or a table instead of divisions, E2M1 codes from one FP32
// add (e2m1_code_biased), code signs straight from x's bits (prmt), and flat vector indices are
// split into (row, column) only for swizzled scales, by a multiply-high (fast_div.cuh).
#pragma once
#include "device/common.cuh"
#include "device/encode.cuh"
#include "device/fast_div.cuh"

namespace b12x {

constexpr int kQuantThreads = 256;  // quantize_groups_kernel, quantize_nvfp4_kernel
constexpr int kQuantSlots = 4;      // vectors per thread (nvfp4: 2 slots of 2)
constexpr int kQuantVecsPerCta = kQuantThreads * kQuantSlots;
// CTAs per SM the register budget allows: 4 (64 registers); FP32 x holds twice the words: 3 (80).
template <int kIn>
constexpr int kQuantMinCtas = kIn == 2 ? 3 : 4;
constexpr int kQuantRowsMaxThreads = 1024;  // quantize_rows_kernel (block size chosen by the plan)

namespace quant {

// Template codes (the host passes the same numbers: ActMode's values, and the x dtype).
enum Act : int { kFp8Tensor = 1, kFp8Token = 2, kFp8Block = 3, kMxfp8 = 4, kNvfp4 = 5 };
enum In : int { kInBf16 = 0, kInF16 = 1, kInF32 = 2 };

template <int kAct>
constexpr int kGroupElems = kAct == kFp8Block ? 128 : kAct == kMxfp8 ? 32 : kAct == kNvfp4 ? 16 : 8;
template <int kAct>
constexpr int kGroupLanes = kGroupElems<kAct> / 8;

template <int kIn>
constexpr int kInWords = kIn == kInF32 ? 2 : 1;  // 16-byte words per vector

template <int kIn>
struct Raw {
  device::U32x4 w[kInWords<kIn>];
};

#if defined(__CUDACC__)
template <int kIn>
__device__ __forceinline__ void load_raw(const unsigned char* x, long long vec, Raw<kIn>& r) {
  const uint4* p = reinterpret_cast<const uint4*>(x + vec * (16 * kInWords<kIn>));
  B12X_UNROLL
  for (int i = 0; i < kInWords<kIn>; ++i) {
    const uint4 v = __ldg(p + i);
    r.w[i] = {v.x, v.y, v.z, v.w};
  }
}
#endif

// max of two packed pairs of unsigned 16-bit values.
B12X_DEV unsigned umax16x2(unsigned a, unsigned b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned d;
  asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const unsigned lo = (a & 0xFFFFu) > (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
  const unsigned hi = (a >> 16) > (b >> 16) ? a >> 16 : b >> 16;
  return lo | (hi << 16);
#endif
}

// prmt.b32 (default mode): byte i of the result is byte (sel >> 4i) & 7 of {b, a} (a = bytes 0..3),
// or, when bit 3 of that selector nibble is set, that byte's top bit replicated (0x00 / 0xFF).
B12X_DEV unsigned prmt(unsigned a, unsigned b, unsigned sel) {
#if defined(__CUDA_ARCH__)
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
#else
  const unsigned long long ab = a | (static_cast<unsigned long long>(b) << 32);
  unsigned d = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned nib = (sel >> (4 * i)) & 0xFu;
    unsigned byte = static_cast<unsigned>(ab >> (8 * (nib & 7u))) & 0xFFu;
    if (nib & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}

// The signs of the 8 elements as byte masks: byte k of s03 is 0xFF when element k is negative
// (k < 4), of s47 for element 4 + k (prmt's sign mode on the bytes holding the sign bits).
template <int kIn>
B12X_DEV void sign_bytes(const Raw<kIn>& r, unsigned& s03, unsigned& s47) {
  if constexpr (kIn == kInF32) {
    s03 = prmt(prmt(r.w[0].x, r.w[0].y, 0x00FBu), prmt(r.w[0].z, r.w[0].w, 0x00FBu), 0x5410u);
    s47 = prmt(prmt(r.w[1].x, r.w[1].y, 0x00FBu), prmt(r.w[1].z, r.w[1].w, 0x00FBu), 0x5410u);
  } else {  // the high byte of each 16-bit half
    s03 = prmt(r.w[0].x, r.w[0].y, 0xFDB9u);
    s47 = prmt(r.w[0].z, r.w[0].w, 0xFDB9u);
  }
}

// The signs of the 8 elements at the sign bits of their E2M1 nibbles (bit 4i + 3): the byte masks
// regrouped into even and odd elements, bit 3 of byte j from element 2j and bit 7 from 2j + 1.
template <int kIn>
B12X_DEV unsigned sign_nibbles(const Raw<kIn>& r) {
  unsigned s03, s47;
  sign_bytes<kIn>(r, s03, s47);
  const unsigned even = prmt(s03, s47, 0x6420u), odd = prmt(s03, s47, 0x7531u);
  return (even & 0x08080808u) | (odd & 0x80808080u);
}

// 8 E4M3 codes of the values c_i (hardware RNE, saturating) with x's signs: every code's sign bit
// is x_i's, which is the host's rule for all modes (NaN codes included, whose sign cvt drops).
template <int kIn>
B12X_DEV void e4m3_codes(const Raw<kIn>& raw, const float (&c)[8], unsigned& lo, unsigned& hi) {
  unsigned s03, s47;
  sign_bytes<kIn>(raw, s03, s47);
  lo = device::pack_e4m3x2_no_nan(c[0], c[1]) | (device::pack_e4m3x2_no_nan(c[2], c[3]) << 16);
  hi = device::pack_e4m3x2_no_nan(c[4], c[5]) | (device::pack_e4m3x2_no_nan(c[6], c[7]) << 16);
  lo = (lo & 0x7F7F7F7Fu) | (s03 & 0x80808080u);
  hi = (hi & 0x7F7F7F7Fu) | (s47 & 0x80808080u);
}

// The 8 elements as FP32 (exact) and the largest |x| bits, partial (amax_finish makes FP32 bits of
// it: for 16-bit x the maximum 16-bit |x| pattern widened, which keeps the order and NaN).
template <int kIn>
B12X_DEV unsigned to_f32(const Raw<kIn>& r, float (&f)[8]) {
  if constexpr (kIn == kInF32) {
    const unsigned w[8] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w, r.w[1].x, r.w[1].y, r.w[1].z, r.w[1].w};
    unsigned m = 0;
    B12X_UNROLL
    for (int i = 0; i < 8; ++i) {
      f[i] = device::f32_from_bits(w[i]);
      const unsigned a = w[i] & 0x7FFFFFFFu;
      m = a > m ? a : m;
    }
    return m;
  } else {
    const unsigned w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) {
      if constexpr (kIn == kInBf16) {
        f[2 * i] = device::bf16_to_f32(w[i]);
        f[2 * i + 1] = device::bf16_to_f32(w[i] >> 16);
      } else {
        f[2 * i] = device::f16_to_f32(w[i] & 0xFFFFu);
        f[2 * i + 1] = device::f16_to_f32(w[i] >> 16);
      }
    }
    return umax16x2(umax16x2(w[0] & 0x7FFF7FFFu, w[1] & 0x7FFF7FFFu), umax16x2(w[2] & 0x7FFF7FFFu, w[3] & 0x7FFF7FFFu));
  }
}

// to_f32's partial maxima combine (16-bit x: two lanes of 16-bit patterns, kept packed through the
// group reduction) and finish as FP32 bits.
template <int kIn>
B12X_DEV unsigned amax_combine(unsigned a, unsigned b) {
  if constexpr (kIn == kInF32) return a > b ? a : b;
  return umax16x2(a, b);
}
template <int kIn>
B12X_DEV unsigned amax_finish(unsigned m) {
  if constexpr (kIn == kInF32) return m;
  m = (m & 0xFFFFu) > (m >> 16) ? m & 0xFFFFu : m >> 16;
  if constexpr (kIn == kInBf16) return m << 16;
  return device::f32_bits(device::f16_to_f32(m));
}

// FP8 scale of a block with this amax: amax / 448, 1 for a zero block, the host's NaN bits for NaN.
B12X_DEV float fp8_block_scale(float amax) {
  if (device::is_nan(amax)) return device::f32_from_bits(0x7FC00000u);
  return amax == 0.0f ? 1.0f : device::div_amax(amax, 448.0f);
}

// 8 E4M3 codes of e4m3_sat(f_i / scale) with f_i's sign, as two words (element 0 in the low byte).
template <int kIn>
B12X_DEV void e4m3_divided(const Raw<kIn>& raw, const float (&f)[8], float scale, unsigned& lo, unsigned& hi) {
  float c[8];
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) c[i] = device::div_rn(f[i], scale);
  e4m3_codes<kIn>(raw, c, lo, hi);
}

// e4m3_divided by div_by_rcp(|f_i|, b, r), r = rcp_rn(b), for div_by_rcp_ok(b) and |f_i| <= 2^10 b
// (kClamp: |f_i| is first clamped to `clamp` = 512 b, where every code saturates anyway; NaN stays).
template <int kIn, bool kClamp>
B12X_DEV void e4m3_by_rcp(const Raw<kIn>& raw, const float (&f)[8], float b, float r, float clamp, unsigned& lo,
                          unsigned& hi) {
  float c[8];
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) {
    float a = device::abs_f32(f[i]);
    if constexpr (kClamp) a = device::min_keep_nan(a, clamp);
    c[i] = device::div_by_rcp(a, b, r);
  }
  e4m3_codes<kIn>(raw, c, lo, hi);
}

// 8 E4M3 codes of e4m3_sat(f_i * inv) (inv a power of two: the host's exact ldexp), f_i's sign kept.
template <int kIn>
B12X_DEV void e4m3_scaled(const Raw<kIn>& raw, const float (&f)[8], float inv, unsigned& lo, unsigned& hi) {
  float c[8];
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) c[i] = device::mul_rn(device::abs_f32(f[i]), inv);
  e4m3_codes<kIn>(raw, c, lo, hi);
}

// 8 E2M1 codes of (f_i * g) / sb (all 0 when sb is 0), element 0 in the low nibble.
B12X_DEV unsigned e2m1_divided(const float (&f)[8], float g, float sb) {
  if (sb == 0.0f) return 0u;
  unsigned w = 0;
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) w |= device::f32_to_e2m1_sat(device::div_rn(device::mul_rn(f[i], g), sb)) << (4 * i);
  return w;
}

// e2m1_divided for a finite g > 0 and sb = 0 or sb in [2^-9, 448] with every |f_i| g / sb < 16,
// given r = rcp_rn(sb): the codes of div_by_rcp(|f_i| g, sb, r) with the signs of x; 0 for sb = 0.
// (A block with amax g <= 2688 = 6 * 448 meets it: sb = e4m3(amax g / 6) is then at least
// 15/16 of amax g / 6, or a subnormal k 2^-9 >= 2/3 of it, so every quotient is at most 9.)
// kSat = false: every quotient below 7, so no code saturates (the min per element is left out).
// A block whose sb is a normal E4M3 value (>= 2^-6) meets it: its quotients are at most 6 * 16/15.
template <int kIn, bool kSat = true>
B12X_DEV unsigned e2m1_by_rcp(const Raw<kIn>& raw, const float (&f)[8], float g, float sb, float r) {
  if (sb == 0.0f) return 0u;
  // Biased codes summed at their nibbles: the biases come out in one subtraction (mod 2^32).
  unsigned w = 0;
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) {
    const float q = device::div_by_rcp(device::mul_rn(device::abs_f32(f[i]), g), sb, r);
    w += (kSat ? device::e2m1_code_biased(q) : device::e2m1_code_biased_below7(q)) << (4 * i);
  }
  return (w - device::kE2m1Bias * 0x11111111u) | sign_nibbles<kIn>(raw);
}

// Byte offset of scale (r, c) in the 128x4 swizzled layout for r, c < 2^32, tile_row_bytes =
// cols_padded * 128 (the bytes of 128 rows): swizzled_offset with 32-bit fields.
B12X_DEV long long swizzled_offset32(unsigned r, unsigned c, unsigned long long tile_row_bytes) {
  return static_cast<long long>((r >> 7) * tile_row_bytes) +
         static_cast<long long>(((c >> 2) << 9) | ((r & 31u) << 4) | (((r >> 5) & 3u) << 2) | (c & 3u));
}

// Byte offset of scale (r, c) in the 128x4 swizzled layout (swizzled_scale_offset in swizzle.cpp).
B12X_DEV long long swizzled_offset(long long r, long long c, long long cols_padded) {
  return (r / 128) * (cols_padded / 4) * 512 + (c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4);
}

#if defined(__CUDACC__)
template <int kLanes, int kIn>
__device__ __forceinline__ unsigned group_max(unsigned v) {
  B12X_UNROLL
  for (int o = 1; o < kLanes; o <<= 1) v = amax_combine<kIn>(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

__device__ __forceinline__ void st_u32x2(unsigned char* p, unsigned lo, unsigned hi) {
  *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
}
#endif

}  // namespace quant

#if defined(__CUDACC__)
namespace quant {

// The padding bytes of a swizzled scale buffer for `rows` x `groups_per_row` scales, item i of
// the padding CTAs: rows [rows, rows_padded) x all columns, then rows [0, rows) x the columns past
// the last.
__device__ __forceinline__ void write_swizzle_padding(unsigned char* scales, long long rows, long long groups_per_row,
                                                      long long i, unsigned char pad) {
  const long long rows_padded = (rows + 127) / 128 * 128, cols_padded = (groups_per_row + 3) / 4 * 4;
  const long long tail_rows = (rows_padded - rows) * cols_padded, extra_cols = cols_padded - groups_per_row;
  long long r, c;
  if (i < tail_rows) {
    r = rows + i / cols_padded;
    c = i % cols_padded;
  } else {
    const long long j = i - tail_rows;
    if (extra_cols == 0 || j >= rows * extra_cols) return;
    r = j / extra_cols;
    c = groups_per_row + j % extra_cols;
  }
  scales[swizzled_offset(r, c, cols_padded)] = pad;
}

// Where the scale of the group holding vector v goes: row-major (v / lanes per group) or swizzled
// (row = v / vecs_per_row by row_div; rows < 2^31, bind checks).
template <int kLanes, int kSwz>
__device__ __forceinline__ long long scale_offset(long long v, int vecs_per_row, long long groups_per_row,
                                                  const device::FastDiv& row_div) {
  if constexpr (kSwz) {
    const unsigned row = static_cast<unsigned>(device::fast_div(static_cast<unsigned long long>(v), row_div));
    const unsigned col = static_cast<unsigned>(v - static_cast<long long>(row) * vecs_per_row);
    return swizzled_offset32(row, col / kLanes, static_cast<unsigned long long>((groups_per_row + 3) / 4) * 512);
  }
  return static_cast<long long>(static_cast<unsigned long long>(v) / kLanes);
}

}  // namespace quant

// fp8_tensor, fp8_block, mxfp8 (fp8_tensor: a "group" is one vector and needs no amax). kSwz: 1 =
// swizzled scales. x: [rows, 8 * vecs_per_row] of kIn, 16-byte aligned; input_scale: f32 [1]
// (fp8_tensor); q: fp8 [rows, 8 * vecs_per_row] (8-byte aligned); scales: f32 [rows, groups]
// (fp8_block), u8 [rows, groups] or the swizzled buffer. CTAs [0, main_ctas) quantize; with kSwz
// the CTAs after them write the padding bytes, and row_div divides by vecs_per_row (rows *
// vecs_per_row < 2^40; unused without kSwz).
template <int kAct, int kIn, int kSwz>
__global__ void __launch_bounds__(kQuantThreads, kQuantMinCtas<kIn>)
    quantize_groups_kernel(const unsigned char* __restrict__ x, const float* __restrict__ input_scale,
                           unsigned char* __restrict__ q, unsigned char* __restrict__ scales, long long rows,
                           int vecs_per_row, long long main_ctas, device::FastDiv row_div) {
  using namespace quant;
  device::pdl_launch_dependents();  // a GEMM launched behind this kernel may start (it waits for xq)
  static_assert(kAct == kFp8Tensor || kAct == kFp8Block || kAct == kMxfp8, "nvfp4: quantize_nvfp4_kernel");
  static_assert(kSwz == 0 || kAct == kMxfp8, "swizzled scales are byte scales");
  constexpr int kLanes = kGroupLanes<kAct>;
  const int tid = static_cast<int>(threadIdx.x);
  const long long groups_per_row = vecs_per_row / kLanes;

  if (kSwz && static_cast<long long>(blockIdx.x) >= main_ctas) {
    write_swizzle_padding(scales, rows, groups_per_row,
                          (static_cast<long long>(blockIdx.x) - main_ctas) * kQuantThreads + tid, 127);
    return;
  }

  const long long vecs = rows * vecs_per_row;
  const long long first = static_cast<long long>(blockIdx.x) * kQuantVecsPerCta + tid;
  Raw<kIn> raw[kQuantSlots];
  B12X_UNROLL
  for (int s = 0; s < kQuantSlots; ++s) {
    const long long v = first + s * kQuantThreads;
    if (v < vecs) load_raw<kIn>(x, v, raw[s]);
  }
  // fp8_tensor's scale s (|x| / |s|: the sign is x's) with its reciprocal. `fast`: div_by_rcp
  // applies (uniform, so the branch below never diverges on it).
  [[maybe_unused]] float tensor_scale = 0.0f, tensor_rcp = 0.0f, tensor_clamp = 0.0f;
  [[maybe_unused]] bool fast = false;
  if constexpr (kAct == kFp8Tensor) {
    tensor_scale = device::ld_f32(input_scale);
    const float b = device::abs_f32(tensor_scale);
    fast = device::div_by_rcp_ok(b);
    tensor_rcp = device::rcp_rn(b);
    tensor_clamp = device::mul_rn(b, 512.0f);
  }

  B12X_UNROLL
  for (int s = 0; s < kQuantSlots; ++s) {
    const long long v = first + s * kQuantThreads;
    const bool in = v < vecs;  // whole groups are in or out (vecs_per_row % kLanes == 0)
    float f[8];
    unsigned amax_bits = 0;
    if (in) amax_bits = to_f32<kIn>(raw[s], f);
    if constexpr (kLanes > 1) amax_bits = group_max<kLanes, kIn>(amax_bits);  // every lane takes part
    if (!in) continue;
    const float amax = device::amax_from_abs_bits(amax_finish<kIn>(amax_bits));
    const bool leader = tid % kLanes == 0;
    unsigned lo, hi;
    if constexpr (kAct == kFp8Tensor) {
      if (fast)
        e4m3_by_rcp<kIn, true>(raw[s], f, device::abs_f32(tensor_scale), tensor_rcp, tensor_clamp, lo, hi);
      else
        e4m3_divided<kIn>(raw[s], f, tensor_scale, lo, hi);
    } else if constexpr (kAct == kFp8Block) {
      const float scale = fp8_block_scale(amax);  // |f_i| <= amax: no clamp needed
      if (device::div_by_rcp_ok(scale))
        e4m3_by_rcp<kIn, false>(raw[s], f, scale, device::rcp_rn(scale), 0.0f, lo, hi);
      else
        e4m3_divided<kIn>(raw[s], f, scale, lo, hi);
      if (leader) reinterpret_cast<float*>(scales)[scale_offset<kLanes, 0>(v, vecs_per_row, groups_per_row, row_div)] = scale;
    } else {
      const unsigned byte = device::ue8m0_scale_e4m3(amax);
      e4m3_scaled<kIn>(raw[s], f, device::ue8m0_inverse(byte), lo, hi);
      if (leader) scales[scale_offset<kLanes, kSwz>(v, vecs_per_row, groups_per_row, row_div)] = static_cast<unsigned char>(byte);
    }
    st_u32x2(q + v * 8, lo, hi);
  }
}

// nvfp4: a thread item is one whole group (two vectors, 16 elements), so there is no shuffle and
// the per-group work (scale, its lookup, the stores) is paid once per 16 elements. Thread t, slot s
// of CTA c: group c * 512 + s * 256 + t (kQuantVecsPerCta vectors per CTA, as the other modes).
// Arguments as quantize_groups_kernel; input_scale: s2 (g = 1 / s2); q: [rows, 4 * vecs_per_row]
// bytes, 4-byte aligned; scales: u8 [rows, vecs_per_row / 2] or the swizzled buffer.
template <int kIn, int kSwz>
__global__ void __launch_bounds__(kQuantThreads, kQuantMinCtas<kIn>)
    quantize_nvfp4_kernel(const unsigned char* __restrict__ x, const float* __restrict__ input_scale,
                          unsigned char* __restrict__ q, unsigned char* __restrict__ scales, long long rows,
                          int vecs_per_row, long long main_ctas, device::FastDiv row_div) {
  using namespace quant;
  device::pdl_launch_dependents();  // a GEMM launched behind this kernel may start (it waits for xq)
  constexpr int kSlots = kQuantSlots / 2;
  const int tid = static_cast<int>(threadIdx.x);
  const long long groups_per_row = vecs_per_row / 2;

  if (kSwz && static_cast<long long>(blockIdx.x) >= main_ctas) {
    write_swizzle_padding(scales, rows, groups_per_row,
                          (static_cast<long long>(blockIdx.x) - main_ctas) * kQuantThreads + tid, 0);
    return;
  }

  const long long groups = rows * groups_per_row;
  const long long first = static_cast<long long>(blockIdx.x) * (kQuantVecsPerCta / 2) + tid;
  Raw<kIn> raw[kSlots][2];
  B12X_UNROLL
  for (int s = 0; s < kSlots; ++s) {
    const long long gi = first + s * kQuantThreads;
    if (gi < groups) {
      load_raw<kIn>(x, 2 * gi, raw[s][0]);
      load_raw<kIn>(x, 2 * gi + 1, raw[s][1]);
    }
  }
  // g, and whether the fast path applies to the tensor (g finite and positive; uniform).
  const float g = device::div_rn(1.0f, device::ld_f32(input_scale));
  const bool fast = g > 0.0f && g <= 3.40282347e38f;
  // (value, rcp_rn(value)) of every E4M3 scale code, so a group looks its scale up.
  __shared__ float2 scale_table[128];
  if (tid < 128) {
    const float sb = device::e4m3_to_f32(static_cast<unsigned>(tid));
    scale_table[tid] = make_float2(sb, device::rcp_rn(sb));
  }
  __syncthreads();

  B12X_UNROLL
  for (int s = 0; s < kSlots; ++s) {
    const long long gi = first + s * kQuantThreads;
    if (gi >= groups) continue;
    float f0[8], f1[8];
    const unsigned m = amax_combine<kIn>(to_f32<kIn>(raw[s][0], f0), to_f32<kIn>(raw[s][1], f1));
    const float amax = device::amax_from_abs_bits(amax_finish<kIn>(m)), amax_g = device::mul_rn(amax, g);
    unsigned byte, w0, w1;
    if (fast && amax_g <= 2688.0f) {  // e2m1_by_rcp's range (NaN is not)
      // amax g / 6 < 2^-10 (amax g < 2^-100 in particular) has scale code 0: all codes 0. Above
      // 2^-100 (and <= 2688 here) div_amax's division by reciprocal applies: no range branch.
      byte = device::pack_e4m3x2_no_nan(amax_g < 0x1p-100f ? 0.0f : device::div_by_rcp(amax_g, 6.0f, 1.0f / 6.0f), 0.0f) &
             0xFFu;
      const float2 sb = scale_table[byte];
      // Scale codes >= 8 are normal: no code saturates. Voted per warp, so that a warp runs one
      // of the two loops (a subnormal block scale, amax g < 6 * 2^-6, is rare in real activations).
      if (__all_sync(__activemask(), byte >= 8u)) {
        w0 = e2m1_by_rcp<kIn, false>(raw[s][0], f0, g, sb.x, sb.y);
        w1 = e2m1_by_rcp<kIn, false>(raw[s][1], f1, g, sb.x, sb.y);
      } else {
        w0 = e2m1_by_rcp<kIn>(raw[s][0], f0, g, sb.x, sb.y);
        w1 = e2m1_by_rcp<kIn>(raw[s][1], f1, g, sb.x, sb.y);
      }
    } else {  // NaN / Inf / saturating blocks, or a g that is not finite and positive
      byte = device::f32_to_e4m3_sat(device::div_rn(amax_g, 6.0f));
      const float sb = device::e4m3_to_f32(byte);
      w0 = e2m1_divided(f0, g, sb);
      w1 = e2m1_divided(f1, g, sb);
    }
    unsigned* out = reinterpret_cast<unsigned*>(q + gi * 8);
    out[0] = w0;
    out[1] = w1;
    scales[scale_offset<2, kSwz>(2 * gi, vecs_per_row, groups_per_row, row_div)] = static_cast<unsigned char>(byte);
  }
}

// fp8_token: CTA r quantizes row r with blockDim.x threads (a multiple of 32); thread t holds the
// vectors t + i * blockDim.x, i < kSlots (kSlots = 0: any number, read once for the amax and again
// to quantize). x: [rows, 8 * vecs_per_row] of kIn; q: fp8 [rows, 8 * vecs_per_row]; scales: f32 [rows].
template <int kIn, int kSlots>
__global__ void __launch_bounds__(kQuantRowsMaxThreads, 1)
    quantize_rows_kernel(const unsigned char* __restrict__ x, unsigned char* __restrict__ q,
                         float* __restrict__ scales, int vecs_per_row) {
  using namespace quant;
  device::pdl_launch_dependents();  // a GEMM launched behind this kernel may start (it waits for xq)
  __shared__ unsigned warp_max[kQuantRowsMaxThreads / 32];
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const long long row_vec = static_cast<long long>(blockIdx.x) * vecs_per_row;
  constexpr int kHeld = kSlots > 0 ? kSlots : 1;
  Raw<kIn> raw[kHeld];
  unsigned amax_bits = 0;
  float f[8];
  if constexpr (kSlots > 0) {
    B12X_UNROLL
    for (int s = 0; s < kSlots; ++s)
      if (tid + s * threads < vecs_per_row) load_raw<kIn>(x, row_vec + tid + s * threads, raw[s]);
    B12X_UNROLL
    for (int s = 0; s < kSlots; ++s)
      if (tid + s * threads < vecs_per_row) amax_bits = amax_combine<kIn>(amax_bits, to_f32<kIn>(raw[s], f));
  } else {
    for (int c = tid; c < vecs_per_row; c += threads) {
      load_raw<kIn>(x, row_vec + c, raw[0]);
      amax_bits = amax_combine<kIn>(amax_bits, to_f32<kIn>(raw[0], f));
    }
  }
  amax_bits = __reduce_max_sync(0xFFFFFFFFu, amax_finish<kIn>(amax_bits));
  if (tid % 32 == 0) warp_max[tid / 32] = amax_bits;
  __syncthreads();
  amax_bits = 0;
  for (int w = 0; w < threads / 32; ++w) amax_bits = warp_max[w] > amax_bits ? warp_max[w] : amax_bits;
  const float scale = fp8_block_scale(device::amax_from_abs_bits(amax_bits));
  if (tid == 0) scales[blockIdx.x] = scale;

  // |x| <= amax: div_by_rcp needs no clamp; a NaN / Inf / extreme row takes div_rn (uniform per CTA).
  const bool fast = device::div_by_rcp_ok(scale);
  const float rcp = device::rcp_rn(scale);
  unsigned lo, hi;
  auto encode = [&](const Raw<kIn>& r) {
    if (fast)
      e4m3_by_rcp<kIn, false>(r, f, scale, rcp, 0.0f, lo, hi);
    else
      e4m3_divided<kIn>(r, f, scale, lo, hi);
  };
  if constexpr (kSlots > 0) {
    B12X_UNROLL
    for (int s = 0; s < kSlots; ++s)
      if (tid + s * threads < vecs_per_row) {
        to_f32<kIn>(raw[s], f);
        encode(raw[s]);
        st_u32x2(q + (row_vec + tid + s * threads) * 8, lo, hi);
      }
  } else {
    for (int c = tid; c < vecs_per_row; c += threads) {
      load_raw<kIn>(x, row_vec + c, raw[0]);
      to_f32<kIn>(raw[0], f);
      encode(raw[0]);
      st_u32x2(q + (row_vec + c) * 8, lo, hi);
    }
  }
}
#endif

}  // namespace b12x
