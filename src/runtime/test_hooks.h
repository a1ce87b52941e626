// Internal hooks for tests only: replace (or add) an embedded kernel source in this process, e.g. to
// check that a header change changes cache keys or that compile errors surface with the NVRTC log.
#pragma once
#include <string>

namespace b12x::detail {

void override_embedded_source(const std::string& path, const std::string& text);
void clear_embedded_source_overrides();

}  // namespace b12x::detail
