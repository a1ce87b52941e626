// linear with quantized activations (the wgmma_fp8 paths) without a GPU: token buckets, tile sizes and
// shared memory, the split-K choice, scratch layouts, and plan / bind rejecting bad arguments (naming
// them) before anything touches CUDA. The kernels compile for sm_90a in the registry test
// (runtime.Jit.EveryRegisteredKernelCompiles); they run in tests/linear/linear_fp8_gpu.cpp.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/linear/linear.h"
#include "b12x/runtime/registry.h"
#include "linear/fp8_gemm.h"
#include "linear/kernels/wgmma_fp8.cuh"
#include "linear/kernels/wgmma_fp8_tm.cuh"
#include "support/env.h"
#include "support/errors.h"
#include "support/fake_device.h"

namespace b12x {
namespace {

using test::expect_bad_argument;
using test::fake_device_ptr;
using test::fake_device_tensor;


linear::Caps fp8_caps(ActMode act, int64_t n, int64_t k, int64_t max_tokens, DType x = DType::bf16) {
  linear::Caps c;
  c.format = linear::fp8::weight_format(act);
  c.act = act;
  c.n = n;
  c.k = k;
  c.max_tokens = max_tokens;
  c.act_dtype = x;
  return c;
}

template <class E>
void expect_throws_mentioning(const std::function<void()>& f, const std::vector<std::string>& mentions) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
  }
}

