#include <gtest/gtest.h>
#include "b12x/b12x.h"
TEST(Tensor, Placeholder) { EXPECT_EQ(b12x::dtype_size(b12x::DType::bf16), 2u); }
