// Raw file helpers for the CLI: whole-file reads checked against the size a tensor needs, and
// writes that replace the target atomically (temp file + rename).
#pragma once
#include <string>

#include "b12x/core/tensor.h"

namespace b12x::cli {

// Fills `dst` (contiguous host) from `path`; the file must hold exactly dst.nbytes() bytes.
// Errors name the option (`arg`) and say what size was expected for which tensor.
void read_into(const std::string& path, const TensorView& dst, const std::string& arg);
void write_from(const std::string& path, const TensorView& src, const std::string& arg);

}  // namespace b12x::cli