TEST(LinearFp8, PathsTileTheTokensAndFitSharedMemory) {
  const linear::Caps caps = fp8_caps(ActMode::fp8_tensor, 28672, 8192, 4096);
  std::vector<int64_t> tops;
  std::vector<int> tiles;
  for (int64_t t : {1, 16, 17, 32, 33, 64, 65, 128, 129, 4096}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132);
    EXPECT_EQ(p.kind, linear::PathKind::fp8);
    EXPECT_EQ(p.name.rfind("fp8.wgmma_fp8{act=fp8_tensor", 0), 0u) << p.name;
    EXPECT_EQ(p.block.x, 384u);
    EXPECT_EQ(p.spec.kernel, "linear.wgmma_fp8");
    tops.push_back(p.max_tokens);
    tiles.push_back(p.tokens_per_cta);
  }
  // Promoted accumulation (the default): 256-token tiles past 128 tokens (promoted over token
  // halves; N = 28672 leaves no SM idle).
  EXPECT_EQ(tops, (std::vector<int64_t>{16, 16, 32, 32, 64, 64, 128, 128, 4096, 4096}));
  EXPECT_EQ(tiles, (std::vector<int>{16, 16, 32, 32, 64, 64, 128, 128, 256, 256}));
  // With B12X_CLUSTERS=1, tiles of 128+ tokens run as clusters of two CTAs sharing x (224 row blocks
  // pair up): a grid of whole clusters; narrower tiles (split K) and fp8_block alone.
  EXPECT_EQ(linear::plan_path(caps, 4096, 132).cluster, 1);
  const test::ScopedEnv clusters("B12X_CLUSTERS", "1");
  for (int64_t t : {129, 4096}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132);
    EXPECT_EQ(p.cluster, 2) << p.name;
    EXPECT_EQ(p.grid.x, 132u) << p.name;
    EXPECT_NE(p.spec.describe().find("cluster=2"), std::string::npos) << p.spec.describe();
  }
  EXPECT_EQ(linear::plan_path(caps, 64, 132).cluster, 1);
  EXPECT_EQ(linear::plan_path(caps, 4096, 131).grid.x, 130u);  // whole clusters
  EXPECT_EQ(linear::plan_path(fp8_caps(ActMode::fp8_tensor, 28672 + 128, 8192, 4096), 4096, 132).cluster, 1);
  const linear::Caps block = fp8_caps(ActMode::fp8_block, 28672, 8192, 4096);
  EXPECT_EQ(linear::plan_path(block, 4096, 132).cluster, 1);
  {  // wgmma_fp8 only (from 1024 tokens fp8_block runs on wgmma_fp8_tm: TokensAsMForLargeFp8Block)
    const test::ScopedEnv no_tm("B12X_FP8_TM", "0");
    EXPECT_EQ(linear::plan_path(block, 4096, 132).cluster, 1);
    EXPECT_EQ(linear::plan_path(block, 4096, 132).tokens_per_cta, 256);
    EXPECT_EQ(linear::plan_path(block, 129, 132).max_tokens, 4096);
  }
  // fast_accum: 256-token tiles, 128 while they would leave SMs idle (N = 4096: 32 row tiles, M <= 1024).
  linear::Caps fast = fp8_caps(ActMode::fp8_tensor, 28672, 8192, 4096);
  fast.fast_accum = true;
  EXPECT_EQ(linear::plan_path(fast, 4096, 132).tokens_per_cta, 256);
  EXPECT_NE(linear::plan_path(fast, 4096, 132).name.find("fast_accum"), std::string::npos);
  fast.n = 4096;
  EXPECT_EQ(linear::plan_path(fast, 1024, 132).tokens_per_cta, 128);
  EXPECT_EQ(linear::plan_path(fast, 1025, 132).tokens_per_cta, 256);
  // One spec per distinct path (16 .. 256 tokens), plus the quantize kernel when the op quantizes x.
  EXPECT_EQ(linear::kernel_specs(caps).size(), 6u);
  EXPECT_EQ(linear::kernel_specs(caps).back().kernel, "quantize.activations");
  EXPECT_EQ(linear::kernel_specs(fp8_caps(ActMode::fp8_token, 28672, 8192, 16, DType::f8_e4m3)).size(), 1u);
  // Every tile's ring fits the opt-in shared memory with at least 4 stages.
  for (int mode : {device::kFp8Tensor, device::kFp8Token, device::kFp8Block})
    for (bool f : {false, true})
      for (int bn : {16, 32, 64, 128, 256}) {
        if (!device::fp8_valid_config(mode, bn, f)) continue;
        EXPECT_GE(device::fp8_stages(mode, bn), 4) << mode << " " << bn;
        EXPECT_LE(device::fp8_smem_bytes(mode, bn), 227 * 1024) << mode << " " << bn;
        EXPECT_EQ(device::fp8_stage_bytes(mode, bn) % 1024, 0);
        // fp8_block: the x scales (kBN floats) and the block's weight scale (one float) after W and x.
        if (mode == device::kFp8Block) {
          EXPECT_GE(device::fp8_stage_bytes(mode, bn), device::fp8_scale_offset(bn) + 4 * bn + 4) << bn;
        }
      }
  EXPECT_TRUE(device::fp8_valid_config(device::kFp8Tensor, 256, false));  // promoted over token quarters
  EXPECT_TRUE(device::fp8_valid_config(device::kFp8Block, 256, false));
  EXPECT_TRUE(device::fp8_valid_config(device::kFp8Tensor, 256, true));
  EXPECT_TRUE(device::fp8_promotes_quarters(256, false));
  EXPECT_FALSE(device::fp8_promotes_quarters(256, true));
  EXPECT_FALSE(device::fp8_promotes_quarters(128, false));
  EXPECT_FALSE(device::fp8_valid_config(device::kFp8Block, 128, true));
  EXPECT_FALSE(device::fp8_valid_config(device::kFp8Tensor, 48, false));
}

// fp8_block's stage keeps token j's x scale at fp8_scale_slot(j): a permutation of every 16 tokens,
// under which the promotion's float4 at 8c + 4t (c even) holds tokens 8c + 2t, + 1, 8c + 8 + 2t, + 1.
TEST(LinearFp8, BlockScaleSlotsPermuteEachSixteenTokensForTheQuadLoads) {
  for (int bn : {16, 32, 64, 128, 256}) {
    std::set<int> slots;
    for (int j = 0; j < bn; ++j) {
      const int at = device::fp8_scale_slot(j);
      EXPECT_EQ(at / 16, j / 16) << j;
      slots.insert(at);
    }
    EXPECT_EQ(static_cast<int>(slots.size()), bn);
  }
  for (int c = 0; c < 128 / 4; c += 2)
    for (int t = 0; t < 4; ++t) {
      const int tok[4] = {8 * c + 2 * t, 8 * c + 2 * t + 1, 8 * c + 8 + 2 * t, 8 * c + 9 + 2 * t};
      for (int i = 0; i < 4; ++i) EXPECT_EQ(device::fp8_scale_slot(tok[i]), 8 * c + 4 * t + i) << c << " " << t;
    }
  // Split K is compiled only into tiles of up to 64 tokens, and planned only there.
  EXPECT_TRUE(device::fp8_may_split(64));
  EXPECT_FALSE(device::fp8_may_split(128));
}

