// linear (decode path) without a GPU:
//  * LinearCompile: every kernel configuration compiles with NVRTC for every declared arch, without
//    spills and within its register budget; the spec lists and token buckets are consistent; plan and
//    bind reject bad arguments, naming them, before anything touches CUDA.
//  * LinearKernelHost: the kernel's portable parts (src/linear/kernels/gemv.cuh is plain C++ outside
//    the __global__ function) run on the CPU: the piece decoders equal decode_weight_run bit for bit
//    on every code, and the whole kernel's arithmetic (thread mapping, per-lane sums, butterfly and
//    split-K order, epilogue) emulated on the CPU matches reference_linear on fresh random data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/linear.h"
#include "b12x/runtime/jit.h"
#include "linear/kernels/gemv.cuh"
#include "linear/kernels/wgmma_tile16.cuh"
#include "support/bits.h"
#include "support/env.h"
#include "support/errors.h"
#include "support/format_dispatch.h"
#include "support/weights.h"

namespace b12x {
namespace {

namespace dev = b12x::device;

// ---------------------------------------------------------------------------------------------
// Helpers

using test::bits_of;
using test::expect_bad_argument;
using test::fresh_seed;
using test::with_format;

PackedWeight random_weight(Format f, int64_t n, int64_t k, std::mt19937_64& rng) {
  return test::random_weight(f, n, k, rng, test::kLinearDraw);
}

HostTensor random_act(std::mt19937_64& rng, DType dtype, int64_t rows, int64_t cols) {
  HostTensor t(dtype, {rows, cols});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) store_f32(t.view().data, dtype, i, normal(rng));
  return t;
}

// Relative L2 error and cosine similarity of got against ref (got must be finite).
struct Agreement {
  double rel_l2 = 0, cosine = 0;
  int64_t non_finite = 0;
};

Agreement agreement(const std::vector<double>& got, const std::vector<double>& ref) {
  Agreement a;
  double diff = 0, nref = 0, ngot = 0, dot = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++a.non_finite;
      continue;
    }
    diff += (got[i] - ref[i]) * (got[i] - ref[i]);
    nref += ref[i] * ref[i];
    ngot += got[i] * got[i];
    dot += got[i] * ref[i];
  }
  a.rel_l2 = nref > 0 ? std::sqrt(diff / nref) : std::sqrt(diff);
  a.cosine = nref > 0 && ngot > 0 ? dot / std::sqrt(nref * ngot) : (diff == 0 ? 1.0 : 0.0);
  return a;
}

double tolerance(DType out) { return out == DType::f32 ? 1e-5 : 1e-2; }

linear::Caps make_caps(Format f, int64_t n, int64_t k, int64_t max_tokens, DType act = DType::bf16,
                       DType out = DType::bf16, bool bias = false, DType bias_dtype = DType::bf16) {
  linear::Caps c;
  c.format = f;
  c.n = n;
  c.k = k;
  c.max_tokens = max_tokens;
  c.act_dtype = act;
  c.out_dtype = out;
  c.has_bias = bias;
  c.bias_dtype = bias_dtype;
  return c;
}

// Quantized-activation caps: the weight format the mode takes, checkpoint layout.
linear::Caps fp8_caps(ActMode act, int64_t n, int64_t k, int64_t max_tokens, DType x = DType::bf16,
                      DType out = DType::bf16) {
  const Format f = act == ActMode::fp8_tensor  ? Format::fp8_tensor
                   : act == ActMode::fp8_token ? Format::fp8_channel
                                               : Format::fp8_block;
  linear::Caps c = make_caps(f, n, k, max_tokens, x, out);
  c.act = act;
  return c;
}

linear::Caps with_kernel(linear::Caps c, linear::DecodeKernel kernel) {
  c.kernel = kernel;
  return c;
}

// Formats x activation dtypes the mma kernel serves.
size_t mma_combinations() {
  size_t n = 0;
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) n += linear::mma_supports(info.format, act) ? 1 : 0;
  return n;
}

// ---------------------------------------------------------------------------------------------
// LinearCompile: configurations

TEST(LinearCompile, SpecsCoverEveryFormatBucketAndDtype) {
  const auto specs = linear::all_kernel_specs();
  // gemv: formats x 5 buckets x 2 act x 3 out; mma and mma_tile16: served (format, act) x 2 token
  // tiles x 3 out each; mma_iq2: 2 formats x 2 act x 2 token tiles x 3 out; wgmma_tile16 (prefill):
  // the mma combinations x 3 out, with 64 / 128 / 256 tokens per CTA where the block scale folds
  // (bf16, f16, fp8, fp8_channel, nvfp4 x 2 act, mxfp4 x bf16: 9) and 64 / 128 where it is promoted
  // (fp8_block, mxfp8, q8_0, iq2_xxs, iq2_xs x 2 act, mxfp4 x f16: 11), sm_90a only; MXFP8 with BF16 x as two
  // instances (scale_split 1: the row blocks whose scales fold, 64 / 128 / 256 tokens; 2: the others,
  // 64 / 128): three more per out;
  // every unsplit one (47 per out) also as a cluster of two CTAs (x multicast); dense BF16 / F16
  // weights of x's type in the checkpoint layout: 64 / 128 / 256, alone and paired (12 per out);
  // Caps::round_weights for the 11 promoted pairs: 256, and 128 but for fp8_block x 2 act, alone and
  // paired (40 per out).
  EXPECT_EQ(mma_combinations(), 16u);  // bf16/bf16, f16/f16, and 7 formats x 2 act
  // wgmma_fp8 (quantized activations): promoted: 3 modes x 5 token tiles (16 .. 256); fast_accum:
  // fp8_tensor and fp8_token x 5 (16 .. 256); x 3 out, sm_90a only; fp8_tensor / fp8_token tiles of
  // 128 and 256 tokens also as clusters of two (4 promoted + 4 fast); wgmma_fp8_tm (fp8_block with
  // the tokens as M, 128 x 256 tiles): 3 out.
  EXPECT_EQ(specs.size(), all_formats().size() * 5 * 2 * 3 + 2 * mma_combinations() * 2 * 3 + 2 * 2 * 2 * 3 +
                              (9 * 3 + 11 * 2 + 3 + 47 + 2 * 3 * 2 + (11 + 9) * 2) * 3 + (3 * 5 + 2 * 5 + 8) * 3 + 3);
  std::set<std::string> names;
  size_t mma = 0, tile16 = 0, iq2 = 0, prefill = 0, clustered = 0, rounded = 0, fp8 = 0, fp8_tm = 0;
  for (const auto& s : specs) {
    EXPECT_TRUE(names.insert(s.name_expression).second) << "duplicate " << s.name_expression;
    if (s.kernel == "linear.wgmma_fp8") {
      ++fp8;
      EXPECT_EQ(s.source, "linear/kernels/wgmma_fp8.cuh");
      EXPECT_EQ(s.archs, (std::vector<std::string>{"sm_90a"}));
      EXPECT_EQ(s.max_registers, 168);
      continue;
    }
    if (s.kernel == "linear.wgmma_fp8_tm") {
      ++fp8_tm;
      EXPECT_EQ(s.source, "linear/kernels/wgmma_fp8_tm.cuh");
      EXPECT_EQ(s.archs, (std::vector<std::string>{"sm_90a"}));
      EXPECT_EQ(s.max_registers, 168);
      EXPECT_NE(s.describe().find("act=fp8_block"), std::string::npos) << s.describe();
      continue;
    }
    if (s.kernel == "linear.wgmma_tile16") {
      ++prefill;
      if (s.describe().find("round_weights=1") != std::string::npos) {
        ++rounded;
        EXPECT_NE(s.describe().find("scale_split=0"), std::string::npos) << s.describe();  // one instance
        EXPECT_NE(s.describe().find("dense=0"), std::string::npos) << s.describe();
      }
      if (s.describe().find("cluster=2") != std::string::npos) {
        ++clustered;
        EXPECT_NE(s.describe().find("scale_split=0"), std::string::npos) << s.describe();  // never a split instance
      }
      EXPECT_EQ(s.source, "linear/kernels/wgmma_tile16.cuh");
      EXPECT_EQ(s.archs, (std::vector<std::string>{"sm_90a"}));  // wgmma, TMA, setmaxnreg
      EXPECT_EQ(s.max_registers, 168);  // __launch_bounds__(384, 1); setmaxnreg moves registers to the consumers
      continue;
    }
    if (s.kernel == "linear.mma") {
      ++mma;
      EXPECT_EQ(s.source, "linear/kernels/mma.cuh");
      EXPECT_EQ(s.max_registers, 128);
    } else if (s.kernel == "linear.mma_tile16") {
      ++tile16;
      EXPECT_EQ(s.source, "linear/kernels/mma_tile16.cuh");
      // 3 CTAs per SM for the 8-bit formats at one token tile, else 2 (tile16_min_blocks).
      const std::string d = s.describe();
      const bool one_tile = d.find("tokens=8,") != std::string::npos;
      const bool fp4 = d.find("format=nvfp4") != std::string::npos || d.find("format=mxfp4") != std::string::npos;
      EXPECT_EQ(s.max_registers, one_tile && !fp4 ? 80 : 128) << d;
    } else if (s.kernel == "linear.mma_iq2") {
      ++iq2;
      EXPECT_EQ(s.source, "linear/kernels/mma_iq2.cuh");
      EXPECT_EQ(s.max_registers, 128) << s.describe();  // 2 CTAs per SM
    } else {
      EXPECT_EQ(s.kernel, "linear.gemv");
      EXPECT_EQ(s.source, "linear/kernels/gemv.cuh");
    }
    EXPECT_EQ(s.archs, (std::vector<std::string>{"sm_90a", "sm_120a"}));
    EXPECT_GT(s.max_registers, 0);
  }
  EXPECT_EQ(prefill, (9u * 3 + 11 * 2 + 3 + 47 + 2 * 3 * 2 + (11 + 9) * 2) * 3);
  EXPECT_EQ(clustered, (47u + 2 * 3 + 11 + 9) * 3);
  EXPECT_EQ(rounded, (11u + 9) * 2 * 3);
  EXPECT_EQ(fp8, (3u * 5 + 2 * 5 + 8) * 3);
  EXPECT_EQ(fp8_tm, 3u);
  EXPECT_EQ(mma, mma_combinations() * 2 * 3);
  EXPECT_EQ(tile16, mma_combinations() * 2 * 3);
  EXPECT_EQ(iq2, 2u * 2 * 2 * 3);
  // Every spec a plan can resolve, with either kernel or layout, is registered (CI compiles these).
  for (const auto& info : all_formats())
    for (int64_t t = 1; t <= 16; ++t)
      for (DType act : {DType::bf16, DType::f16})
        for (DType out : {DType::bf16, DType::f16, DType::f32})
          for (auto kernel : {linear::DecodeKernel::automatic, linear::DecodeKernel::gemv}) {
            const auto caps = with_kernel(make_caps(info.format, 300, 256 * 3, t, act, out, t % 2 == 0), kernel);
            for (const auto& s : linear::kernel_specs(caps)) EXPECT_TRUE(names.count(s.name_expression)) << s.describe();
            if (kernel == linear::DecodeKernel::automatic && linear::tile16_supports(info.format, act)) {
              auto tiled = make_caps(info.format, 304, 256 * 3, t, act, out, t % 2 == 0);
              tiled.layout = WeightLayout::tile16;
              for (const auto& s : linear::kernel_specs(tiled)) EXPECT_TRUE(names.count(s.name_expression)) << s.describe();
            }
          }
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      if (!linear::prefill_supports(info.format, act)) continue;
      for (int64_t t : {17, 64, 100, 128, 129, 4096}) {
        auto tiled = make_caps(info.format, 304, 256 * 3, t, act, DType::f32, true);
        tiled.layout = WeightLayout::tile16;
        for (const auto& s : linear::kernel_specs(tiled)) EXPECT_TRUE(names.count(s.name_expression)) << s.describe();
      }
    }
  // Quantized activations: every token count's GEMM is registered (the quantize kernel is in the
  // quantize family's list).
  for (ActMode act : {ActMode::fp8_tensor, ActMode::fp8_token, ActMode::fp8_block})
    for (DType xd : {DType::bf16, DType::f32, DType::f8_e4m3})
      for (int64_t t : {1, 17, 33, 100, 128, 129, 300, 4096}) {
        for (bool fast : {false, true}) {
          auto c = fp8_caps(act, 300, 1024, t, xd, DType::f16);
          c.fast_accum = fast && act != ActMode::fp8_block;
          for (const auto& s : linear::kernel_specs(c))
            if (s.kernel == "linear.wgmma_fp8") EXPECT_TRUE(names.count(s.name_expression)) << s.describe();
            else EXPECT_EQ(s.kernel, "quantize.activations");
        }
      }
}

