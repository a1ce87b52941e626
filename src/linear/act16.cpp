// MXFP8 / NVFP4 activations through the 16-bit paths (src/linear/act16.h): rules, scratch, bind
// (the quantize and decode bindings, x16) and the launches before the GEMM kernel.
#include "linear/act16.h"

#include "b12x/core/error.h"
#include "b12x/formats/format.h"
#include "b12x/formats/mx.h"
#include "b12x/formats/nvfp4.h"
#include "linear/fp8_gemm.h"  // quantizes_x: the rule every quantized mode shares

namespace b12x::linear::act16 {

namespace {

// The weight format whose checkpoint layout the quantized x has: MXFP8 x is E4M3 [M, K] with UE8M0
// [M, K/32], NVFP4 x is packed E2M1 [M, K/2] (even element in the low nibble) with E4M3 [M, K/16]:
// byte for byte an mxfp8 / nvfp4 weight of M rows, so formats.dequantize decodes it.
Format x_format(ActMode act) { return act == ActMode::mxfp8 ? Format::mxfp8 : Format::nvfp4; }

int64_t x_group(ActMode act) { return act == ActMode::mxfp8 ? kMxGroup : kNvfp4Group; }

}  // namespace

bool serves(ActMode act) { return act == ActMode::mxfp8 || act == ActMode::nvfp4; }

Caps inner_caps(const Caps& caps) {
  Caps c = caps;
  c.act = ActMode::a16;
  c.act_dtype = DType::bf16;
  return c;
}

void validate(const Caps& caps) {
  check_act_supported(caps.format, caps.act);  // Unsupported: the weight format does not take these activations
  const bool mx = caps.act == ActMode::mxfp8;
  const DType quantized = mx ? DType::f8_e4m3 : DType::u8;
  B12X_CHECK_ARG(caps.act_dtype == DType::bf16 || caps.act_dtype == DType::f16 || caps.act_dtype == DType::f32 ||
                     caps.act_dtype == quantized,
                 "act_dtype", "must be bf16, f16 or f32 (x quantized by the op) or ", dtype_name(quantized),
                 mx ? " (x already quantized: E4M3 codes, its UE8M0 scales as x_scale)"
                    : " (x already quantized: packed E2M1 [M, K/2], its E4M3 block scales as x_scale)",
                 " for ", act_mode_name(caps.act), " activations, got ", dtype_name(caps.act_dtype));
  B12X_CHECK_ARG(caps.k % x_group(caps.act) == 0, "k", "K (in_features) must be a multiple of ", x_group(caps.act),
                 " for ", act_mode_name(caps.act), " activations, got K = ", caps.k);
  validate_caps(inner_caps(caps));  // the 16-bit path's rules (layout, kernel, max_tokens > 16 needs tile16 ...)
}

dequant::Caps decode_caps(const Caps& caps) {
  dequant::Caps d;
  d.format = x_format(caps.act);
  d.n = caps.max_tokens;
  d.k = caps.k;
  d.out_dtype = DType::bf16;
  return d;
}

ScratchLayout scratch(const Caps& caps) {
  ScratchLayout l;
  const size_t rows = static_cast<size_t>(caps.max_tokens), k = static_cast<size_t>(caps.k);
  const size_t group = static_cast<size_t>(x_group(caps.act));
  if (quantizes_x(caps)) {
    l.add("linear.xq", caps.act == ActMode::mxfp8 ? rows * k : rows * k / 2);
    l.add("linear.xq_scales", rows * (k / group));  // one byte per group: UE8M0 / E4M3
  }
  l.add("linear.x16", rows * k * 2);
  return l;
}

void bind(const Plan& plan, const Scratch& scratch, const TensorView& x_scale, const TensorView& input_scale,
          Binding& b) {
  const Caps& caps = plan.caps;
  const int64_t m = b.m, k = caps.k, groups = k / x_group(caps.act);
  const Device dev = b.x.device;
  WeightView xw;  // x as the decoder sees it: a weight of m rows
  xw.format = x_format(caps.act);
  xw.n = m;
  xw.k = k;
  xw.scale2 = 1.0f;  // NVFP4's per-tensor scale stays apart (act_scale, applied in the epilogue)
  const bool quantizes = quantizes_x(caps);
  if (caps.act == ActMode::nvfp4) {  // the static input scale s2 (ModelOpt input_scale): x_scale, or input_scale for u8 x
    const char* s2_name = quantizes ? "x_scale" : "input_scale";
    const TensorView& s2 = quantizes ? x_scale : input_scale;
    B12X_CHECK_ARG(!s2.empty(), s2_name,
                   "is required for nvfp4 activations: the static input scale s2 (ModelOpt input_scale), f32 [1]");
    expect(s2, s2_name).present().dtype(DType::f32).shape({1}).on_cuda().same_device(b.x, "x").aligned(4);
    b.act_scale = static_cast<const float*>(s2.data);
    if (!quantizes) {
      B12X_CHECK_ARG(!x_scale.empty(), "x_scale",
                     "is required: x is already quantized (nvfp4), so bind needs its E4M3 block scales [M, K/16]");
      expect(x_scale, "x_scale").present().dtype(DType::f8_e4m3).shape({m, groups}).contiguous().on_cuda().same_device(
          b.x, "x");
    }
  } else if (!quantizes) {
    B12X_CHECK_ARG(!x_scale.empty(), "x_scale",
                   "is required: x is already quantized (mxfp8), so bind needs its UE8M0 scales [M, K/32]");
    expect(x_scale, "x_scale").present().dtype(DType::ue8m0).shape({m, groups}).contiguous().on_cuda().same_device(
        b.x, "x");
  } else {
    B12X_CHECK_ARG(x_scale.empty(), "x_scale", "must be empty for mxfp8 activations that the op quantizes itself ",
                   "(their scales are computed from x), got ", x_scale.describe());
  }
  b.x_scale = x_scale;

  if (quantizes) {
    const bool mx = caps.act == ActMode::mxfp8;
    const TensorView q(scratch_region(scratch, plan.scratch, "linear.xq"), mx ? DType::f8_e4m3 : DType::u8,
                       {m, mx ? k : k / 2}, dev);
    const TensorView s(scratch_region(scratch, plan.scratch, "linear.xq_scales"), mx ? DType::ue8m0 : DType::f8_e4m3,
                       {m, groups}, dev);
    b.quant = quantize::bind(*plan.quantize, Scratch{}, b.x, mx ? TensorView{} : x_scale, q, s);
    xw.data = q;
    xw.scale = s;
  } else {
    xw.data = b.x;
    xw.scale = x_scale;
  }
  b.x16 = TensorView(scratch_region(scratch, plan.scratch, "linear.x16"), DType::bf16, {m, k}, dev);
  b.act_decode = dequant::bind(*plan.act_decode, Scratch{}, xw, b.x16);
}

void run_prologue(const Binding& b, cudaStream_t stream) {
  if (b.plan->quantize) quantize::run(b.quant, stream);
  dequant::run(b.act_decode, stream);
}

}  // namespace b12x::linear::act16