// fp8_block from M = tm_from on: wgmma_fp8_tm (128 tokens x 256 weight rows, the tokens on the
// wgmma's M side), where M >= 1024 and its tiles fill the SMs; B12X_FP8_TM=0 / 1 forces either kernel.
TEST(LinearFp8, TokensAsMForLargeFp8Block) {
  const test::ScopedEnv unset("B12X_FP8_TM", nullptr);
  using linear::fp8::tm_from;
  // N = 8192: 32 column tiles, 5 token blocks fill 132 SMs (513 tokens), so 1024 decides.
  EXPECT_EQ(tm_from(fp8_caps(ActMode::fp8_block, 8192, 8192, 4096), 132), 1024);
  // N = 1024: 4 column tiles, 33 token blocks (4097 tokens) to fill 132 SMs.
  EXPECT_EQ(tm_from(fp8_caps(ActMode::fp8_block, 1024, 8192, 8192), 132), 32 * 128 + 1);
  EXPECT_EQ(tm_from(fp8_caps(ActMode::fp8_block, 1024 + 1, 8192, 8192), 132), 26 * 128 + 1);  // 5 column tiles
  for (ActMode act : {ActMode::fp8_tensor, ActMode::fp8_token})
    EXPECT_EQ(tm_from(fp8_caps(act, 8192, 8192, 4096), 132), 0) << act_mode_name(act);

  const linear::Caps caps = fp8_caps(ActMode::fp8_block, 8192, 8192, 4096);
  for (int64_t t : {1024, 1025, 2048, 4096}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132);
    EXPECT_EQ(p.kind, linear::PathKind::fp8);
    EXPECT_EQ(p.spec.kernel, "linear.wgmma_fp8_tm") << t;
    EXPECT_EQ(p.spec.source, "linear/kernels/wgmma_fp8_tm.cuh");
    EXPECT_EQ(p.spec.name_expression, "b12x::linear_wgmma_fp8_tm_kernel<256, 0>");  // bf16 y
    EXPECT_EQ(p.name.rfind("fp8.wgmma_fp8_tm{act=fp8_block", 0), 0u) << p.name;
    EXPECT_NE(p.name.find("tokens_per_tile=128, rows_per_tile=256"), std::string::npos) << p.name;
    EXPECT_EQ(p.max_tokens, 4096);
    EXPECT_EQ(p.tokens_per_cta, 128);
    EXPECT_EQ(p.block.x, 384u);
    EXPECT_EQ(p.grid.x, 132u);  // 32 x 32 tiles, persistent
    EXPECT_EQ(p.cluster, 1);
    EXPECT_EQ(p.ksplit, 1);
    EXPECT_EQ(p.smem_bytes, static_cast<size_t>(device::fp8_tm_smem_bytes(256)));
  }
  // Below 1024 tokens: wgmma_fp8, its last bucket cut at 1023.
  for (int64_t t : {1, 16, 128, 129, 1023}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132);
    EXPECT_EQ(p.spec.kernel, "linear.wgmma_fp8") << t;
    EXPECT_EQ(p.name.rfind("fp8.wgmma_fp8{act=fp8_block", 0), 0u) << p.name;
  }
  EXPECT_EQ(linear::plan_path(caps, 513, 132).max_tokens, 1023);  // (128-token tiles up to 512: 64 row blocks)
  EXPECT_EQ(linear::plan_path(caps, 513, 132).tokens_per_cta, 256);
  const auto b = linear::fp8::buckets(caps, 132);
  EXPECT_EQ(b.back(), (std::pair<int64_t, int>{4096, 128}));
  EXPECT_EQ(b[b.size() - 2], (std::pair<int64_t, int>{1023, 256}));
  // max_tokens below tm_from: wgmma_fp8 only; other modes never.
  EXPECT_EQ(linear::plan_path(fp8_caps(ActMode::fp8_block, 8192, 8192, 1023), 1023, 132).spec.kernel, "linear.wgmma_fp8");
  EXPECT_EQ(linear::plan_path(fp8_caps(ActMode::fp8_tensor, 8192, 8192, 4096), 4096, 132).spec.kernel, "linear.wgmma_fp8");
  EXPECT_EQ(linear::plan_path(fp8_caps(ActMode::fp8_token, 8192, 8192, 4096), 4096, 132).spec.kernel, "linear.wgmma_fp8");
  // The kernels a plan resolves: wgmma_fp8's 16 .. 256, wgmma_fp8_tm, the quantize kernel.
  std::set<std::string> kernels;
  for (const KernelSpec& s : linear::kernel_specs(caps)) kernels.insert(s.kernel);
  EXPECT_EQ(kernels, (std::set<std::string>{"linear.wgmma_fp8", "linear.wgmma_fp8_tm", "quantize.activations"}));
  EXPECT_EQ(linear::kernel_specs(caps).size(), 7u);
  // Never split: no split-K buffers beyond wgmma_fp8's small-M ones.
  EXPECT_EQ(linear::fp8::scratch(fp8_caps(ActMode::fp8_block, 65536, 8192, 4096, DType::f8_e4m3), 132).bytes(), 0u);

  {  // B12X_FP8_TM=1: every M of fp8_block on wgmma_fp8_tm, one path
    const test::ScopedEnv on("B12X_FP8_TM", "1");
    EXPECT_EQ(tm_from(caps, 132), 1);
    EXPECT_EQ(linear::fp8::buckets(caps, 132), (std::vector<std::pair<int64_t, int>>{{4096, 128}}));
    for (int64_t t : {1, 129, 4096}) EXPECT_EQ(linear::plan_path(caps, t, 132).spec.kernel, "linear.wgmma_fp8_tm") << t;
    const linear::PlanPath small = linear::plan_path(fp8_caps(ActMode::fp8_block, 300, 640, 300), 5, 132);
    EXPECT_EQ(small.spec.kernel, "linear.wgmma_fp8_tm");
    EXPECT_EQ(small.grid.x, 6u);  // 3 x 2 tiles at max_tokens
    EXPECT_EQ(linear::plan_path(fp8_caps(ActMode::fp8_tensor, 8192, 8192, 4096), 4096, 132).spec.kernel,
              "linear.wgmma_fp8");  // fp8_block only
  }
  {  // B12X_FP8_TM=0: wgmma_fp8 at every M
    const test::ScopedEnv off("B12X_FP8_TM", "0");
    EXPECT_EQ(tm_from(caps, 132), 0);
    for (int64_t t : {1, 1024, 4096}) EXPECT_EQ(linear::plan_path(caps, t, 132).spec.kernel, "linear.wgmma_fp8") << t;
  }
  {  // any other value: BadArgument naming the variable
    const test::ScopedEnv bad("B12X_FP8_TM", "2");
    expect_bad_argument([&] { linear::plan_path(caps, 4096, 132); }, "B12X_FP8_TM");
  }
  // The ring: 128 x 128 x bytes + 256 x 128 W bytes + scales per stage, 1024-aligned, >= 4 stages.
  for (int bn : {128, 256}) {
    EXPECT_EQ(device::fp8_tm_stage_bytes(bn) % 1024, 0);
    EXPECT_GE(device::fp8_tm_stage_bytes(bn), 128 * 128 + bn * 128 + 4 * 128 + 4 * (bn / 128));
    EXPECT_GE(device::fp8_tm_stages(bn), 4) << bn;
    EXPECT_LE(device::fp8_tm_smem_bytes(bn), 227 * 1024) << bn;
  }
}