TEST(LinearCompile, PrefillPathsServeTheirTokenRanges) {
  // max_tokens 4096: the 5 decode buckets, then 64, 128 (64 / 128 tokens per CTA) and 4096 (256).
  linear::Caps caps = make_caps(Format::fp8_tensor, 28672, 8192, 4096);
  caps.layout = WeightLayout::tile16;
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).cluster, 1);  // CTA pairs are opt-in (B12X_CLUSTERS=1)
  const test::ScopedEnv clusters("B12X_CLUSTERS", "1");
  std::vector<int64_t> maxima;
  std::vector<int> per_cta;
  for (int64_t t : {1, 2, 4, 8, 16, 64, 128, 4096}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132);
    maxima.push_back(p.max_tokens);
    per_cta.push_back(p.tokens_per_cta);
    if (t > 16) {
      EXPECT_EQ(p.name.rfind("prefill.wgmma_tile16{", 0), 0u) << p.name;
      EXPECT_EQ(p.block.x, 384u);
      EXPECT_EQ(p.grid.y, 28672u / 128);
      EXPECT_LE(p.smem_bytes, 227u * 1024) << p.name;  // the H200's opt-in limit per block
      EXPECT_EQ(p.cluster, 2) << p.name;  // 224 row blocks: pairs sharing x by multicast
      EXPECT_NE(p.spec.describe().find("cluster=2"), std::string::npos) << p.spec.describe();
      EXPECT_NE(p.name.find("cluster=1x2"), std::string::npos) << p.name;
    } else {
      EXPECT_EQ(p.name.rfind("decode.mma_tile16{", 0), 0u) << p.name;
    }
  }
  EXPECT_EQ(maxima, (std::vector<int64_t>{1, 2, 4, 8, 16, 64, 128, 4096}));
  EXPECT_EQ(per_cta, (std::vector<int>{0, 0, 0, 0, 0, 64, 128, 256}));
  EXPECT_EQ(linear::plan_path(caps, 65, 132).max_tokens, 128);
  EXPECT_EQ(linear::plan_path(caps, 129, 132).max_tokens, 4096);
  // N = 4096 (32 row CTAs): 256-token CTAs fill 132 SMs from M = 1025 on; below that 128 per CTA.
  caps.n = 4096;
  EXPECT_EQ(linear::plan_path(caps, 129, 132).max_tokens, 1024);
  EXPECT_EQ(linear::plan_path(caps, 1024, 132).tokens_per_cta, 128);
  EXPECT_EQ(linear::plan_path(caps, 1025, 132).tokens_per_cta, 256);
  EXPECT_EQ(linear::plan_path(caps, 1025, 132).max_tokens, 4096);
  EXPECT_EQ(linear::plan_path(caps, 1025, 16).max_tokens, 4096);  // 16 SMs: no 128-token bucket above 128
  EXPECT_EQ(linear::plan_path(caps, 200, 16).tokens_per_cta, 256);
  // Clusters only where the row blocks pair up: 4096 + 128 rows = 33 blocks run alone, one block too.
  caps.n = 4096 + 128;
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).cluster, 1);
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).spec.describe().find("cluster"), std::string::npos);
  caps.n = 128;
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).cluster, 1);
  caps.n = 4096 + 256;
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).cluster, 2);
  caps.n = 28672;
  // Promoted block scales (fp8_block, mxfp8, q8_0, mxfp4 with F16 x): at most 128 tokens per CTA.
  for (const auto& [f, act] : {std::pair{Format::mxfp8, DType::f16}, std::pair{Format::q8_0, DType::f16},
                               std::pair{Format::fp8_block, DType::bf16}, std::pair{Format::mxfp4, DType::f16}}) {
    linear::Caps pc = make_caps(f, 4096, 8192, 4096, act);
    pc.layout = WeightLayout::tile16;
    EXPECT_EQ(linear::plan_path(pc, 64, 132).tokens_per_cta, 64);
    EXPECT_EQ(linear::plan_path(pc, 65, 132).tokens_per_cta, 128);
    EXPECT_EQ(linear::plan_path(pc, 65, 132).max_tokens, 128);
    EXPECT_EQ(linear::plan_path(pc, 4096, 132).tokens_per_cta, 128);
    EXPECT_EQ(linear::plan_path(pc, 129, 132).max_tokens, 4096);
    // mma_tile16 x 2 token tiles, wgmma 64 and 128.
    EXPECT_EQ(linear::kernel_specs(pc).size(), 4u);
    EXPECT_TRUE(linear::plan_path(pc, 4096, 132).split_spec.kernel.empty());
    EXPECT_EQ(linear::plan_path(pc, 4096, 132).split_tokens_per_cta, 0);
  }
  // MXFP8 with BF16 x: two instances, each on its own grid. The fold instance promotes nothing and
  // takes the unpromoted formats' buckets (256 tokens at M = 4096); the promote one min(bucket, 128).
  {
    linear::Caps pc = make_caps(Format::mxfp8, 4096, 8192, 4096, DType::bf16);
    pc.layout = WeightLayout::tile16;
    const linear::PlanPath p = linear::plan_path(pc, 4096, 132);
    EXPECT_EQ(p.tokens_per_cta, 256);
    EXPECT_EQ(p.split_tokens_per_cta, 128);
    EXPECT_EQ(p.smem_bytes, static_cast<size_t>(device::wgmma_smem_bytes(device::kFmtMxfp8, 256)));
    EXPECT_EQ(p.split_smem_bytes, static_cast<size_t>(device::wgmma_smem_bytes(device::kFmtMxfp8, 128)));
    EXPECT_EQ(p.spec.describe(), "linear.wgmma_tile16{format=mxfp8, tokens_per_cta=256, act=bf16, out=bf16, scale_split=1}");
    EXPECT_EQ(p.split_spec.describe(),
              "linear.wgmma_tile16{format=mxfp8, tokens_per_cta=128, act=bf16, out=bf16, scale_split=2}");
    EXPECT_NE(p.name.find("scales=fold|promote (two launches; promote: tokens_per_cta=128"), std::string::npos) << p.name;
    EXPECT_EQ(p.cluster, 1);  // its CTAs decide one by one which instance runs them
    EXPECT_EQ(linear::plan_path(pc, 64, 132).split_tokens_per_cta, 64);
    EXPECT_EQ(linear::plan_path(pc, 65, 132).tokens_per_cta, 128);
    EXPECT_EQ(linear::plan_path(pc, 65, 132).split_tokens_per_cta, 128);
    // mma_tile16 x 2 token tiles; fold 64 / 128 / 256; promote 64 / 128.
    EXPECT_EQ(linear::kernel_specs(pc).size(), 7u);
  }
  EXPECT_EQ(linear::plan_path([&] {
              linear::Caps c = caps;
              c.format = Format::mxfp4;  // BF16 x: the scale folds, 256 tokens per CTA
              return c;
            }(), 4096, 132).tokens_per_cta, 256);
  // IQ2: promoted like Q8_0: 64 tokens per CTA up to M = 64, then 128.
  for (const auto& [f, act] : {std::pair{Format::iq2_xxs, DType::bf16}, std::pair{Format::iq2_xs, DType::f16}}) {
    linear::Caps c = caps;
    c.format = f, c.act_dtype = act, c.max_tokens = 8192;
    for (int64_t m : {17, 64, 65, 128, 129, 4096, 8192}) {
      const linear::PlanPath p = linear::plan_path(c, m, 132);
      EXPECT_EQ(p.tokens_per_cta, m <= 64 ? 64 : 128) << p.name;
      EXPECT_EQ(p.spec.kernel, "linear.wgmma_tile16") << p.name;
      EXPECT_GE(p.max_tokens, m);
    }
    EXPECT_EQ(linear::kernel_specs(c).size(), 4u);  // mma_iq2 x 2 token tiles, wgmma 64 and 128
  }
  // B12X_PREFILL_TOKENS_PER_CTA caps the tile (A/B measurements); anything but 64 / 128 / 256 is refused.
  {
    linear::Caps c = caps;
    c.max_tokens = 8192;
    {
      test::ScopedEnv cap("B12X_PREFILL_TOKENS_PER_CTA", "64");
      for (Format f : {Format::q8_0, Format::bf16, Format::mxfp8}) {
        c.format = f;
        EXPECT_EQ(linear::plan_path(c, 4096, 132).tokens_per_cta, 64) << format_info(f).name;
      }
      EXPECT_EQ(linear::plan_path(c, 4096, 132).split_tokens_per_cta, 64);  // MXFP8's promote instance too
    }
    {
      test::ScopedEnv cap("B12X_PREFILL_TOKENS_PER_CTA", "96");
      expect_bad_argument([&] { linear::plan_path(c, 4096, 132); }, "B12X_PREFILL_TOKENS_PER_CTA");
    }
    c.format = Format::bf16;
    EXPECT_EQ(linear::plan_path(c, 4096, 132).tokens_per_cta, 256);  // unset again
  }
  // BF16 / F16 weights of x's type as stored (checkpoint layout): the dense prefill kernel, 256 tokens.
  for (const auto& [f, act] : {std::pair{Format::bf16, DType::bf16}, std::pair{Format::f16, DType::f16}}) {
    linear::Caps c = make_caps(f, 28672, 8192, 4096, act);
    EXPECT_TRUE(linear::prefill_supports(f, act, WeightLayout::checkpoint));
    const linear::PlanPath p = linear::plan_path(c, 4096, 132);
    EXPECT_EQ(p.kind, linear::PathKind::prefill);
    EXPECT_EQ(p.tokens_per_cta, 256);
    EXPECT_NE(p.spec.describe().find("dense=1"), std::string::npos) << p.spec.describe();
    EXPECT_EQ(p.name.rfind("prefill.wgmma_tile16{dense", 0), 0u) << p.name;
  }
  EXPECT_FALSE(linear::prefill_supports(Format::bf16, DType::f16, WeightLayout::checkpoint));
  EXPECT_FALSE(linear::prefill_supports(Format::fp8_tensor, DType::bf16, WeightLayout::checkpoint));
  // A small max_tokens: one prefill path of max_tokens itself.
  caps.max_tokens = 40;
  EXPECT_EQ(linear::plan_path(caps, 40, 132).max_tokens, 40);
  EXPECT_EQ(linear::plan_path(caps, 17, 132).tokens_per_cta, 64);
  EXPECT_EQ(linear::kernel_specs(caps).size(), 3u);  // mma_tile16 x 2 token tiles, wgmma 64
  // Every stage layout fits shared memory for every format and tokens per CTA.
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      if (!linear::prefill_supports(info.format, act)) continue;
      for (int bn : {64, 128, 256}) {
        const int f = static_cast<int>(info.format);
        // (round_weights: the promoted formats at 256 tokens too)
        if (bn > device::wgmma_max_tokens_per_cta(f, act == DType::bf16 ? device::kActBf16 : device::kActF16, true)) continue;
        EXPECT_GE(device::wgmma_stages(f, bn), 3) << info.name << " " << bn;
        EXPECT_LE(device::wgmma_smem_bytes(f, bn), 227 * 1024) << info.name << " " << bn;
        // The output staging fits the ring (IQ2_XS at 256 tokens, round_weights only: its 64 KiB codebook
        // leaves 3 stages, and the ring is sized for the staging instead: wgmma_ring_bytes).
        if (!(info.format == Format::iq2_xs && bn == 256)) {
          EXPECT_LE(device::wgmma_out_bytes(bn), device::wgmma_stages(f, bn) * device::wgmma_stage_bytes(f, bn));
        }
      }
    }
}

