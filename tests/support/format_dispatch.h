// Runtime format / output dtype -> compile-time device constant, for tests that instantiate the
// portable kernel helpers (device/decode.cuh, the kernels' host-compilable parts) on the CPU.
#pragma once
#include <gtest/gtest.h>

#include <type_traits>

#include "b12x/core/dtype.h"
#include "b12x/formats/format.h"
#include "device/decode.cuh"

namespace b12x::test {

// Calls fn(std::integral_constant<int, kFmt>) for a runtime format.
template <class Fn>
void with_format(Format f, Fn&& fn) {
  namespace dev = b12x::device;
  switch (f) {
    case Format::bf16: return fn(std::integral_constant<int, dev::kFmtBf16>{});
    case Format::f16: return fn(std::integral_constant<int, dev::kFmtF16>{});
    case Format::fp8_tensor: return fn(std::integral_constant<int, dev::kFmtFp8Tensor>{});
    case Format::fp8_channel: return fn(std::integral_constant<int, dev::kFmtFp8Channel>{});
    case Format::fp8_block: return fn(std::integral_constant<int, dev::kFmtFp8Block>{});
    case Format::mxfp8: return fn(std::integral_constant<int, dev::kFmtMxfp8>{});
    case Format::nvfp4: return fn(std::integral_constant<int, dev::kFmtNvfp4>{});
    case Format::mxfp4: return fn(std::integral_constant<int, dev::kFmtMxfp4>{});
    case Format::q8_0: return fn(std::integral_constant<int, dev::kFmtQ8_0>{});
    case Format::iq2_xxs: return fn(std::integral_constant<int, dev::kFmtIq2xxs>{});
    case Format::iq2_xs: return fn(std::integral_constant<int, dev::kFmtIq2xs>{});
  }
  FAIL() << "unknown format";
}

}  // namespace b12x::test
