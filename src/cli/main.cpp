// The `b12x` command: one subcommand per op family, each registered from its own file.
#include <CLI/CLI.hpp>
#include <iostream>

#include "b12x/core/error.h"
#include "b12x/version.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"b12x: kernels for quantized LLM inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", B12X_VERSION_STRING);
  b12x::cli::register_codec(app);
  b12x::cli::register_reference(app);
  b12x::cli::register_runtime(app);
  b12x::cli::register_bench(app);
  b12x::cli::register_inspect(app);
  b12x::cli::register_convert_gguf(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const b12x::Error& e) {
    std::cerr << "b12x: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "b12x: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