// Caps::round_weights: the formats whose block scales are otherwise promoted take 256-token tiles
// with the weights rounded (one instance, also MXFP8 with BF16 x), and round on 128-token tiles but
// for fp8_block; 64-token tiles, the other formats and the decode path are unchanged; fp8
// activations refuse it, and 16-bit activations refuse fast_accum.
TEST(LinearCompile, RoundWeightsTakesWideTilesWhereItApplies) {
  const std::set<std::pair<Format, DType>> rounding = {
      {Format::fp8_block, DType::bf16}, {Format::fp8_block, DType::f16}, {Format::mxfp8, DType::bf16},
      {Format::mxfp8, DType::f16},      {Format::q8_0, DType::bf16},     {Format::q8_0, DType::f16},
      {Format::iq2_xxs, DType::bf16},   {Format::iq2_xxs, DType::f16},   {Format::iq2_xs, DType::bf16},
      {Format::iq2_xs, DType::f16},     {Format::mxfp4, DType::f16}};
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16, DType::f32})
      EXPECT_EQ(linear::rounds_weights(info.format, act), rounding.count({info.format, act}) == 1)
          << info.name << " " << dtype_name(act);
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      if (!linear::prefill_supports(info.format, act)) continue;
      linear::Caps c = make_caps(info.format, 8192, 8192, 4096, act);
      c.layout = WeightLayout::tile16;
      const linear::PlanPath exact = linear::plan_path(c, 4096, 132), exact_decode = linear::plan_path(c, 8, 132);
      const linear::PlanPath exact64 = linear::plan_path(c, 40, 132), exact128 = linear::plan_path(c, 128, 132);
      c.round_weights = true;
      const linear::PlanPath p = linear::plan_path(c, 4096, 132), decode = linear::plan_path(c, 8, 132);
      const linear::PlanPath p64 = linear::plan_path(c, 40, 132), p128 = linear::plan_path(c, 128, 132);
      const std::string what = std::string(info.name) + " " + std::string(dtype_name(act)) + ": " + p.name;
      EXPECT_EQ(decode.spec.name_expression, exact_decode.spec.name_expression) << what;  // decode stays exact
      EXPECT_FALSE(decode.rounds_weights || exact.rounds_weights || exact128.rounds_weights) << what;
      // 64-token tiles never round (slower there), so their path is the exact one.
      EXPECT_EQ(p64.tokens_per_cta, 64) << what;
      EXPECT_FALSE(p64.rounds_weights) << what;
      EXPECT_EQ(p64.spec.name_expression, exact64.spec.name_expression) << what;
      EXPECT_EQ(p128.tokens_per_cta, 128) << what;
      const bool rounds128 = linear::rounds_weights(info.format, act) && info.format != Format::fp8_block;
      EXPECT_EQ(p128.rounds_weights, rounds128) << p128.name;
      if (!rounds128) {
        EXPECT_EQ(p128.spec.name_expression, exact128.spec.name_expression) << p128.name;
      }
      if (!linear::rounds_weights(info.format, act)) {
        EXPECT_EQ(p.spec.name_expression, exact.spec.name_expression) << what;
        EXPECT_EQ(p.name, exact.name) << what;
        continue;
      }
      // Exact: promoted at 128 tokens (MXFP8 with BF16 x: the promote instance of its pair).
      EXPECT_EQ(exact.split_spec.name_expression.empty() ? exact.tokens_per_cta : exact.split_tokens_per_cta, 128) << what;
      EXPECT_EQ(p.tokens_per_cta, 256) << what;
      EXPECT_TRUE(p.rounds_weights) << what;
      EXPECT_NE(p.name.find("weights rounded to " + std::string(dtype_name(act))), std::string::npos) << what;
      EXPECT_NE(p.spec.describe().find("round_weights=1"), std::string::npos) << p.spec.describe();
      EXPECT_TRUE(p.split_spec.name_expression.empty()) << what;  // MXFP8: no fold / promote pair
    }
  linear::Caps fp8 = make_caps(Format::fp8_tensor, 4096, 4096, 64);
  fp8.act = ActMode::fp8_tensor;
  fp8.round_weights = true;
  expect_bad_argument([&] { linear::plan(fp8); }, "round_weights");
  linear::Caps a16 = make_caps(Format::fp8_tensor, 4096, 4096, 64);
  a16.fast_accum = true;
  expect_bad_argument([&] { linear::plan(a16); }, "fast_accum");
}

