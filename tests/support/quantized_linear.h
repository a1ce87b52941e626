// The GPU tests of linear with quantized activations (tests/linear/linear_fp8_gpu.cpp: fp8_tensor /
// fp8_token / fp8_block; linear_act16_gpu.cpp: mxfp8 / nvfp4): one runner that binds and runs a plan
// into a poisoned y (x quantized by the op, or on the host for an f8_e4m3 / u8 plan), the float64
// reference of the same quantized operands, and the agreement check. Header-only (inline).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/linear/linear.h"
#include "runtime/cuda_api.h"
#include "support/device.h"

namespace b12x::test {

// Runs the op on the device into a y poisoned with 0xFF (NaN); returns y's bytes. input_scale: the
// static scale of fp8_tensor (bind's x_scale) or NVFP4's s2 (x_scale when the op quantizes x, else
// input_scale beside the given codes' block scales); unused by the other modes.
class QuantizedLinearRunner {
 public:
  explicit QuantizedLinearRunner(const linear::Plan& plan) : plan_(plan), scratch_(plan.scratch_bytes()) {}

  std::vector<uint8_t> run(const HostTensor& x, float input_scale, const DeviceWeight& w, const HostTensor* bias,
                           cudaStream_t stream = nullptr) {
    const linear::Caps& caps = plan_.caps;
    const int64_t m = x.view().size(0);
    const bool tensor_scale = caps.act == ActMode::fp8_tensor || caps.act == ActMode::nvfp4;
    DeviceTensor dx, dscale, dbias, ds2;
    HostTensor scale_host(DType::f32, {1});
    scale_host.ptr<float>()[0] = input_scale;
    if (caps.act_dtype == DType::f8_e4m3 || caps.act_dtype == DType::u8) {  // quantized on the host
      const QuantizedActivations qa = quantize_activations(x.view(), caps.act, input_scale);
      dx = DeviceTensor(qa.q.view());
      dscale = DeviceTensor(caps.act == ActMode::fp8_tensor ? scale_host.view() : qa.scales.view());
      if (caps.act == ActMode::nvfp4) ds2 = DeviceTensor(scale_host.view());
    } else {
      dx = DeviceTensor(x.view());
      if (tensor_scale) dscale = DeviceTensor(scale_host.view());
    }
    if (bias) dbias = DeviceTensor(bias->view());
    DeviceBuffer y(static_cast<size_t>(m * caps.n) * dtype_size(caps.out_dtype));
    y.fill(0xFF);
    const linear::Binding b = linear::bind(plan_, scratch_.scratch, dx.view, w.view, bias ? dbias.view : TensorView{},
                                           TensorView(y.get(), caps.out_dtype, {m, caps.n}, this_device()), dscale.view,
                                           ds2.view);
    linear::run(b, stream);
    B12X_CUDA_CHECK(cudaGetLastError());
    B12X_CUDA_CHECK(cudaDeviceSynchronize());
    return y.download();
  }

 private:
  const linear::Plan& plan_;
  DeviceScratch scratch_;
};

// reference_linear(act): the host quantizers, float64 accumulation.
inline HostTensor quantized_reference(const HostTensor& x, const PackedWeight& w, ActMode act, float input_scale,
                                      const HostTensor* bias) {
  HostTensor ref(DType::f64, {x.view().size(0), w.n});
  reference_linear({x.view(), w.view(), act, input_scale, bias ? bias->view() : TensorView{}, ref.view()});
  return ref;
}

struct Agreement {
  double rel_l2 = 0, cosine = 0;
  int64_t non_finite = 0, first_bad = -1;  // non-finite outputs (unwritten: still the NaN poison)
};

inline Agreement compare(const std::vector<uint8_t>& y, DType out, const HostTensor& ref) {
  Agreement a;
  double diff = 0, nref = 0, ngot = 0, dot = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double got = load_f32(y.data(), out, i), want = ref.ptr<double>()[i];
    if (!std::isfinite(got)) {
      if (a.non_finite++ == 0) a.first_bad = i;
      continue;
    }
    diff += (got - want) * (got - want);
    nref += want * want;
    ngot += got * got;
    dot += got * want;
  }
  a.rel_l2 = nref > 0 ? std::sqrt(diff / nref) : std::sqrt(diff);
  a.cosine = nref > 0 && ngot > 0 ? dot / std::sqrt(nref * ngot) : (diff == 0 ? 1.0 : 0.0);
  return a;
}

// Every output written and finite, relative L2 <= tol_f32 (FP32 y; issue 6's 1e-3 by default) or
// 1e-2 (16-bit y), cosine >= 0.9999. Returns the relative L2 error.
inline double expect_close(const std::vector<uint8_t>& y, DType out, const HostTensor& ref, const std::string& what,
                           double tol_f32 = 1e-3) {
  const Agreement a = compare(y, out, ref);
  const int64_t n = ref.view().size(1);
  EXPECT_EQ(a.non_finite, 0) << what << ": unwritten or non-finite outputs, first at (" << a.first_bad / n << ", "
                             << a.first_bad % n << ")";
  EXPECT_LE(a.rel_l2, out == DType::f32 ? tol_f32 : 1e-2) << what;
  EXPECT_GE(a.cosine, 0.9999) << what;
  return a.rel_l2;
}

}  // namespace b12x::test
