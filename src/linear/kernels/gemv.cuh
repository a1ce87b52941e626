// linear.gemv: the decode path of the linear op, y[M, N] = x[M, K] . W[N, K]^T (+ bias) for M <= 16
// 16-bit activations ("a16") and a weight of any b12x format in its checkpoint layout, FP32
// accumulation. Weight-bandwidth bound: every weight byte is read once, straight from its checkpoint
// layout, and decoded in registers by the exact device decoders of device/decode.cuh.
//
// Work decomposition (the host plan in src/linear/linear.cpp mirrors it):
//  * A CTA has kGemvWarps warps. They form kGemvWarps / ksplit groups of ksplit warps; a group owns
//    kRows consecutive output rows (rows of W), and warp `slice` of the group takes every ksplit-th
//    32-lane stripe of that rows' K runs (split-K inside the CTA when N alone gives too few CTAs).
//  * Lane l of slice s handles runs (32 consecutive K elements) j = 32 s + l, j += 32 ksplit, of each
//    of its rows: consecutive lanes read consecutive runs, so weight loads are coalesced (16-byte
//    loads where the layout allows). fetch_run loads a run and its scales into registers;
//    decode_piece turns 8 of its elements at a time into FP32 with the element / group decoders of
//    device/decode.cuh (bit-exact with decode_weight_run). Each 8-element piece of x (16 bytes,
//    read-only path; x is small and stays in L1/L2) is loaded once per run and used for every row:
//    acc[row][token] += w . x for every live token t < m (m a runtime value <= the kM bucket).
//    kM <= 4 walks piece by piece (8 decoded values per row live); kM >= 8 decodes the whole run
//    first, then walks token by token.
//  * Reduction: a butterfly over the warp's lanes (__shfl_xor_sync), then the ksplit slices of a group
//    through shared memory in slice order. No atomics: results are deterministic.
//  * Epilogue (linear_finish): the FP32 tensor scale (fp8_tensor weight_scale, nvfp4 weight_scale_2) is
//    applied to the sum, like reference_linear does (the weight is decoded without it), then the
//    bias, then one RNE rounding to the output dtype.
//
// The per-lane work (gemv_lane_partial), the mapping of threads to rows and runs (gemv_task) and the
// epilogue are portable functions: tests/linear/test_linear_compile.cpp runs them on the CPU and
// compares the whole kernel's arithmetic with reference_linear. Only the shuffles, shared memory and
// the launch itself are device-only.
//
// Floating point: the decoders are exact under any -fmad setting (they use mul_rn / add_rn); the
// accumulation uses explicit FMAs, the epilogue mul_rn / add_rn, so nothing depends on contraction.
// Requires -ftz=false (subnormal weights and scales are real values).
#pragma once
#include "linear/kernels/common.cuh"

