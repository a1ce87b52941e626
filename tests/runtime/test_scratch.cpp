#include <gtest/gtest.h>

#include "b12x/b12x.h"
#include "b12x/runtime/scratch.h"

namespace b12x {
namespace {

TEST(Scratch, RegionsAreAlignedAndPacked) {
  ScratchLayout l;
  EXPECT_EQ(l.add("a", 10), 0u);
  EXPECT_EQ(l.add("b", 3000), 1024u);
  EXPECT_EQ(l.add("c", 1, 4096), 4096u);
  EXPECT_EQ(l.bytes(), 4097u);
  EXPECT_EQ(l.offset("b"), 1024u);
  EXPECT_THROW(l.offset("zzz"), Error);
  EXPECT_THROW(l.add("a", 1), Error);
}

TEST(Scratch, CheckNamesTheScratchArgument) {
  ScratchLayout l;
  l.add("a", 5000);
  alignas(1024) static char buf[8192];
  EXPECT_NO_THROW(check_scratch({buf, sizeof buf}, l));
  try {
    check_scratch({buf, 100}, l);
    FAIL();
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), "scratch");
    EXPECT_NE(std::string(e.what()).find("5000"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_scratch({buf + 8, 6000}, l), BadArgument);
  EXPECT_THROW(check_scratch({nullptr, 0}, l), BadArgument);
  EXPECT_EQ(scratch_region({buf, sizeof buf}, l, "a"), static_cast<void*>(buf));
  ScratchLayout empty;
  EXPECT_NO_THROW(check_scratch({nullptr, 0}, empty));
}

TEST(Scratch, AlignedScratchTakesTheFirstAlignedAddressOfABuffer) {
  alignas(1024) static char buf[4096];
  ScratchLayout l;
  l.add("a", 2000);
  for (size_t shift : {0, 1, 8, 1023}) {
    const Scratch s = aligned_scratch(buf + shift, sizeof buf - shift, l.bytes(), Device::host());
    EXPECT_EQ(s.data, static_cast<void*>(shift == 0 ? buf : buf + 1024)) << shift;
    EXPECT_EQ(s.bytes, l.bytes());
    EXPECT_NO_THROW(check_scratch(s, l));
  }
  try {
    aligned_scratch(buf + 8, 2100, 2000, Device::host());  // 1016 bytes of padding leave 1084
    FAIL();
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), "scratch");
  }
}

}  // namespace
}  // namespace b12x