TEST(LinearFp8, SplitKOnlyWhereTilesLeaveSmsIdle) {
  using linear::fp8::choose_splits;
  // 224 tiles of 16 tokens on 132 SMs: 1 unit per tile leaves 85% balance; 4 splits give 896 units (97%).
  EXPECT_EQ(choose_splits(224, 64, 16, 132), 4);
  EXPECT_EQ(choose_splits(32, 112, 16, 132), 4);   // 4096 x 14336: 32 tiles -> 128 units
  EXPECT_EQ(choose_splits(264, 64, 16, 132), 1);   // two full waves already
  EXPECT_EQ(choose_splits(32, 112, 128, 132), 1);  // wide tiles never split
  EXPECT_EQ(choose_splits(1, 3, 16, 132), 1);      // every split keeps >= 2 K blocks
  EXPECT_EQ(choose_splits(1, 4, 16, 132), 2);
  for (int64_t tiles : {1, 7, 33, 100, 131, 500})
    for (int64_t kb : {1, 2, 8, 64, 1000}) {
      const int s = choose_splits(tiles, kb, 32, 132);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, 16);
      EXPECT_TRUE(s == 1 || kb >= 2 * s) << tiles << " " << kb;
      EXPECT_LE(tiles * s, std::max<int64_t>(tiles, 8 * 132));
    }
  const linear::PlanPath p = linear::plan_path(fp8_caps(ActMode::fp8_tensor, 28672, 8192, 16), 1, 132);
  EXPECT_EQ(p.ksplit, 4);
  EXPECT_NE(p.name.find("ksplit<=4"), std::string::npos) << p.name;
  EXPECT_EQ(linear::plan_path(fp8_caps(ActMode::fp8_tensor, 28672, 8192, 4096), 4096, 132).ksplit, 1);
}

