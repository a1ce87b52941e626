// Shared by the host repack (formats/tile16.cpp) and the GPU pack (formats/tile16_pack.cpp).
#pragma once
#include "b12x/formats/weight.h"

namespace b12x::tile16_detail {

// The rules common to every direction: layouts, same format and shape, both valid, no shared bytes
// (a permutation cannot run in place). Errors name 'in' / 'out'.
void check_pair(const WeightView& in, const WeightView& out, WeightLayout from, WeightLayout to);

}  // namespace b12x::tile16_detail
