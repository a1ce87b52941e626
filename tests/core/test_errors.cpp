// The error hierarchy and the helpers that build BadArgument / Unsupported messages.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "b12x/core/error.h"

namespace {

using namespace b12x;

static_assert(std::is_base_of_v<std::runtime_error, Error>);
static_assert(std::is_base_of_v<Error, BadArgument>);
static_assert(std::is_base_of_v<Error, Unsupported>);
static_assert(std::is_base_of_v<Error, IoError>);
static_assert(std::is_base_of_v<Error, KernelResolutionFrozenError>);
static_assert(std::is_base_of_v<Error, CudaError>);

// Throws e and reports which catch clauses would take it.
template <class E>
std::string classify(const E& e) {
  try {
    throw e;
  } catch (const BadArgument&) {
    return "BadArgument";
  } catch (const Unsupported&) {
    return "Unsupported";
  } catch (const IoError&) {
    return "IoError";
  } catch (const KernelResolutionFrozenError&) {
    return "KernelResolutionFrozenError";
  } catch (const CudaError&) {
    return "CudaError";
  } catch (const Error&) {
    return "Error";
  } catch (...) {
    return "other";
  }
}

TEST(Errors, EachSubclassIsCaughtAsItselfAndAsError) {
  EXPECT_EQ(classify(BadArgument("a", "r")), "BadArgument");
  EXPECT_EQ(classify(Unsupported("u")), "Unsupported");
  EXPECT_EQ(classify(IoError("i")), "IoError");
  EXPECT_EQ(classify(KernelResolutionFrozenError("k")), "KernelResolutionFrozenError");
  EXPECT_EQ(classify(CudaError("c")), "CudaError");
  EXPECT_EQ(classify(Error("e")), "Error");

  // Siblings are distinct types; every one is a b12x::Error and a std::runtime_error.
  const Unsupported u("x");
  const Error& as_error = u;
  EXPECT_EQ(dynamic_cast<const BadArgument*>(&as_error), nullptr);
  EXPECT_NE(dynamic_cast<const Unsupported*>(&as_error), nullptr);
  EXPECT_THROW(throw BadArgument("a", "r"), Error);
  EXPECT_THROW(throw CudaError("cuInit failed"), std::runtime_error);
}

TEST(Errors, BadArgumentMessageAndName) {
  const BadArgument e("weight", "dtype must be u8, got f32");
  EXPECT_EQ(e.argument(), "weight");
  EXPECT_STREQ(e.what(), "argument 'weight': dtype must be u8, got f32");
  const BadArgument copy = e;  // copies keep the name
  EXPECT_EQ(copy.argument(), "weight");
  EXPECT_STREQ(Unsupported("mxfp4 on sm_80").what(), "mxfp4 on sm_80");
}

TEST(Errors, FailArgConcatenatesPieces) {
  try {
    fail_arg("k", "must be a multiple of ", 32, ", got ", int64_t{-48}, " (", 2.5, ")");
    FAIL() << "fail_arg returned";
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), "k");
    EXPECT_STREQ(e.what(), "argument 'k': must be a multiple of 32, got -48 (2.5)");
  }
}

TEST(Errors, FailUnsupportedThrowsUnsupported) {
  try {
    fail_unsupported("format ", "iq2_xs", " with ", 8, "-bit activations");
    FAIL() << "fail_unsupported returned";
  } catch (const BadArgument&) {
    FAIL() << "Unsupported must not be a BadArgument";
  } catch (const Unsupported& e) {
    EXPECT_STREQ(e.what(), "format iq2_xs with 8-bit activations");
  }
}

TEST(Errors, CheckArgMacro) {
  int evaluated = 0;
  auto piece = [&] {
    ++evaluated;
    return std::string("detail");
  };
  EXPECT_NO_THROW(B12X_CHECK_ARG(1 + 1 == 2, "x", "never ", piece()));
  EXPECT_EQ(evaluated, 0);  // the message is only built on failure

  try {
    const int n = 7;
    B12X_CHECK_ARG(n % 2 == 0, "n", "must be even, got ", n, " [", piece(), "]");
    FAIL() << "check passed";
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), "n");
    EXPECT_STREQ(e.what(), "argument 'n': must be even, got 7 [detail]");
  }
  EXPECT_EQ(evaluated, 1);

  // Behaves as one statement in an unbraced if/else.
  bool reached_else = false;
  if (evaluated < 0)
    B12X_CHECK_ARG(false, "z", "unreachable");
  else
    reached_else = true;
  EXPECT_TRUE(reached_else);
}

}  // namespace