TEST(LinearFp8, ScratchHoldsQuantizedXAndSplitKBuffers) {
  const ScratchLayout q = linear::fp8::scratch(fp8_caps(ActMode::fp8_block, 4096, 8192, 64), 132);
  EXPECT_GE(q.bytes(), size_t{64} * 8192 + 64 * 64 * 4);
  EXPECT_NO_THROW(q.offset("linear.xq"));
  EXPECT_NO_THROW(q.offset("linear.xq_scales"));
  EXPECT_NO_THROW(q.offset("linear.partials"));  // 32 row tiles split at 1..64 tokens
  EXPECT_NO_THROW(q.offset("linear.counters"));
  const ScratchLayout pre = linear::fp8::scratch(fp8_caps(ActMode::fp8_tensor, 28672, 8192, 4096, DType::f8_e4m3), 132);
  EXPECT_THROW(pre.offset("linear.xq"), Error);  // x arrives quantized
  // 896 units of 128 x 16 FP32 partials at M <= 16.
  EXPECT_GE(pre.bytes(), size_t{896} * 128 * 16 * 4);
  const ScratchLayout none = linear::fp8::scratch(fp8_caps(ActMode::fp8_tensor, 65536, 8192, 4096, DType::f8_e4m3), 132);
  EXPECT_EQ(none.bytes(), 0u);  // 512 row tiles: never split
}

TEST(LinearFp8, PlanRejectsBadCapsWithoutAGpu) {
  auto plan_of = [](linear::Caps c) { return [c] { linear::plan(c); }; };
  {  // a weight format the mode does not take
    linear::Caps c = fp8_caps(ActMode::fp8_tensor, 256, 256, 4);
    c.format = Format::fp8_channel;
    expect_throws_mentioning<Unsupported>(plan_of(c), {"fp8_tensor", "fp8_channel"});
  }
  {
    linear::Caps c = fp8_caps(ActMode::fp8_token, 256, 256, 4);
    c.layout = WeightLayout::tile16;
    expect_throws_mentioning<Unsupported>(plan_of(c), {"checkpoint layout", "tile16"});
  }
  for (DType bad : {DType::f64, DType::u8, DType::i32})
    expect_bad_argument(plan_of(fp8_caps(ActMode::fp8_tensor, 256, 256, 4, bad)), "act_dtype");
  {
    linear::Caps c = fp8_caps(ActMode::fp8_tensor, 256, 256, 4);
    c.kernel = linear::DecodeKernel::gemv;
    expect_bad_argument(plan_of(c), "kernel");
  }
  expect_bad_argument(plan_of(fp8_caps(ActMode::fp8_block, 256, 160, 4)), "k", {"128"});
  {
    linear::Caps c = fp8_caps(ActMode::fp8_block, 256, 256, 4);
    c.fast_accum = true;
    expect_bad_argument(plan_of(c), "fast_accum");
  }
  expect_bad_argument(plan_of(fp8_caps(ActMode::fp8_tensor, 256, 48, 4)), "k");  // the common K % 32 rule
  expect_bad_argument(plan_of(fp8_caps(ActMode::fp8_tensor, 256, 256, 0)), "max_tokens");
  expect_bad_argument(plan_of(fp8_caps(ActMode::fp8_tensor, int64_t{1} << 30, 256, linear::kMaxTokens)), "max_tokens");
  for (const linear::Caps& ok : {fp8_caps(ActMode::fp8_tensor, 300, 608, 300, DType::f32),
                                 fp8_caps(ActMode::fp8_token, 1, 32, 1, DType::f8_e4m3),
                                 fp8_caps(ActMode::fp8_block, 129, 1280, 70000, DType::f16)})
    EXPECT_NO_THROW(linear::validate_caps(ok));
}

