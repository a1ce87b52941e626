// Subcommand registration. Each subcommand lives in src/cli/<name>.cpp, parses its options with
// CLI11 and runs in a callback; errors are b12x::Error and reach main() for a clean message.
#pragma once
#include <CLI/CLI.hpp>

namespace b12x::cli {

void register_codec(CLI::App& app);      // codec.cpp: b12x codec {info, decode, encode, random}
void register_reference(CLI::App& app);  // reference.cpp: b12x reference {linear, embedding}
void register_runtime(CLI::App& app);    // runtime.cpp: b12x prewarm, b12x cache
void register_bench(CLI::App& app);      // bench.cpp: b12x bench
void register_inspect(CLI::App& app);    // inspect.cpp: b12x inspect
void register_convert_gguf(CLI::App& app);  // convert_gguf.cpp: b12x convert-gguf

}  // namespace b12x::cli