namespace b12x::device {

constexpr int kGemvWarps = 8;
constexpr int kGemvThreads = 32 * kGemvWarps;
constexpr int kGemvMaxTokens = 16;
// CTAs per SM the kernel is built for (__launch_bounds__), by token bucket: few tokens need few
// registers, and more resident warps keep more weight bytes in flight. Registers per thread:
// 65536 / (256 x this) = 80 (ptxas rounds 85 down) or 128; the host's KernelSpec::max_registers
// says the same (src/linear/linear.cpp).
constexpr int gemv_min_blocks(int m) { return m <= 4 ? 3 : 2; }

// Independent accumulators per (row, token): short dependency chains when there are few tokens.
constexpr int gemv_acc_split(int m) { return m == 1 ? 4 : m == 2 ? 2 : 1; }

// ---------------------------------------------------------------------------------------------
// Weights: one run in registers, decoded 8 elements at a time
//
// fetch_run loads the bytes of one run (32 consecutive weights of a row) with the widest loads its
// layout allows, plus its scales; decode_piece(q) turns elements 8q .. 8q+7 into FP32 with the
// element and group decoders of device/decode.cuh, so only 8 decoded values per row are live at a
// time. The values are exactly those of decode_weight_run with scale2 = 1 (the tensor scale is left
// out: linear_finish applies it to the sum, like reference_linear); tests/linear checks this for every
// format and code. GGML runs are decoded by their run decoders straight from memory (their blocks are
// only 2-byte aligned); the compiler keeps the 8 values a piece needs.

// 32-bit words of one run held in registers (0: GGML formats, decoded from memory).
constexpr int gemv_run_words(int format) {
  return format == kFmtBf16 || format == kFmtF16 ? 16
         : format == kFmtNvfp4 || format == kFmtMxfp4 ? 4
         : format == kFmtQ8_0 || format == kFmtIq2xxs || format == kFmtIq2xs ? 0
                                                                                : 8;  // E4M3 formats
}

template <int kFormat>
struct WeightRun {
  unsigned raw[gemv_run_words(kFormat) > 0 ? gemv_run_words(kFormat) : 1];
  float s0 = 1.0f, s1 = 1.0f;            // block / row scales (nvfp4: one per 16-element group)
  const unsigned char* block = nullptr;  // GGML: the block holding the run
  unsigned sub = 0;                      // IQ2: the run's sub-block
};

// Run `col` (elements 32 col .. 32 col + 31) of row `row`; the run index of decode_weight_run is
// r = row * runs_per_row + col. scale_cols = ceil(K / 128) (fp8_block).
template <int kFormat>
B12X_DEV void fetch_run(const unsigned char* data, const unsigned char* scale, long long row, long long col,
                        long long runs_per_row, long long scale_cols, WeightRun<kFormat>& w) {
  const long long r = row * runs_per_row + col;
  constexpr int kWords = gemv_run_words(kFormat);
  if constexpr (kWords > 0) {
    const unsigned char* p = data + r * (4 * kWords);
    B12X_UNROLL
    for (int i = 0; i < kWords / 4; ++i) {
      const U32x4 v = ld_u32x4(p + 16 * i);
      w.raw[4 * i] = v.x;
      w.raw[4 * i + 1] = v.y;
      w.raw[4 * i + 2] = v.z;
      w.raw[4 * i + 3] = v.w;
    }
  }
  if constexpr (kFormat == kFmtFp8Channel) {
    w.s0 = ld_f32(scale + 4 * row);
  } else if constexpr (kFormat == kFmtFp8Block) {
    w.s0 = ld_f32(scale + 4 * ((row >> 7) * scale_cols + (col >> 2)));  // 4 runs per 128-wide block
  } else if constexpr (kFormat == kFmtMxfp8 || kFormat == kFmtMxfp4) {
    w.s0 = ue8m0_to_f32(ld_u8(scale + r));
  } else if constexpr (kFormat == kFmtNvfp4) {
    w.s0 = e4m3_to_f32(ld_u8(scale + 2 * r));
    w.s1 = e4m3_to_f32(ld_u8(scale + 2 * r + 1));
  } else if constexpr (kFormat == kFmtQ8_0) {
    w.block = data + 34 * r;
  } else if constexpr (kFormat == kFmtIq2xxs) {
    w.block = data + 66 * (r >> 3);
    w.sub = static_cast<unsigned>(r & 7);
  } else if constexpr (kFormat == kFmtIq2xs) {
    w.block = data + 74 * (r >> 3);
    w.sub = static_cast<unsigned>(r & 7);
  }
}

// Elements 8q .. 8q+7 of a fetched run (q = 0..3), without the tensor scale.
template <int kFormat>
B12X_DEV void decode_piece(const WeightRun<kFormat>& w, int q, float (&out)[8]) {
  if constexpr (kFormat == kFmtBf16 || kFormat == kFmtF16) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) {
      const unsigned v = w.raw[4 * q + i];
      out[2 * i] = kFormat == kFmtBf16 ? bf16_to_f32(v) : f16_to_f32_cvt(v & 0xFFFFu);
      out[2 * i + 1] = kFormat == kFmtBf16 ? bf16_to_f32(v >> 16) : f16_to_f32_cvt(v >> 16);
    }
  } else if constexpr (kFormat == kFmtFp8Tensor) {
    B12X_UNROLL
    for (int i = 0; i < 8; ++i) out[i] = e4m3_to_f32((w.raw[2 * q + i / 4] >> (8 * (i % 4))) & 0xFFu);
  } else if constexpr (kFormat == kFmtFp8Channel || kFormat == kFmtFp8Block || kFormat == kFmtMxfp8) {
    e4m3x4_scaled(w.raw[2 * q], w.s0, out);
    e4m3x4_scaled(w.raw[2 * q + 1], w.s0, out + 4);
  } else if constexpr (kFormat == kFmtNvfp4) {
    e2m1x8_scaled(w.raw[q], q < 2 ? w.s0 : w.s1, out);  // e2m1 * e4m3 block scale: exact
  } else if constexpr (kFormat == kFmtMxfp4) {
    e2m1x8_scaled(w.raw[q], w.s0, out);
  } else {
    float all[32];
    if constexpr (kFormat == kFmtQ8_0) decode_q8_0_x32(w.block, all);
    else if constexpr (kFormat == kFmtIq2xxs) decode_iq2_xxs_x32(w.block, w.sub, all);
    else decode_iq2_xs_x32(w.block, w.sub, all);
    B12X_UNROLL
    for (int i = 0; i < 8; ++i) out[i] = all[8 * q + i];
  }
}

