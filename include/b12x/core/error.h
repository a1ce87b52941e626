// One error type for the whole library, with subclasses where callers must tell cases apart.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace b12x {

// Base of every error b12x throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A caller-supplied value breaks a rule (shape, dtype, stride, alignment, payload size, range).
// The message always starts with "argument '<name>': ".
class BadArgument : public Error {
 public:
  BadArgument(std::string arg, const std::string& rule)
      : Error("argument '" + arg + "': " + rule), arg_(std::move(arg)) {}
  const std::string& argument() const { return arg_; }

 private:
  std::string arg_;
};

// A valid but unsupported combination (format x activation mode, architecture, ...).
class Unsupported : public Error {
 public:
  using Error::Error;
};

// Reading or writing a file failed, or its contents are malformed.
class IoError : public Error {
 public:
  using Error::Error;
};

// A kernel would have to be compiled after freeze_kernel_resolution().
class KernelResolutionFrozenError : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime/driver/NVRTC call failed; the message names the call.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Throw BadArgument naming `arg` with a message built from the remaining pieces.
template <class... Args>
[[noreturn]] void fail_arg(const std::string& arg, Args&&... rule) {
  throw BadArgument(arg, detail::concat(std::forward<Args>(rule)...));
}

template <class... Args>
[[noreturn]] void fail_unsupported(Args&&... what) {
  throw Unsupported(detail::concat(std::forward<Args>(what)...));
}

}  // namespace b12x

// Check a rule about argument `arg`; on failure throw BadArgument with the streamed message.
#define B12X_CHECK_ARG(cond, arg, ...)                  \
  do {                                                  \
    if (!(cond)) ::b12x::fail_arg((arg), __VA_ARGS__);  \
  } while (0)
