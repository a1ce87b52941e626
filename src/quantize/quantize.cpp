// GPU activation quantization (include/b12x/quantize/quantize.h): plan validates and resolves the
// kernel (src/quantize/kernels/quantize.cuh), bind checks the tensors without touching CUDA, run only
// launches.
#include "b12x/quantize/quantize.h"

#include <algorithm>
#include <limits>
#include <string>

#include "b12x/core/error.h"
#include "b12x/formats/mx.h"
#include "b12x/formats/nvfp4.h"
#include "b12x/formats/swizzle.h"
#include "device/fast_div.cuh"

namespace b12x::quantize {

namespace {

constexpr int kVecElems = 8;             // elements per vector (one 16-byte load of 16-bit x)
constexpr int64_t kVecsPerCta = 1024;    // kQuantVecsPerCta
constexpr unsigned kGroupThreads = 256;  // kQuantThreads
constexpr int kRowsMaxThreads = 1024;    // kQuantRowsMaxThreads
constexpr int64_t kMaxGrid = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxVecs = int64_t{1} << 40;  // device::FastDiv's numerator bound

struct LayoutName {
  ScaleLayout layout;
  const char* name;
};
constexpr LayoutName kLayouts[] = {{ScaleLayout::linear, "linear"}, {ScaleLayout::swizzled, "swizzled"}};

// Elements per scale (the group) of a mode; fp8_tensor has none (8: its vector).
int64_t group_elems(ActMode act) {
  switch (act) {
    case ActMode::fp8_tensor:
    case ActMode::fp8_token: return kVecElems;
    case ActMode::fp8_block: return 128;
    case ActMode::mxfp8: return kMxGroup;
    case ActMode::nvfp4: return kNvfp4Group;
    case ActMode::a16: break;
  }
  fail_arg("act", "a16 activations are used as given: there is nothing to quantize");
}

int in_code(DType d) {
  switch (d) {
    case DType::bf16: return 0;
    case DType::f16: return 1;
    case DType::f32: return 2;
    default: fail_arg("x_dtype", "must be bf16, f16 or f32, got ", dtype_name(d));
  }
}

bool has_byte_scales(ActMode act) { return act == ActMode::mxfp8 || act == ActMode::nvfp4; }
bool uses_input_scale(ActMode act) { return act == ActMode::fp8_tensor || act == ActMode::nvfp4; }

// Everything plan can check without CUDA.
void check_caps(const Caps& caps) {
  const int64_t group = group_elems(caps.act);
  in_code(caps.x_dtype);
  B12X_CHECK_ARG(caps.k > 0, "k", "K (row length) must be positive, got ", caps.k);
  B12X_CHECK_ARG(caps.k % group == 0, "k", "K must be a multiple of ", group, " for ", act_mode_name(caps.act),
                 " activations (", group == kVecElems ? "16-byte rows" : "the scale group", "), got K = ", caps.k);
  B12X_CHECK_ARG(caps.k / kVecElems <= std::numeric_limits<int32_t>::max(), "k", "K = ", caps.k, " is too large");
  B12X_CHECK_ARG(caps.scale_layout == ScaleLayout::linear || has_byte_scales(caps.act), "scale_layout",
                 "swizzled scales exist for mxfp8 and nvfp4 activations only, got ", act_mode_name(caps.act));
}

// fp8_token: vectors per thread held in registers (0: the row is read twice) and threads per row.
struct RowsShape {
  int slots;
  int threads;
};
RowsShape rows_shape(int64_t k, DType x_dtype) {
  const int64_t vecs = k / kVecElems;
  auto round32 = [](int64_t v) { return static_cast<int>((v + 31) / 32 * 32); };
  // FP32 x: a vector is 8 registers, so at most 2 per thread fit the 64 of a 1024-thread CTA.
  const int slots = x_dtype == DType::f32 ? 2 : 4;
  if (vecs <= 256) return {1, round32(vecs)};
  if (vecs <= slots * kRowsMaxThreads) return {slots, round32((vecs + slots - 1) / slots)};
  return {0, kRowsMaxThreads};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// CTAs writing the swizzled padding bytes for `rows` rows.
int64_t pad_ctas(const Caps& caps, int64_t rows) {
  if (caps.scale_layout != ScaleLayout::swizzled) return 0;
  const int64_t groups = caps.k / group_elems(caps.act);
  const SwizzledScaleShape s = swizzled_scale_shape(rows, groups);
  const int64_t pad = (s.rows_padded - rows) * s.cols_padded + rows * (s.cols_padded - groups);
  return ceil_div(pad, kGroupThreads);
}

void expect_empty(const TensorView& t, const std::string& name, const Caps& caps, const char* why) {
  B12X_CHECK_ARG(t.empty(), name, "must be empty for ", act_mode_name(caps.act), " activations (", why, "), got ",
                 t.describe());
}

}  // namespace

std::string_view scale_layout_name(ScaleLayout l) {
  for (const auto& n : kLayouts)
    if (n.layout == l) return n.name;
  throw Error(detail::concat("unknown scale layout value ", static_cast<int>(l)));
}

ScaleLayout parse_scale_layout(std::string_view name, const std::string& arg) {
  for (const auto& n : kLayouts)
    if (n.name == name) return n.layout;
  fail_arg(arg, "unknown scale layout '", name, "' (expected linear or swizzled)");
}

OutputShapes output_shapes(const Caps& caps, int64_t rows) {
  check_caps(caps);
  B12X_CHECK_ARG(rows >= 0, "rows", "must be non-negative, got ", rows);
  const int64_t k = caps.k;
  OutputShapes o;
  switch (caps.act) {
    case ActMode::fp8_tensor: o.q = {rows, k}; break;
    case ActMode::fp8_token: o.q = {rows, k}, o.scales = {rows, 1}; break;
    case ActMode::fp8_block: o.q = {rows, k}, o.scales = {rows, k / 128}; break;
    case ActMode::mxfp8:
      o.q = {rows, k}, o.scales_dtype = DType::ue8m0, o.scales = {rows, k / kMxGroup};
      break;
    case ActMode::nvfp4:
      o.q_dtype = DType::u8, o.q = {rows, k / 2}, o.scales_dtype = DType::f8_e4m3, o.scales = {rows, k / kNvfp4Group};
      break;
    case ActMode::a16: break;  // refused by check_caps
  }
  if (caps.scale_layout == ScaleLayout::swizzled) o.scales = {swizzled_scale_shape(o.scales[0], o.scales[1]).bytes()};
  return o;
}

HostOutputs reference_quantize(const Caps& caps, const TensorView& x, float input_scale) {
  check_caps(caps);
  expect(x, "x").host().dtype(caps.x_dtype).ndim(2).shape({-1, caps.k}).contiguous();
  QuantizedActivations a = quantize_activations(x, caps.act, input_scale);
  HostOutputs out;
  out.q = std::move(a.q);
  if (caps.act == ActMode::fp8_tensor) return out;
  if (caps.scale_layout == ScaleLayout::linear) {
    out.scales = std::move(a.scales);
  } else {
    out.scales = HostTensor(a.scales.view().dtype, output_shapes(caps, x.size(0)).scales);
    swizzle_scales(a.scales.view(), out.scales.view());
  }
  return out;
}

KernelSpec kernel_spec(const Caps& caps) {
  check_caps(caps);
  const int in = in_code(caps.x_dtype);
  KernelSpec s;
  s.kernel = "quantize.activations";
  s.source = "quantize/kernels/quantize.cuh";
  s.config = {{"act", std::string(act_mode_name(caps.act))}, {"x", std::string(dtype_name(caps.x_dtype))}};
  if (caps.act == ActMode::fp8_token) {
    const int slots = rows_shape(caps.k, caps.x_dtype).slots;
    s.name_expression = detail::concat("b12x::quantize_rows_kernel<", in, ", ", slots, ">");
    s.config.emplace_back("slots", std::to_string(slots));
  } else {
    const bool swz = caps.scale_layout == ScaleLayout::swizzled;
    s.name_expression =
        caps.act == ActMode::nvfp4
            ? detail::concat("b12x::quantize_nvfp4_kernel<", in, ", ", swz ? 1 : 0, ">")
            : detail::concat("b12x::quantize_groups_kernel<", static_cast<int>(caps.act), ", ", in, ", ", swz ? 1 : 0, ">");
    if (has_byte_scales(caps.act)) s.config.emplace_back("scales", std::string(scale_layout_name(caps.scale_layout)));
  }
  s.archs = {"sm_90a", "sm_120a"};  // CUDA cores only: SM120 runs it too
  // __launch_bounds__ (256, kQuantMinCtas: 4, FP32 x 3) and (1024, 1)
  s.max_registers = caps.act != ActMode::fp8_token && caps.x_dtype == DType::f32 ? 80 : 64;
  // Bit-exactness relies on IEEE FP32 (div_rn / mul_rn; this makes it a property of the whole kernel).
  s.options = {"--ftz=false", "--fmad=false", "--prec-div=true"};
  return s;
}

std::vector<KernelSpec> all_kernel_specs() {
  std::vector<KernelSpec> specs;
  for (DType x : {DType::bf16, DType::f16, DType::f32}) {
    for (ActMode act : {ActMode::fp8_tensor, ActMode::fp8_block, ActMode::mxfp8, ActMode::nvfp4}) {
      specs.push_back(kernel_spec({act, 128, x, ScaleLayout::linear}));
      if (has_byte_scales(act)) specs.push_back(kernel_spec({act, 128, x, ScaleLayout::swizzled}));
    }
    for (int64_t k : {256, 8192, 65536}) specs.push_back(kernel_spec({ActMode::fp8_token, k, x}));  // slots 1, 4 (f32: 2), 0
  }
  return specs;
}

Plan plan(const Caps& caps, cudaStream_t stream) {
  check_caps(caps);  // before resolving: argument errors never need a GPU
  Plan p;
  p.caps = caps;
  p.block = dim3(caps.act == ActMode::fp8_token ? static_cast<unsigned>(rows_shape(caps.k, caps.x_dtype).threads) : kGroupThreads);
  p.kernel = &resolve_kernel(kernel_spec(caps), stream);
  return p;
}

Binding bind(const Plan& plan, const Scratch& scratch, const TensorView& x, const TensorView& input_scale,
             const TensorView& q, const TensorView& scales) {
  B12X_CHECK_ARG(plan.kernel != nullptr, "plan", "has no kernel; make it with quantize::plan()");
  const Caps& caps = plan.caps;
  expect(x, "x").present().dtype(caps.x_dtype).ndim(2).shape({-1, caps.k}).contiguous().on_cuda().aligned(16);
  const int64_t rows = x.size(0);
  const OutputShapes o = output_shapes(caps, rows);
  if (caps.act == ActMode::fp8_token)
    B12X_CHECK_ARG(rows <= kMaxGrid, "x", "has ", rows, " rows; at most ", kMaxGrid, " (one CTA per row)");
  else
    B12X_CHECK_ARG(rows < kMaxVecs / (caps.k / kVecElems) &&
                       ceil_div(rows * (caps.k / kVecElems), kVecsPerCta) + pad_ctas(caps, rows) <= kMaxGrid,
                   "x", "M x K = ", rows, " x ", caps.k, " is too large for one launch");
  if (caps.scale_layout == ScaleLayout::swizzled)
    B12X_CHECK_ARG(rows <= std::numeric_limits<int32_t>::max() - 127, "x", "has ", rows,
                   " rows; swizzled scales take at most 2^31 - 128");

  if (uses_input_scale(caps.act))
    expect(input_scale, "input_scale").present().dtype(DType::f32).shape({1}).on_cuda().same_device(x, "x").aligned(4);
  else
    expect_empty(input_scale, "input_scale", caps, "their scales are computed from x");

  expect(q, "q").present().dtype_in({o.q_dtype}).shape(o.q).contiguous().on_cuda().same_device(x, "x").aligned(
      o.q_dtype == DType::u8 ? 4 : 8);
  if (o.scales.empty()) {
    expect_empty(scales, "scales", caps, "the static input_scale is the scale");
  } else {
    auto e = expect(scales, "scales");
    e.present();
    if (o.scales_dtype == DType::f32)
      e.dtype(DType::f32).aligned(4);
    else
      e.dtype_in({o.scales_dtype, DType::u8});
    e.shape(o.scales).contiguous().on_cuda().same_device(x, "x");
  }
  check_scratch(scratch, plan.scratch);

  Binding b;
  b.plan = &plan;
  b.x = x;
  b.input_scale = input_scale;
  b.q = q;
  b.scales = scales;
  return b;
}

void run(const Binding& binding, cudaStream_t stream) {
  B12X_CHECK_ARG(binding.plan != nullptr && binding.plan->kernel != nullptr, "binding",
                 "has no plan; make it with quantize::bind()");
  const Plan& p = *binding.plan;
  long long rows = binding.x.size(0);
  if (rows == 0) return;
  const unsigned char* x = static_cast<const unsigned char*>(binding.x.data);
  unsigned char* q = static_cast<unsigned char*>(binding.q.data);
  unsigned char* scales = static_cast<unsigned char*>(binding.scales.data);
  int vecs_per_row = static_cast<int>(p.caps.k / kVecElems);
  if (p.caps.act == ActMode::fp8_token) {
    float* row_scales = reinterpret_cast<float*>(scales);
    void* args[] = {&x, &q, &row_scales, &vecs_per_row};
    p.kernel->launch(dim3(static_cast<unsigned>(rows)), p.block, 0, stream, args);
    return;
  }
  const float* input_scale = static_cast<const float*>(binding.input_scale.data);
  long long main_ctas = ceil_div(rows * vecs_per_row, kVecsPerCta);
  const int64_t grid = main_ctas + pad_ctas(p.caps, rows);
  // Swizzled scales need (row, column) of a vector; vecs_per_row >= 2 there (K % 16 == 0).
  device::FastDiv row_div{};
  if (p.caps.scale_layout == ScaleLayout::swizzled) row_div = device::make_fast_div(static_cast<unsigned>(vecs_per_row));
  void* args[] = {&x, &input_scale, &q, &scales, &rows, &vecs_per_row, &main_ctas, &row_div};
  p.kernel->launch(dim3(static_cast<unsigned>(grid)), p.block, 0, stream, args);
}

}  // namespace b12x::quantize