// round_decoded_weight (the reference's Caps::round_weights): RNE of each element to x's type for
// the formats rounds_weights names, nothing for the others.
TEST(LinearCompile, ReferenceRoundsTheDecodedWeightOnlyWhereTheKernelsDo) {
  std::mt19937_64 rng(7);
  for (Format f : {Format::q8_0, Format::fp8_block, Format::fp8_channel, Format::nvfp4})
    for (DType act : {DType::bf16, DType::f16, DType::f32}) {
      const PackedWeight p = test::random_weight(f, 32, 256, rng, test::kLinearDraw);
      HostTensor w(DType::f32, {32, 256}), r(DType::f32, {32, 256});
      dequantize_weight(p.view(), w.view(), false);
      dequantize_weight(p.view(), r.view(), false);
      round_decoded_weight(f, act, r.view());
      int64_t changed = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const float v = w.ptr<float>()[i], want = !linear::rounds_weights(f, act) ? v
                                                   : act == DType::bf16 ? bf16_to_f32(f32_to_bf16(v))
                                                                        : f16_to_f32(f32_to_f16(v));
        EXPECT_EQ(std::memcmp(&r.ptr<float>()[i], &want, 4), 0) << format_info(f).name << " " << i;
        changed += r.ptr<float>()[i] != v;
      }
      // Where it rounds, random Q8_0 / fp8_block products need more bits than the 16-bit types hold.
      if (linear::rounds_weights(f, act)) EXPECT_GT(changed, w.numel() / 4) << format_info(f).name;
      else EXPECT_EQ(changed, 0) << format_info(f).name;
    }
}

TEST(LinearCompile, PrefillSplitsKWhereItsCtasLeaveSmsIdle) {
  // N = 4096 (32 row blocks), K = 14336 (224 stages), 132 SMs.
  auto caps = make_caps(Format::nvfp4, 4096, 14336, 128);
  caps.layout = WeightLayout::tile16;
  // M <= 64: 32 CTAs -> 4 splits (128 CTAs, one wave of 56 stages each); the name says so.
  const linear::PlanPath p64 = linear::plan_path(caps, 64, 132);
  EXPECT_EQ(p64.tokens_per_cta, 64);
  EXPECT_EQ(p64.ksplit, 4) << p64.name;
  EXPECT_NE(p64.name.find("split-K"), std::string::npos) << p64.name;
  EXPECT_EQ(linear::plan_path(caps, 128, 132).ksplit, 4);
  // Its buffers: the larger bucket's 32 tiles x 4 splits x 128 tokens x 128 rows of FP32, 32 counters.
  const ScratchLayout l = linear::plan_scratch(caps, {p64, linear::plan_path(caps, 128, 132)}, 132);
  EXPECT_EQ(l.offset("linear.prefill_partials"), 0u);
  EXPECT_GE(l.bytes(), 32u * 4 * 128 * 128 * 4 + 32 * 4);
  EXPECT_GE(l.offset("linear.prefill_counters"), 32u * 4 * 128 * 128 * 4);
  // Enough CTAs (N = 28672: 224 row blocks), or too few stages to share (K = 512), never split.
  caps.n = 28672;
  EXPECT_EQ(linear::plan_path(caps, 64, 132).ksplit, 1);
  EXPECT_EQ(linear::plan_scratch(caps, {linear::plan_path(caps, 64, 132)}, 132).bytes(), 0u);
  caps.n = 4096, caps.k = 512;
  EXPECT_EQ(linear::plan_path(caps, 64, 132).ksplit, 1);
  // 64 row blocks at K = 8192: 2 splits up to M = 128 (64 -> 128 CTAs); from M = 129 on 128 CTAs
  // or more: splitting would add a wave.
  caps.n = 8192, caps.k = 8192, caps.max_tokens = 4096;
  EXPECT_EQ(linear::plan_path(caps, 64, 132).ksplit, 2);
  EXPECT_EQ(linear::plan_path(caps, 128, 132).ksplit, 2);
  EXPECT_EQ(linear::plan_path(caps, 129, 132).ksplit, 1);
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).ksplit, 1);
  // MXFP8 with BF16 x (two kernel instances) and CTA pairs never split.
  caps.n = 4096, caps.k = 14336, caps.max_tokens = 64;
  caps.format = Format::mxfp8;
  EXPECT_EQ(linear::plan_path(caps, 64, 132).ksplit, 1);
  caps.format = Format::fp8_tensor;
  {
    test::ScopedEnv pairs("B12X_CLUSTERS", "1");
    EXPECT_EQ(linear::plan_path(caps, 64, 132).cluster, 2);
    EXPECT_EQ(linear::plan_path(caps, 64, 132).ksplit, 1);
  }
  EXPECT_EQ(linear::plan_path(caps, 64, 132).ksplit, 4);
}

// The prefill kernel's split-K stage ranges: consecutive, covering every stage once, each split
// non-empty wherever the plan may split (>= 8 stages a split), and for fp8_block (align 2) starting
// at even stages, so that a 128-K block's two stages meet in one CTA; align 1 is the plain share.
TEST(LinearCompile, PrefillSplitStageRangesPartitionKInWholeBlocks) {
  for (int align : {1, 2})
    for (int stages = 1; stages <= 200; ++stages)
      for (int splits = 1; splits <= 8; ++splits) {
        SCOPED_TRACE("align " + std::to_string(align) + " stages " + std::to_string(stages) + " splits " +
                     std::to_string(splits));
        int next = 0;
        for (int z = 0; z < splits; ++z) {
          const dev::WgmmaStageRange r = dev::wgmma_split_stages(z, splits, stages, align);
          EXPECT_EQ(r.begin, next);
          EXPECT_EQ(r.begin % align, 0);
          EXPECT_LE(r.begin, r.end);
          if (stages >= 8 * splits) {
            EXPECT_LT(r.begin, r.end);
          }
          if (align == 1) {
            EXPECT_EQ(r.begin, static_cast<int>(static_cast<long long>(z) * stages / splits));
          }
          next = r.end;
        }
        EXPECT_EQ(next, stages);
      }
}

TEST(LinearCompile, Tile16WeightsUseTheTile16KernelAtEveryTokenCount) {
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      auto caps = make_caps(info.format, 28672, 8192, 16, act);
      caps.layout = WeightLayout::tile16;
      if (!linear::tile16_supports(info.format, act)) {
        try {
          linear::validate_caps(caps);
          ADD_FAILURE() << "tile16 accepted for " << info.name << " with " << dtype_name(act);
        } catch (const Unsupported& e) {
          EXPECT_NE(std::string(e.what()).find("tile16"), std::string::npos) << e.what();
        }
        continue;
      }
      const bool iq2 = info.format == Format::iq2_xxs || info.format == Format::iq2_xs;
      const std::string kernel = iq2 ? "mma_iq2" : "mma_tile16";
      for (int64_t t = 1; t <= 16; ++t) {
        const linear::PlanPath p = linear::plan_path(caps, t, 132);
        EXPECT_EQ(p.spec.kernel, "linear." + kernel) << info.name << " M=" << t;  // Q8_0 at M = 1 too
        EXPECT_EQ(p.name.rfind("decode." + kernel + "{tokens=" + std::string(t <= 8 ? "8" : "16"), 0), 0u) << p.name;
        // The ring (and IQ2's codebook) fits next to the static buffers at the CTAs per SM that the
        // launch bounds promise: tile16_min_blocks (3 or 2; IQ2: 2; 228 KiB per SM).
        const int ctas = iq2 ? 2 : dev::tile16_min_blocks(static_cast<int>(info.format), t <= 8 ? 1 : 2);
        EXPECT_GT(p.smem_bytes, 0u);
        EXPECT_LE(ctas * (p.smem_bytes + 8 * 4 * 4 * 32 * (t <= 8 ? 1 : 2) + 1024 + 1024), 228u * 1024) << p.name;
        const int64_t rows_per_cta = (p.block.x / 32 / p.ksplit) * 16;
        EXPECT_EQ(p.block.x % (32 * p.ksplit), 0u) << p.name;
        EXPECT_EQ(p.grid.x, static_cast<unsigned>((caps.n + rows_per_cta - 1) / rows_per_cta));
      }
    }
  // tile16 refuses the gemv kernel and N that is not a multiple of 16.
  auto caps = make_caps(Format::nvfp4, 4096, 4096, 4);
  caps.layout = WeightLayout::tile16;
  try {
    linear::validate_caps(with_kernel(caps, linear::DecodeKernel::gemv));
    ADD_FAILURE() << "tile16 accepted DecodeKernel::gemv";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("DecodeKernel::gemv"), std::string::npos) << e.what();
  }
  caps.n = 4104;
  expect_bad_argument([&] { linear::validate_caps(caps); }, "n", {"multiple of 16", "4104"});
  // The recommendation: tile16 where a tile16 kernel serves the format, except 16-bit weights.
  EXPECT_EQ(linear::preferred_layout(Format::fp8_tensor, DType::bf16), WeightLayout::tile16);
  EXPECT_EQ(linear::preferred_layout(Format::q8_0, DType::f16), WeightLayout::tile16);
  EXPECT_EQ(linear::preferred_layout(Format::nvfp4, DType::bf16), WeightLayout::tile16);
  EXPECT_EQ(linear::preferred_layout(Format::bf16, DType::bf16), WeightLayout::checkpoint);
  EXPECT_EQ(linear::preferred_layout(Format::iq2_xs, DType::bf16), WeightLayout::tile16);
  EXPECT_EQ(linear::preferred_layout(Format::iq2_xxs, DType::f16), WeightLayout::tile16);
  EXPECT_FALSE(linear::tile16_supports(Format::bf16, DType::f16));
  EXPECT_TRUE(linear::tile16_supports(Format::iq2_xs, DType::bf16));
  for (const auto& info : all_formats()) {
    if (linear::preferred_layout(info.format, DType::bf16) == WeightLayout::tile16) {
      EXPECT_TRUE(has_tile16_layout(info.format)) << info.name;
    }
  }
}

