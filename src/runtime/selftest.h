// Internal: the runtime's own self-test kernel (runtime/kernels/selftest.cuh), so runtime tests need
// no op family. out[i] = a * i + b.
#pragma once
#include "b12x/runtime/jit.h"

namespace b12x::detail {

KernelSpec selftest_spec(int threads = 256);

}  // namespace b12x::detail