// ---------------------------------------------------------------------------------------------
// Thread -> work mapping

struct GemvTask {
  long long row0;        // first of the warp's kRows rows (rows >= n are clamped for loads, never stored)
  long long first_run;   // the lane's first run of each row
  long long run_stride;  // then every run_stride-th run
  int group, slice;
};

B12X_DEV GemvTask gemv_task(long long block, int warp, int lane, int ksplit, int rows) {
  GemvTask t;
  t.group = warp / ksplit;
  t.slice = warp - t.group * ksplit;
  t.row0 = block * (static_cast<long long>(kGemvWarps / ksplit) * rows) + static_cast<long long>(t.group) * rows;
  t.first_run = 32LL * t.slice + lane;
  t.run_stride = 32LL * ksplit;
  return t;
}

// ---------------------------------------------------------------------------------------------
// One lane's partial sums

// acc[r][t] = sum over the lane's runs j of  W[row0 + r, run j] . x[t, run j], for t < m (acc of
// tokens t >= m stay 0). x: [m, k] of kAct, rows contiguous, 16-byte aligned. Rows past n are read as
// row n - 1 (their sums are discarded).
template <int kFormat, int kM, int kAct, int kRows>
B12X_DEV void gemv_lane_partial(const unsigned char* x, int m, long long k, const unsigned char* data,
                                const unsigned char* scale, long long n, long long scale_cols, const GemvTask& task,
                                float (&acc)[kRows][kM]) {
  constexpr int kSplit = gemv_acc_split(kM);
  const long long runs_per_row = k >> 5;
  const unsigned x_row_bytes = static_cast<unsigned>(k * 2);  // the plan keeps 16 x-rows below 2^31 bytes
  long long rows[kRows];
  B12X_UNROLL
  for (int r = 0; r < kRows; ++r) rows[r] = task.row0 + r < n ? task.row0 + r : n - 1;

  float part[kRows][kM][kSplit];
  B12X_UNROLL
  for (int r = 0; r < kRows; ++r)
    B12X_UNROLL
    for (int t = 0; t < kM; ++t)
      B12X_UNROLL
      for (int s = 0; s < kSplit; ++s) part[r][t][s] = 0.0f;

  for (long long j = task.first_run; j < runs_per_row; j += task.run_stride) {
    WeightRun<kFormat> wr[kRows];
    B12X_UNROLL
    for (int r = 0; r < kRows; ++r) fetch_run<kFormat>(data, scale, rows[r], j, runs_per_row, scale_cols, wr[r]);
    const unsigned char* xj = x + j * 64;  // 32 activations of 2 bytes
    // Row stride of x, opaque to the optimizer inside each iteration: otherwise it hoists one 64-bit
    // pointer per token out of the loop (32 registers at 16 tokens) and spills.
    unsigned xs = x_row_bytes;
    opaque_u32(xs);
    if constexpr (kM <= 4) {
      // Few tokens: 8 decoded weights per row live at a time, x loaded once per piece and token.
      B12X_UNROLL
      for (int q = 0; q < 4; ++q) {
        float w[kRows][8];
        B12X_UNROLL
        for (int r = 0; r < kRows; ++r) decode_piece<kFormat>(wr[r], q, w[r]);
        B12X_UNROLL
        for (int t = 0; t < kM; ++t) {
          if (t == 0 || t < m) {  // m >= 1
            float xv[8];
            load_act8<kAct>(xj + (t * xs + 16 * q), xv);
            B12X_UNROLL
            for (int r = 0; r < kRows; ++r)
              B12X_UNROLL
              for (int e = 0; e < 8; ++e)
                part[r][t][e % kSplit] = fma_rn(w[r][e], xv[e], part[r][t][e % kSplit]);
          }
        }
      }
    } else {
      // Many tokens: the whole run decoded once (32 values per row), then token by token.
      float w[kRows][4][8];
      B12X_UNROLL
      for (int r = 0; r < kRows; ++r)
        B12X_UNROLL
        for (int q = 0; q < 4; ++q) decode_piece<kFormat>(wr[r], q, w[r][q]);
      B12X_UNROLL
      for (int t = 0; t < kM; ++t) {
        if (t == 0 || t < m) {
          B12X_UNROLL
          for (int q = 0; q < 4; ++q) {
            float xv[8];
            load_act8<kAct>(xj + (t * xs + 16 * q), xv);
            B12X_UNROLL
            for (int r = 0; r < kRows; ++r)
              B12X_UNROLL
              for (int e = 0; e < 8; ++e)
                part[r][t][e % kSplit] = fma_rn(w[r][q][e], xv[e], part[r][t][e % kSplit]);
          }
        }
      }
    }
  }

  B12X_UNROLL
  for (int r = 0; r < kRows; ++r)
    B12X_UNROLL
    for (int t = 0; t < kM; ++t) {
      float v = part[r][t][0];
      B12X_UNROLL
      for (int s = 1; s < kSplit; ++s) v = add_rn(v, part[r][t][s]);
      acc[r][t] = v;
    }
}

}  // namespace b12x::device