TEST(LinearCompile, AutomaticPicksMmaWhereItServesTheFormat) {
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      const auto caps = make_caps(info.format, 4096, 4096, 16, act);
      const bool mma = linear::mma_supports(info.format, act);
      EXPECT_EQ(linear::kernel_spec(caps).kernel, mma ? "linear.mma" : "linear.gemv") << info.name;
      EXPECT_EQ(linear::kernel_spec(with_kernel(caps, linear::DecodeKernel::gemv)).kernel, "linear.gemv");
      if (mma) {
        EXPECT_EQ(linear::kernel_spec(with_kernel(caps, linear::DecodeKernel::mma)).kernel, "linear.mma");
      } else {
        try {
          linear::kernel_spec(with_kernel(caps, linear::DecodeKernel::mma));
          ADD_FAILURE() << "mma accepted " << info.name << " with " << dtype_name(act);
        } catch (const Unsupported& e) {
          EXPECT_NE(std::string(e.what()).find("mma decode kernel does not serve"), std::string::npos) << e.what();
        }
      }
    }
  EXPECT_FALSE(linear::mma_supports(Format::bf16, DType::f16));
  EXPECT_FALSE(linear::mma_supports(Format::f16, DType::bf16));
  // Q8_0: gemv for 1-2 tokens (faster there), mma from 4.
  const auto q8 = make_caps(Format::q8_0, 4096, 4096, 16);
  EXPECT_EQ(linear::plan_path(q8, 1, 132).spec.kernel, "linear.gemv");
  EXPECT_EQ(linear::plan_path(q8, 2, 132).spec.kernel, "linear.gemv");
  EXPECT_EQ(linear::plan_path(q8, 3, 132).spec.kernel, "linear.mma");
  EXPECT_EQ(linear::plan_path(with_kernel(q8, linear::DecodeKernel::mma), 1, 132).spec.kernel, "linear.mma");
  EXPECT_EQ(linear::plan_path(make_caps(Format::fp8_tensor, 4096, 4096, 16), 1, 132).spec.kernel, "linear.mma");
  EXPECT_FALSE(linear::mma_supports(Format::iq2_xs, DType::bf16));
  EXPECT_FALSE(linear::mma_supports(Format::iq2_xxs, DType::f16));
  EXPECT_TRUE(linear::mma_supports(Format::q8_0, DType::bf16));
  EXPECT_TRUE(linear::mma_supports(Format::nvfp4, DType::f16));
}

// mma_tile16's K split: the smallest giving 1.5 CTAs per SM (choose_mma_ksplit). 28672 x 8192
// (1792 tiles): one warp per tile, at one or two token tiles and for every format;
// 4096 x 14336 (256 tiles): 8 warps per tile, 256 CTAs; 8192 x 8192: 4 warps, 256 CTAs.
TEST(LinearCompile, Tile16KsplitGivesOneAndAHalfCtasPerSm) {
  for (Format f : {Format::fp8_tensor, Format::fp8_block, Format::mxfp8, Format::nvfp4, Format::mxfp4, Format::q8_0}) {
    SCOPED_TRACE(format_info(f).name);
    auto tile16_caps = [f](int64_t n, int64_t k) {
      auto c = make_caps(f, n, k, 16);
      c.layout = WeightLayout::tile16;
      return c;
    };
    for (int64_t m : {1, 8, 16}) {  // 7 warps per CTA (choose_tile16_warps): 256 CTAs
      const linear::PlanPath p = linear::plan_path(tile16_caps(28672, 8192), m, 132);
      EXPECT_EQ(p.ksplit, 1) << p.name;
      EXPECT_EQ(p.block.x, 224u) << p.name;
      EXPECT_EQ(p.grid.x, 256u) << p.name;
    }
    EXPECT_EQ(linear::plan_path(tile16_caps(4096, 14336), 1, 132).ksplit, 8);
    EXPECT_EQ(linear::plan_path(tile16_caps(8192, 8192), 4, 132).ksplit, 4);
    EXPECT_EQ(linear::plan_path(tile16_caps(8192, 8192), 4, 132).grid.x, 256u);
    EXPECT_EQ(linear::plan_path(tile16_caps(8192, 8192), 4, 132).block.x, 256u);
    EXPECT_EQ(linear::plan_path(tile16_caps(4096, 14336), 1, 8).ksplit, 1);  // 32 CTAs on 8 SMs
    // choose_tile16_warps: 57344 x 8192, 3584 tiles: 7 warps (512 CTAs, 28 warps of work on the
    // busiest SM against 32 with 8); 128256 x 4096, 8016 tiles: 7 would give 63 against 64, under 5%.
    EXPECT_EQ(linear::plan_path(tile16_caps(57344, 8192), 1, 132).block.x, 224u);
    EXPECT_EQ(linear::plan_path(tile16_caps(57344, 8192), 1, 132).grid.x, 512u);
    EXPECT_EQ(linear::plan_path(tile16_caps(128256, 4096), 1, 132).block.x, 256u);
    EXPECT_EQ(linear::plan_path(tile16_caps(128256, 4096), 1, 132).grid.x, 1002u);
  }
}

// B12X_DECODE_KSPLIT caps the decode mma kernels' K split (an A/B knob): 4096 x 14336 at one token
// splits each tile's K over 8 warps (256 CTAs); capped at 2, two tiles share a CTA of 4 warps (128
// CTAs, choose_tile16_warps: 4 warps of work on the busiest SM against 8 with 64 CTAs of 8 warps).
TEST(LinearCompile, DecodeKsplitEnvCapsTheMmaSplit) {
  auto caps = make_caps(Format::fp8_tensor, 4096, 14336, 16);
  caps.layout = WeightLayout::tile16;
  const linear::PlanPath unset = linear::plan_path(caps, 1, 132);
  EXPECT_EQ(unset.ksplit, 8) << unset.name;
  EXPECT_EQ(unset.grid.x, 256u) << unset.name;
  {
    const test::ScopedEnv cap("B12X_DECODE_KSPLIT", "2");
    const linear::PlanPath p = linear::plan_path(caps, 1, 132);
    EXPECT_EQ(p.ksplit, 2) << p.name;
    EXPECT_EQ(p.block.x, 128u) << p.name;
    EXPECT_EQ(p.grid.x, 128u) << p.name;
    EXPECT_NE(p.name.find("ksplit=2"), std::string::npos) << p.name;
    const test::ScopedEnv warps("B12X_DECODE_CTA_WARPS", "8");  // forced: four tiles per CTA
    EXPECT_EQ(linear::plan_path(caps, 1, 132).grid.x, 64u);
    const test::ScopedEnv odd("B12X_DECODE_CTA_WARPS", "5");  // not a multiple of ksplit: the choice
    EXPECT_EQ(linear::plan_path(caps, 1, 132).grid.x, 128u);
  }
  {
    const test::ScopedEnv warps("B12X_DECODE_CTA_WARPS", "9");
    expect_bad_argument([&] { linear::plan_path(caps, 1, 132); }, "B12X_DECODE_CTA_WARPS");
  }
  {
    const test::ScopedEnv cap("B12X_DECODE_KSPLIT", "16");  // not a split the kernels take
    expect_bad_argument([&] { linear::plan_path(caps, 1, 132); }, "B12X_DECODE_KSPLIT");
  }
  const test::ScopedEnv cap("B12X_DECODE_KSPLIT", "8");  // the cap at the choice: no change
  EXPECT_EQ(linear::plan_path(caps, 1, 132).ksplit, 8);
}

TEST(LinearCompile, TokenBucketsMapToOneSpecEach) {
  // gemv: kernel_specs(max_tokens) = one spec per bucket up to max_tokens's; kernel_spec = the last.
  const std::vector<size_t> expected_count = {0, 1, 2, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5};
  for (int64_t t = 1; t <= 16; ++t) {
    const linear::Caps caps = with_kernel(make_caps(Format::nvfp4, 4096, 14336, t), linear::DecodeKernel::gemv);
    const auto specs = linear::kernel_specs(caps);
    ASSERT_EQ(specs.size(), expected_count[t]) << "max_tokens " << t;
    EXPECT_EQ(specs.back().name_expression, linear::kernel_spec(caps).name_expression);
    const int64_t bucket = t <= 1 ? 1 : t <= 2 ? 2 : t <= 4 ? 4 : t <= 8 ? 8 : 16;
    EXPECT_EQ(specs.back().describe(), "linear.gemv{format=nvfp4, m_bucket=" + std::to_string(bucket) +
                                           ", act=bf16, out=bf16, rows_per_warp=" +
                                           std::to_string(bucket == 16 ? 1 : 2) + "}");
    // Token counts of one bucket give one spec; the bias and the shape give no new spec.
    EXPECT_EQ(linear::kernel_spec(with_kernel(make_caps(Format::nvfp4, 300, 256, bucket, DType::bf16, DType::bf16,
                                                        true, DType::f32),
                                              linear::DecodeKernel::gemv))
                  .name_expression,
              specs.back().name_expression);
  }
  // mma: one kernel for 1..8 tokens, a second for 9..16.
  for (int64_t t = 1; t <= 16; ++t) {
    const auto specs = linear::kernel_specs(make_caps(Format::nvfp4, 4096, 14336, t));
    ASSERT_EQ(specs.size(), t <= 8 ? 1u : 2u) << "max_tokens " << t;
    EXPECT_EQ(specs.back().describe(),
              "linear.mma{format=nvfp4, tokens=" + std::string(t <= 8 ? "8" : "16") + ", act=bf16, out=bf16}");
  }
}