TEST(LinearFp8, PreferredLayoutAndPrewarmFollowTheActivationMode) {
  EXPECT_EQ(linear::preferred_layout(Format::fp8_tensor, DType::bf16, ActMode::fp8_tensor), WeightLayout::checkpoint);
  EXPECT_EQ(linear::preferred_layout(Format::fp8_tensor, DType::bf16, ActMode::a16),
            linear::preferred_layout(Format::fp8_tensor, DType::bf16));
  PrewarmItem item{"linear", "fp8_block", 4096, 8192, {1, 4096}, "f32", "bf16", "checkpoint", "fp8_block"};
  std::set<std::string> kernels;  // what plan(max_tokens = 1) and plan(max_tokens = 4096) resolve
  for (const KernelSpec& s : prewarm_specs(item)) kernels.insert(s.describe());
  EXPECT_EQ(kernels.size(), 6u);  // tiles of 16, 32, 64, 128 and 256 tokens, and the quantize kernel
  for (int bn : {16, 32, 64, 128})
    EXPECT_EQ(kernels.count(detail::concat("linear.wgmma_fp8{act=fp8_block, tokens_per_tile=", bn, ", out=f32, accum=promoted}")),
              1u) << bn;
  EXPECT_EQ(kernels.count("quantize.activations{act=fp8_block, x=bf16}"), 1u);
  item.format = "fp8";
  item.act = "fp8_tensor";
  item.fast_accum = true;
  const std::vector<KernelSpec> fast = prewarm_specs(item);
  EXPECT_NE(fast.front().describe().find("accum=fast"), std::string::npos) << fast.front().describe();
  item.act = "mxfp8";
  EXPECT_THROW(prewarm_specs(item), Unsupported);
  EXPECT_EQ(linear::fp8::weight_format(ActMode::fp8_token), Format::fp8_channel);
  EXPECT_THROW(linear::fp8::weight_format(ActMode::nvfp4), Unsupported);
}

// A plan as linear::plan makes it, with stand-in kernels (bind makes no CUDA call before it encodes
// the TMA descriptors, after every check).
struct FakeFp8Plan {
  linear::Plan plan;
  explicit FakeFp8Plan(const linear::Caps& caps) {
    plan.caps = caps;
    plan.sm_count = 132;
    for (const auto& [top, bn] : linear::fp8::buckets(caps, 132)) {
      plan.paths.push_back(linear::plan_path(caps, top, 132));
      plan.paths.back().kernel = &test::fake_kernel();
    }
    plan.scratch = linear::fp8::scratch(caps, 132);
    if (caps.act_dtype != DType::f8_e4m3) {
      quantize::Plan q;
      q.caps = linear::quantize_caps(caps);
      q.kernel = &test::fake_kernel();
      plan.quantize = q;
    }
  }
  Scratch scratch() const { return Scratch{fake_device_ptr(8), plan.scratch_bytes(), Device::cuda(0)}; }
};

