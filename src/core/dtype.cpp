#include "b12x/core/dtype.h"

#include "b12x/core/error.h"

namespace b12x {

namespace {
struct DTypeInfo {
  DType t;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::bf16, "bf16", 2},       {DType::f16, "f16", 2},         {DType::f32, "f32", 4},
    {DType::f64, "f64", 8},         {DType::f8_e4m3, "f8_e4m3", 1}, {DType::f8_e5m2, "f8_e5m2", 1},
    {DType::ue8m0, "ue8m0", 1},     {DType::u8, "u8", 1},           {DType::i8, "i8", 1},
    {DType::i32, "i32", 4},         {DType::i64, "i64", 8},
};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfo)
    if (i.t == t) return i;
  throw Error("unknown dtype value " + std::to_string(static_cast<int>(t)));
}
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }

DType parse_dtype(std::string_view name, const std::string& arg) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.t;
  std::string all;
  for (const auto& i : kInfo) all += (all.empty() ? "" : ", ") + std::string(i.name);
  fail_arg(arg, "unknown dtype '", name, "' (expected one of: ", all, ")");
}

bool is_float_activation(DType t) { return t == DType::bf16 || t == DType::f16 || t == DType::f32; }

}  // namespace b12x