TEST(LinearCompile, PlanPathsCoverTheirTokensAndSplitKOnlyForSmallN) {
  // A plan for max_tokens = 5 serves 1, 2, 3-4 and 5 (bucket 8) with four paths.
  const linear::Caps caps = with_kernel(make_caps(Format::iq2_xs, 4096, 14336, 5), linear::DecodeKernel::gemv);
  std::vector<int64_t> maxima;
  for (int64_t t : {1, 2, 4, 5}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132);
    maxima.push_back(p.max_tokens);
    EXPECT_EQ(p.kernel, nullptr);
    EXPECT_EQ(p.block.x, 256u);
    const int64_t rows_per_cta = (8 / p.ksplit) * p.rows_per_warp;
    EXPECT_EQ(p.grid.x, static_cast<unsigned>((caps.n + rows_per_cta - 1) / rows_per_cta));
    EXPECT_NE(p.name.find("decode.gemv{m_bucket="), std::string::npos) << p.name;
  }
  EXPECT_EQ(maxima, (std::vector<int64_t>{1, 2, 4, 5}));
  // gemv. Large N: no split; small N: split K so that the grid fills the GPU; tiny K: no split.
  auto gemv = [](linear::Caps c) { return with_kernel(c, linear::DecodeKernel::gemv); };
  EXPECT_EQ(linear::plan_path(gemv(make_caps(Format::nvfp4, 28672, 8192, 1)), 1, 132).ksplit, 1);
  EXPECT_GT(linear::plan_path(gemv(make_caps(Format::nvfp4, 4096, 14336, 1)), 1, 132).ksplit, 1);
  EXPECT_EQ(linear::plan_path(gemv(make_caps(Format::nvfp4, 64, 32, 1)), 1, 132).ksplit, 1);
  EXPECT_EQ(linear::plan_path(gemv(make_caps(Format::nvfp4, 64, 1 << 16, 1)), 1, 132).ksplit, 8);
  // mma: 16-row tiles, 8 / ksplit per CTA; at least 8 (M <= 8) or 3 (M <= 16) CTAs per SM.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{28672, 8192}, {4096, 14336}, {64, 32}, {100, 1 << 16}}) {
    const linear::PlanPath p = linear::plan_path(make_caps(Format::mxfp4, n, k, 16), 16, 132);
    EXPECT_NE(p.name.find("decode.mma{tokens=16"), std::string::npos) << p.name;
    const int64_t rows_per_cta = (8 / p.ksplit) * 16;
    EXPECT_EQ(p.grid.x, static_cast<unsigned>((n + rows_per_cta - 1) / rows_per_cta)) << n;
  }
  EXPECT_EQ(linear::plan_path(make_caps(Format::mxfp4, 28672, 8192, 1), 1, 132).ksplit, 8);  // 1792 CTAs
  EXPECT_EQ(linear::plan_path(make_caps(Format::mxfp4, 57344, 8192, 1), 1, 132).ksplit, 4);
  EXPECT_EQ(linear::plan_path(make_caps(Format::mxfp4, 28672, 8192, 16), 16, 132).ksplit, 2);  // 448 CTAs
  EXPECT_EQ(linear::plan_path(make_caps(Format::mxfp4, 4096, 14336, 1), 1, 132).ksplit, 8);
  EXPECT_EQ(linear::plan_path(make_caps(Format::mxfp4, 64, 32, 1), 1, 132).ksplit, 1);  // one step of K
}

// Every configuration is compiled for every arch (no spills, register caps) by the registry test,
// tests/runtime/test_jit.cpp (Jit.EveryRegisteredKernelCompiles).

// ---------------------------------------------------------------------------------------------
// LinearCompile: argument errors without a GPU

TEST(LinearCompile, PlanRejectsBadCapsWithoutAGpu) {
  using linear::Caps;
  auto plan_of = [](Caps c) { return [c] { linear::plan(c); }; };
  expect_bad_argument(plan_of(make_caps(Format::bf16, 4, 48, 1)), "k");       // not a multiple of 32
  expect_bad_argument(plan_of(make_caps(Format::nvfp4, 4, 16, 1)), "k");      // group 16, run 32
  expect_bad_argument(plan_of(make_caps(Format::fp8_block, 4, 100, 1)), "k");
  expect_bad_argument(plan_of(make_caps(Format::iq2_xs, 4, 288, 1)), "k");    // not 256-aligned
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 0, 1)), "k");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, -32, 1)), "k");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 0, 32, 1)), "n");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, -3, 32, 1)), "n");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, int64_t{1} << 32, 32, 1)), "n");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, (int64_t{1} << 26) + 32, 1)), "k");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, 0)), "max_tokens");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, -1)), "max_tokens");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, 1, DType::f32)), "act_dtype");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, 1, DType::f8_e4m3)), "act_dtype");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, 1, DType::bf16, DType::f64)), "out_dtype");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, 1, DType::bf16, DType::u8)), "out_dtype");
  expect_bad_argument(plan_of(make_caps(Format::q8_0, 4, 32, 1, DType::bf16, DType::bf16, true, DType::i8)),
                      "bias_dtype");
  expect_bad_argument([] { linear::kernel_spec(make_caps(Format::mxfp4, 4, 64, 1, DType::bf16, DType::u8)); },
                      "out_dtype");
  expect_bad_argument([] { linear::kernel_specs(make_caps(Format::mxfp4, 4, 48, 1)); }, "k");
  // max_tokens > 16 needs the prefill path: tile16 weights of a format it serves; otherwise a clear
  // Unsupported, not a BadArgument.
  auto tile16_caps = [](Format f, int64_t t, DType act = DType::bf16) {
    Caps c = make_caps(f, 4096, 4096, t, act);
    c.layout = WeightLayout::tile16;
    return c;
  };
  for (const Caps& c : {make_caps(Format::nvfp4, 4096, 4096, 17), make_caps(Format::q8_0, 4096, 4096, 64),
                        make_caps(Format::iq2_xs, 4096, 4096, 17), make_caps(Format::bf16, 4096, 4096, 64, DType::f16)}) {
    try {
      linear::plan(c);
      ADD_FAILURE() << format_info(c.format).name << " max_tokens " << c.max_tokens << " must throw Unsupported";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("prefill"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tile16"), std::string::npos) << e.what();
    }
  }
  expect_bad_argument(plan_of(tile16_caps(Format::fp8_tensor, linear::kMaxTokens + 1)), "max_tokens");
  // Valid caps pass validation (then resolving needs a GPU, which may or may not be here).
  for (const Caps& ok : {make_caps(Format::fp8_block, 300, 160, 3), make_caps(Format::nvfp4, 1, 32, 16, DType::f16),
                         tile16_caps(Format::fp8_channel, 8192), tile16_caps(Format::nvfp4, 17, DType::f16),
                         tile16_caps(Format::mxfp8, 64), tile16_caps(Format::q8_0, 8192),
                         tile16_caps(Format::mxfp4, 64, DType::f16), tile16_caps(Format::fp8_block, 300),
                         tile16_caps(Format::iq2_xs, 17), tile16_caps(Format::iq2_xxs, 8192, DType::f16),
                         make_caps(Format::bf16, 4096, 4096, 8192), make_caps(Format::f16, 4096, 4096, 300, DType::f16),
                         make_caps(Format::iq2_xxs, 3, 768, 1, DType::bf16, DType::f32, true, DType::f16)}) {
    try {
      linear::plan(ok);
    } catch (const BadArgument& e) {
      ADD_FAILURE() << format_info(ok.format).name << " k=" << ok.k << ": " << e.what();
    } catch (const Error&) {
      // no CUDA device: expected on CPU-only machines
    }
  }
}

// A plan as linear::plan would make it, with a stand-in kernel: bind makes no CUDA call.
struct FakePlan {
  Kernel kernel{nullptr, "fake", "fake"};
  linear::Plan plan;
  explicit FakePlan(const linear::Caps& caps) {
    plan.caps = caps;
    for (int64_t b : linear::kTokenBuckets) {
      if (b > 1 && b / 2 >= caps.max_tokens) break;
      plan.paths.push_back(linear::plan_path(caps, std::min(b, caps.max_tokens), 132));
      plan.paths.back().kernel = &kernel;
    }
  }
};

// Device-looking tensors backed by host memory (bind only checks them, never dereferences).
struct FakeDeviceTensors {
  PackedWeight host_weight;
  HostTensor x_mem, bias_mem, y_mem;
  WeightView w;
  TensorView x, bias, y;
  FakeDeviceTensors(Format f, int64_t m, int64_t n, int64_t k, DType act, DType out, DType bias_dtype, bool with_bias)
      : host_weight(allocate_weight(f, n, k)),
        x_mem(act, {m * k + 64}),
        bias_mem(bias_dtype, {n + 64}),
        y_mem(out, {m * n + 64}) {
    w = host_weight.view();
    w.scale2 = 0.5f;
    w.data.device = Device::cuda(0);
    if (!w.scale.empty()) w.scale.device = Device::cuda(0);
    x = TensorView(align16(x_mem.view().data), act, {m, k}, Device::cuda(0));
    if (with_bias) bias = TensorView(align16(bias_mem.view().data), bias_dtype, {n}, Device::cuda(0));
    y = TensorView(align16(y_mem.view().data), out, {m, n}, Device::cuda(0));
  }
  static void* align16(void* p) {
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    return reinterpret_cast<void*>((u + 15) & ~uintptr_t{15});
  }
};