#if defined(__CUDACC__)
namespace b12x {

// kFormat: b12x::Format as int; kM: token bucket (1, 2, 4, 8, 16), the live count m <= kM is a
// launch argument; kAct: device::ActDType; kOut: device::OutDType; kRows: output rows per warp group.
// Arguments:
//   x      [m, k] kAct, contiguous, 16-byte aligned          y     [m, n] kOut, contiguous
//   data, scale, scale2, scale_cols: the weight as for decode_weight_run (scale2 = tensor scale)
//   act_scale  nullptr, or the activations' device f32 tensor scale (device::linear_tensor_scale)
//   bias   [n] (bias_code says its dtype; kBiasNone: no bias)
//   ksplit warps per row group (1, 2, 4 or 8), grid.x = ceil(n / (kGemvWarps / ksplit * kRows))
template <int kFormat, int kM, int kAct, int kOut, int kRows>
__global__ void __launch_bounds__(device::kGemvThreads, device::gemv_min_blocks(kM))
    linear_gemv_kernel(const unsigned char* __restrict__ x, const unsigned char* __restrict__ data,
                       const unsigned char* __restrict__ scale, float scale2, const float* __restrict__ act_scale, const unsigned char* __restrict__ bias,
                       int bias_code, unsigned char* __restrict__ y, int m, long long n, long long k,
                       long long scale_cols, int ksplit) {
  static_assert(kM >= 1 && kM <= device::kGemvMaxTokens && kRows >= 1, "bad gemv configuration");
  __shared__ float partial[device::kGemvWarps][kRows * kM];
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const device::GemvTask task = device::gemv_task(blockIdx.x, warp, lane, ksplit, kRows);

  float acc[kRows][kM];
  device::gemv_lane_partial<kFormat, kM, kAct, kRows>(x, m, k, data, scale, n, scale_cols, task, acc);

  // Butterfly: every lane ends with the warp's sums.
  B12X_UNROLL
  for (int r = 0; r < kRows; ++r)
    B12X_UNROLL
    for (int t = 0; t < kM; ++t) {
      float v = acc[r][t];
      B12X_UNROLL
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
      acc[r][t] = v;
    }
  if (lane == 0) {
    B12X_UNROLL
    for (int r = 0; r < kRows; ++r)
      B12X_UNROLL
      for (int t = 0; t < kM; ++t) partial[warp][r * kM + t] = acc[r][t];
  }
  __syncthreads();

  // Slice 0 of each group adds its group's slices in order and writes the outputs.
  if (task.slice != 0) return;
  const float tensor_scale = device::linear_tensor_scale<kFormat>(scale2, act_scale);
  for (int i = lane; i < kRows * kM; i += 32) {
    const int r = i / kM, t = i - (i / kM) * kM;
    const long long row = task.row0 + r;
    if (t >= m || row >= n) continue;
    float v = partial[warp][i];
    for (int s = 1; s < ksplit; ++s) v += partial[warp + s][i];
    device::linear_finish<kFormat, kOut>(v, tensor_scale, bias, bias_code, row, y, static_cast<long long>(t) * n + row);
  }
}

}  // namespace b12x
#endif
