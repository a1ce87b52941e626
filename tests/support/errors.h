// Shared assertion for argument validation: `f` must throw BadArgument naming `arg`, and its message
// must mention every string in `mentions` (the rule, the expected and the actual value).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "b12x/core/error.h"

namespace b12x::test {

inline void expect_bad_argument(const std::function<void()>& f, const std::string& arg,
                                const std::vector<std::string>& mentions = {}) {
  try {
    f();
    ADD_FAILURE() << "expected BadArgument naming '" << arg << "'";
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
    for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
  }
}

}  // namespace b12x::test