TEST(LinearCompile, BindValidatesWithoutAGpu) {
  const linear::Caps caps = make_caps(Format::nvfp4, 8, 64, 4, DType::bf16, DType::bf16, true, DType::f32);
  FakePlan fp(caps);
  ASSERT_EQ(fp.plan.paths.size(), 3u);
  const Scratch scratch{};
  auto make = [&](int64_t m = 3) {
    return FakeDeviceTensors(Format::nvfp4, m, 8, 64, DType::bf16, DType::bf16, DType::f32, true);
  };
  {  // valid: views of the arguments, the path for M
    FakeDeviceTensors d = make(3);
    const linear::Binding b = linear::bind(fp.plan, scratch, d.x, d.w, d.bias, d.y);
    EXPECT_EQ(b.plan, &fp.plan);
    EXPECT_EQ(b.m, 3);
    EXPECT_EQ(b.path, 2u);  // M = 3 -> bucket 4
    EXPECT_EQ(b.x.data, d.x.data);
    EXPECT_EQ(b.y.data, d.y.data);
    EXPECT_EQ(b.bias.data, d.bias.data);
    EXPECT_EQ(b.w.data.data, d.w.data.data);
    FakeDeviceTensors one = make(1);
    EXPECT_EQ(linear::bind(fp.plan, scratch, one.x, one.w, one.bias, one.y).path, 0u);
  }
  {  // plan without kernels
    FakeDeviceTensors d = make();
    linear::Plan empty;
    empty.caps = caps;
    expect_bad_argument([&] { linear::bind(empty, scratch, d.x, d.w, d.bias, d.y); }, "plan");
  }
  {  // weight of another format or shape than planned; validate_weight's rules
    FakeDeviceTensors d(Format::mxfp4, 3, 8, 64, DType::bf16, DType::bf16, DType::f32, true);
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, d.x, d.w, d.bias, d.y); }, "w");
    FakeDeviceTensors e = make();
    e.w.k = 96;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, e.x, e.w, e.bias, e.y); }, "w");
    FakeDeviceTensors g = make();
    g.w.scale.shape[1] = 3;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, g.x, g.w, g.bias, g.y); }, "weight_scale");
    FakeDeviceTensors h = make();
    h.w.scale2 = std::numeric_limits<float>::quiet_NaN();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, h.x, h.w, h.bias, h.y); }, "weight_scale_2");
  }
  {  // host tensors are named
    FakeDeviceTensors d = make();
    d.w.data.device = Device::host();
    d.w.scale.device = Device::host();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, d.x, d.w, d.bias, d.y); }, "weight");
    FakeDeviceTensors e = make();
    e.w.scale.device = Device::host();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, e.x, e.w, e.bias, e.y); }, "weight_scale");
    FakeDeviceTensors g = make();
    g.x.device = Device::host();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, g.x, g.w, g.bias, g.y); }, "x");
    FakeDeviceTensors h = make();
    h.bias.device = Device::host();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, h.x, h.w, h.bias, h.y); }, "bias");
    FakeDeviceTensors i = make();
    i.y.device = Device::host();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, i.x, i.w, i.bias, i.y); }, "y");
    FakeDeviceTensors j = make();
    j.y.device = Device::cuda(1);
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, j.x, j.w, j.bias, j.y); }, "y");
  }
  {  // x: dtype, shape, M range, alignment, presence
    FakeDeviceTensors d = make();
    d.x.dtype = DType::f16;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, d.x, d.w, d.bias, d.y); }, "x");
    FakeDeviceTensors e = make();
    e.x.shape[1] = 32;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, e.x, e.w, e.bias, e.y); }, "x");
    FakeDeviceTensors g = make(5);  // M = 5 > max_tokens = 4
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, g.x, g.w, g.bias, g.y); }, "x");
    FakeDeviceTensors h = make();
    h.x.data = static_cast<char*>(h.x.data) + 2;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, h.x, h.w, h.bias, h.y); }, "x");
    FakeDeviceTensors i = make();
    i.x.data = nullptr;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, i.x, i.w, i.bias, i.y); }, "x");
    FakeDeviceTensors j = make();
    j.x.strides[0] = 128;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, j.x, j.w, j.bias, j.y); }, "x");
  }
  {  // bias: required when planned, refused when not, dtype, shape
    FakeDeviceTensors d = make();
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, d.x, d.w, TensorView{}, d.y); }, "bias");
    FakeDeviceTensors e = make();
    e.bias.dtype = DType::bf16;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, e.x, e.w, e.bias, e.y); }, "bias");
    FakeDeviceTensors g = make();
    g.bias.shape[0] = 9;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, g.x, g.w, g.bias, g.y); }, "bias");
    FakePlan no_bias(make_caps(Format::nvfp4, 8, 64, 4));
    FakeDeviceTensors h = make();
    expect_bad_argument([&] { linear::bind(no_bias.plan, scratch, h.x, h.w, h.bias, h.y); }, "bias");
    EXPECT_NO_THROW(linear::bind(no_bias.plan, scratch, h.x, h.w, TensorView{}, h.y));
  }
  {  // y: dtype, shape (M rows of x), presence
    FakeDeviceTensors d = make();
    d.y.dtype = DType::f32;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, d.x, d.w, d.bias, d.y); }, "y");
    FakeDeviceTensors e = make();
    e.y.shape[0] = 2;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, e.x, e.w, e.bias, e.y); }, "y");
    FakeDeviceTensors g = make();
    g.y.data = nullptr;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, g.x, g.w, g.bias, g.y); }, "y");
  }
  {  // weight alignment: 16 bytes for vector loads, 2 bytes for GGML blocks
    FakeDeviceTensors d = make();
    d.w.data.data = static_cast<char*>(d.w.data.data) + 8;
    expect_bad_argument([&] { linear::bind(fp.plan, scratch, d.x, d.w, d.bias, d.y); }, "weight");
    FakePlan q8(make_caps(Format::q8_0, 8, 64, 1));
    FakeDeviceTensors e(Format::q8_0, 1, 8, 64, DType::bf16, DType::bf16, DType::bf16, false);
    e.w.data.data = static_cast<char*>(e.w.data.data) + 34;
    EXPECT_NO_THROW(linear::bind(q8.plan, scratch, e.x, e.w, TensorView{}, e.y));
    e.w.data.data = static_cast<char*>(e.w.data.data) + 1;
    expect_bad_argument([&] { linear::bind(q8.plan, scratch, e.x, e.w, TensorView{}, e.y); }, "weight");
  }
}

// ---------------------------------------------------------------------------------------------
// LinearKernelHost: the kernel's arithmetic on the CPU

// Weights that hit every element code with several scales (NaN codes included).
PackedWeight every_code_weight(Format f, std::mt19937_64& rng) {
  const int64_t n = 256, k = f == Format::iq2_xxs || f == Format::iq2_xs ? 1024 : 256;
  PackedWeight p = allocate_weight(f, n, k);
  uint8_t* d = p.data.ptr<uint8_t>();
  if (is_ggml_format(f)) {
    ggml_random_blocks(f, p.data.view(), rng());
    const int bytes = format_info(f).block_bytes, group = format_info(f).group;
    for (int64_t b = 0; b < n * k / group; ++b) {  // every FP16 block scale pattern, Inf and NaN too
      const uint16_t s = static_cast<uint16_t>(b * 97 + rng() % 97);
      d[b * bytes] = static_cast<uint8_t>(s);
      d[b * bytes + 1] = static_cast<uint8_t>(s >> 8);
    }
    return p;
  }
  for (size_t i = 0; i < p.data.nbytes(); ++i) d[i] = static_cast<uint8_t>(f == Format::bf16 || f == Format::f16 ? rng() : i);
  if (!p.scale.view().empty()) {
    if (p.scale.dtype() == DType::f32) {
      std::uniform_int_distribution<int> e(-149, 120);
      for (int64_t i = 0; i < p.scale.numel(); ++i) p.scale.ptr<float>()[i] = std::ldexp(1.0f + (rng() % 1024) / 1024.0f, e(rng));
    } else {
      for (size_t i = 0; i < p.scale.nbytes(); ++i) p.scale.ptr<uint8_t>()[i] = static_cast<uint8_t>(i * 7 + rng() % 7);
    }
  }
  p.scale2 = 0.3701f;
  return p;
}

bool same_value(float a, float b) { return std::isnan(a) ? std::isnan(b) : bits_of(a) == bits_of(b); }

TEST(LinearKernelHost, PieceDecodersEqualDecodeWeightRunOnEveryCode) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& info : all_formats()) {
    for (const PackedWeight& p : {every_code_weight(info.format, rng), random_weight(info.format, 130, 512, rng)}) {
      const WeightView w = p.view();
      const int64_t runs_per_row = w.k / 32, scale_cols = (w.k + 127) / 128;
      int64_t bad = 0;
      with_format(w.format, [&](auto fmt) {
        constexpr int F = decltype(fmt)::value;
        const auto* data = w.data.ptr<const unsigned char>();
        const auto* scale = w.scale.ptr<const unsigned char>();
        for (int64_t row = 0; row < w.n; ++row)
          for (int64_t col = 0; col < runs_per_row; ++col) {
            float want[32];
            dev::decode_weight_run<F>(data, scale, 1.0f, row * runs_per_row + col, runs_per_row, scale_cols, want);
            dev::WeightRun<F> run;
            dev::fetch_run<F>(data, scale, row, col, runs_per_row, scale_cols, run);
            for (int q = 0; q < 4; ++q) {
              float got[8];
              dev::decode_piece<F>(run, q, got);
              for (int e = 0; e < 8; ++e)
                if (!same_value(want[8 * q + e], got[e]) && bad++ < 5)
                  ADD_FAILURE() << info.name << " row " << row << " run " << col << " element " << 8 * q + e
                                << ": decode_weight_run " << want[8 * q + e] << " decode_piece " << got[e];
            }
          }
      });
      EXPECT_EQ(bad, 0) << info.name << " " << p.n << "x" << p.k;
    }
  }
}