TEST(LinearFp8, BindValidatesWithoutAGpu) {
  const int64_t n = 256, k = 512, m = 3;
  auto weight = [&](ActMode act) { return test::fake_device_weight(linear::fp8::weight_format(act), n, k); };
  auto y = [&] { return fake_device_tensor(3, DType::bf16, {m, n}); };
  {  // fp8_tensor: the static scale is required, f32 [1] on the device
    FakeFp8Plan fp(fp8_caps(ActMode::fp8_tensor, n, k, 16));
    const TensorView x = fake_device_tensor(2, DType::bf16, {m, k});
    auto bind_with = [&](const TensorView& s) {
      return [&, s] { linear::bind(fp.plan, fp.scratch(), x, weight(ActMode::fp8_tensor), TensorView{}, y(), s); };
    };
    expect_bad_argument(bind_with(TensorView{}), "x_scale", {"required"});
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::bf16, {1})), "x_scale");
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::f32, {2})), "x_scale");
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::f32, {1}, Device::host())), "x_scale");
    // scratch smaller than the plan's layout
    expect_bad_argument([&] {
      linear::bind(fp.plan, Scratch{fake_device_ptr(8), 64, Device::cuda(0)}, x, weight(ActMode::fp8_tensor), TensorView{},
                   y(), fake_device_tensor(4, DType::f32, {1}));
    }, "scratch");
    // x of another dtype than planned
    expect_bad_argument([&] {
      linear::bind(fp.plan, fp.scratch(), fake_device_tensor(2, DType::f8_e4m3, {m, k}), weight(ActMode::fp8_tensor),
                   TensorView{}, y(), fake_device_tensor(4, DType::f32, {1}));
    }, "x");
    // y 2-byte aligned: the epilogue stores pairs of BF16 outputs as 32-bit words
    expect_bad_argument([&] {
      linear::bind(fp.plan, fp.scratch(), x, weight(ActMode::fp8_tensor), TensorView{},
                   TensorView(static_cast<char*>(fake_device_ptr(3)) + 2, DType::bf16, {m, n}, Device::cuda(0)),
                   fake_device_tensor(4, DType::f32, {1}));
    }, "y", {"aligned"});
    // a tile16 weight
    WeightView tiled = weight(ActMode::fp8_tensor);
    tiled.layout = WeightLayout::tile16;
    expect_bad_argument([&] {
      linear::bind(fp.plan, fp.scratch(), x, tiled, TensorView{}, y(), fake_device_tensor(4, DType::f32, {1}));
    }, "weight");
  }
  {  // fp8_token with BF16 x: the op computes the scales, so none may be given
    FakeFp8Plan fp(fp8_caps(ActMode::fp8_token, n, k, 16));
    expect_bad_argument([&] {
      linear::bind(fp.plan, fp.scratch(), fake_device_tensor(2, DType::bf16, {m, k}), weight(ActMode::fp8_token),
                   TensorView{}, y(), fake_device_tensor(4, DType::f32, {m, 1}));
    }, "x_scale", {"must be empty"});
  }
  for (ActMode act : {ActMode::fp8_token, ActMode::fp8_block}) {  // quantized x: its scales, exact shape
    FakeFp8Plan fp(fp8_caps(act, n, k, 16, DType::f8_e4m3));
    const TensorView x = fake_device_tensor(2, DType::f8_e4m3, {m, k});
    auto bind_with = [&](const TensorView& s) {
      return [&, s] { linear::bind(fp.plan, fp.scratch(), x, weight(act), TensorView{}, y(), s); };
    };
    expect_bad_argument(bind_with(TensorView{}), "x_scale", {"already quantized"});
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::f32, {m, 2 + k / 128})), "x_scale");
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::f32, {m + 1, act == ActMode::fp8_token ? 1 : k / 128})),
                        "x_scale");
  }
  {  // an a16 plan takes no x_scale
    linear::Caps c = fp8_caps(ActMode::fp8_tensor, n, k, 1);
    c.act = ActMode::a16;
    linear::Plan plan;
    plan.caps = c;
    plan.paths.push_back(linear::plan_path(c, 1, 132));
    plan.paths.back().kernel = &test::fake_kernel();
    expect_bad_argument([&] {
      linear::bind(plan, Scratch{}, fake_device_tensor(2, DType::bf16, {1, k}), weight(ActMode::fp8_tensor), TensorView{},
                   fake_device_tensor(3, DType::bf16, {1, n}), fake_device_tensor(4, DType::f32, {1}));
    }, "x_scale", {"a16"});
  }
}

}  // namespace
}  // namespace b12x
