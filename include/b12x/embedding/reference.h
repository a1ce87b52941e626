// CPU reference of the packed embedding lookup: out[t, :] = decode(table[ids[t]]).
#pragma once
#include "b12x/core/tensor.h"

namespace b12x {

// table: u8 [V, K/32, 34] (Q8_0); ids: i32/i64 [T] with every id in [0, V) (else BadArgument
// naming 'ids', the position and the value); out: bf16 (or f32) [T, K].
void reference_embedding_q8_0(const TensorView& table, const TensorView& ids, const TensorView& out);

}  // namespace b12x