// The kernel on the CPU: the grid of CTAs, each warp's lanes (gemv_task + gemv_lane_partial), the
// butterfly (lane i adds lane i ^ off, as __shfl_xor_sync), the shared-memory slice sums in slice
// order and linear_finish. y: [m, n] of out_dtype, pre-filled with poison.
template <int F, int kM, int kAct, int kOut, int kRows>
void emulate_kernel(const linear::PlanPath& path, const TensorView& x, int m, const WeightView& w, const TensorView& bias,
                    int bias_code, void* y) {
  const auto* xp = x.ptr<const unsigned char>();
  const auto* data = w.data.ptr<const unsigned char>();
  const auto* scale = w.scale.ptr<const unsigned char>();
  const long long scale_cols = (w.k + 127) / 128;
  const int ksplit = path.ksplit;
  for (unsigned block = 0; block < path.grid.x; ++block) {
    std::vector<std::array<float, kRows * kM>> partial(dev::kGemvWarps);
    for (int warp = 0; warp < dev::kGemvWarps; ++warp) {
      float lanes[32][kRows][kM];
      for (int lane = 0; lane < 32; ++lane) {
        const dev::GemvTask task = dev::gemv_task(block, warp, lane, ksplit, kRows);
        dev::gemv_lane_partial<F, kM, kAct, kRows>(xp, m, w.k, data, scale, w.n, scale_cols, task, lanes[lane]);
      }
      for (int r = 0; r < kRows; ++r)
        for (int t = 0; t < kM; ++t) {
          float v[32];
          for (int l = 0; l < 32; ++l) v[l] = lanes[l][r][t];
          for (int off = 16; off > 0; off >>= 1) {
            float next[32];
            for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ off];
            std::memcpy(v, next, sizeof v);
          }
          partial[warp][r * kM + t] = v[0];
        }
    }
    for (int warp = 0; warp < dev::kGemvWarps; ++warp) {
      const dev::GemvTask task = dev::gemv_task(block, warp, 0, ksplit, kRows);
      if (task.slice != 0) continue;
      for (int i = 0; i < kRows * kM; ++i) {
        const int r = i / kM, t = i % kM;
        const long long row = task.row0 + r;
        if (t >= m || row >= w.n) continue;
        float v = partial[warp][i];
        for (int s = 1; s < ksplit; ++s) v += partial[warp + s][i];
        dev::linear_finish<F, kOut>(v, w.scale2, bias.ptr<const unsigned char>(), bias_code, row,
                                  static_cast<unsigned char*>(y), static_cast<long long>(t) * w.n + row);
      }
    }
  }
}

// Runs the emulation for a runtime configuration (activations bf16 for every bucket, f16 for bucket 4).
void emulate(const linear::Caps& caps, const linear::PlanPath& path, const TensorView& x, const WeightView& w,
             const TensorView& bias, void* y) {
  const int m = static_cast<int>(x.size(0));
  const int bias_code = bias.empty() ? dev::kBiasNone : bias.dtype == DType::bf16 ? dev::kBiasBf16
                                                      : bias.dtype == DType::f16  ? dev::kBiasF16
                                                                                  : dev::kBiasF32;
  const int bucket = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16;
  with_format(caps.format, [&](auto fmt) {
    constexpr int F = decltype(fmt)::value;
    auto by_out = [&](auto act, auto mb, auto rows) {
      constexpr int A = decltype(act)::value, M = decltype(mb)::value, R = decltype(rows)::value;
      ASSERT_EQ(path.rows_per_warp, R);
      switch (caps.out_dtype) {
        case DType::bf16: return emulate_kernel<F, M, A, dev::kOutBf16, R>(path, x, m, w, bias, bias_code, y);
        case DType::f16: return emulate_kernel<F, M, A, dev::kOutF16, R>(path, x, m, w, bias, bias_code, y);
        default: return emulate_kernel<F, M, A, dev::kOutF32, R>(path, x, m, w, bias, bias_code, y);
      }
    };
    using I = std::integral_constant<int, 0>;
    using One = std::integral_constant<int, 1>;
    using Two = std::integral_constant<int, 2>;
    if (caps.act_dtype == DType::f16) {
      ASSERT_EQ(bucket, 4) << "the emulation instantiates f16 activations for bucket 4 only";
      return by_out(One{}, std::integral_constant<int, 4>{}, Two{});
    }
    switch (bucket) {
      case 1: return by_out(I{}, One{}, Two{});
      case 2: return by_out(I{}, Two{}, Two{});
      case 4: return by_out(I{}, std::integral_constant<int, 4>{}, Two{});
      case 8: return by_out(I{}, std::integral_constant<int, 8>{}, Two{});
      default: return by_out(I{}, std::integral_constant<int, 16>{}, One{});
    }
  });
}

// Emulated gemv kernel vs reference_linear (f64) on one configuration; forced_ksplit > 0 overrides the
// plan. (The mma kernel's tensor-core MMAs have no host emulation: tests/linear/linear_gpu.cpp.)
void check_emulation(const linear::Caps& gemv_caps, int64_t m, std::mt19937_64& rng, int forced_ksplit = 0) {
  const linear::Caps caps = with_kernel(gemv_caps, linear::DecodeKernel::gemv);
  const std::string what = std::string(format_info(caps.format).name) + " M=" + std::to_string(m) + " N=" +
                           std::to_string(caps.n) + " K=" + std::to_string(caps.k) + " act=" +
                           std::string(dtype_name(caps.act_dtype)) + " out=" + std::string(dtype_name(caps.out_dtype)) +
                           (caps.has_bias ? " bias=" + std::string(dtype_name(caps.bias_dtype)) : "");
  SCOPED_TRACE(what);
  linear::PlanPath path = linear::plan_path(caps, m, 132);
  if (forced_ksplit > 0) {
    path.ksplit = forced_ksplit;
    const int64_t rows_per_cta = (8 / forced_ksplit) * path.rows_per_warp;
    path.grid.x = static_cast<unsigned>((caps.n + rows_per_cta - 1) / rows_per_cta);
  }
  const PackedWeight p = random_weight(caps.format, caps.n, caps.k, rng);
  const HostTensor x = random_act(rng, caps.act_dtype, m, caps.k);
  HostTensor bias;
  if (caps.has_bias) bias = random_act(rng, caps.bias_dtype, 1, caps.n);
  const TensorView bias_view = caps.has_bias ? TensorView(bias.view().data, caps.bias_dtype, {caps.n}) : TensorView{};

  HostTensor y(caps.out_dtype, {m, caps.n});
  std::memset(y.view().data, 0xFF, y.nbytes());  // NaN poison
  emulate(caps, path, x.view(), p.view(), bias_view, y.view().data);

  HostTensor ref(DType::f64, {m, caps.n});
  reference_linear({x.view(), p.view(), ActMode::a16, 1.0f, bias_view, ref.view()});
  std::vector<double> got(static_cast<size_t>(m * caps.n)), want(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    got[i] = load_f32(y.view().data, caps.out_dtype, static_cast<int64_t>(i));
    want[i] = ref.ptr<double>()[i];
  }
  const Agreement a = agreement(got, want);
  EXPECT_EQ(a.non_finite, 0) << "unwritten or non-finite outputs (path " << path.name << ")";
  EXPECT_LE(a.rel_l2, tolerance(caps.out_dtype)) << path.name;
  EXPECT_GE(a.cosine, 0.9999) << path.name;
}

TEST(LinearKernelHost, EmulatedKernelMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const DType outs[] = {DType::bf16, DType::f16, DType::f32};
  int combo = 0;
  for (const auto& info : all_formats()) {
    const bool iq2 = info.format == Format::iq2_xxs || info.format == Format::iq2_xs;
    // N not a multiple of the rows per CTA; K not a multiple of 128 where the format allows it.
    const int64_t n = 300, k = iq2 ? 768 : info.format == Format::q8_0 || info.format == Format::mxfp4 ||
                                                   info.format == Format::mxfp8 || info.format == Format::nvfp4
                                               ? 96 * 3
                                               : 160;
    for (int64_t m : {1, 2, 3, 4, 8, 16}) {
      const DType out = outs[combo % 3];
      const bool bias = combo % 2 == 0;
      const DType bias_dtype = outs[(combo / 2) % 3];
      ++combo;
      check_emulation(make_caps(info.format, n, k, 16, DType::bf16, out, bias, bias_dtype), m, rng);
    }
    check_emulation(make_caps(info.format, n, k, 4, DType::f16, DType::f16, true, DType::f16), 3, rng);
  }
}

TEST(LinearKernelHost, EmulatedSplitKMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Every split, with runs that do not divide evenly among the slices and a partial last CTA.
  for (Format f : {Format::fp8_block, Format::nvfp4, Format::iq2_xs, Format::bf16})
    for (int ks : {1, 2, 4, 8})
      for (int64_t m : {1, 5})
        check_emulation(make_caps(f, 37, f == Format::iq2_xs ? 2816 : 2848, 8, DType::bf16, DType::f32), m, rng, ks);
}

}  // namespace
}  // namespace b12x
