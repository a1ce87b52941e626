// b12x errors -> the Python classes of b12x.errors. torch's op bindings catch torch::PyTorchError
// and raise its python_type() with the message, so an op called as torch.ops.b12x.* (eagerly, from
// compiled code, or from the Python API) raises b12x.BadArgument, b12x.KernelResolutionFrozenError,
// ... which callers can catch by class. Until b12x/__init__.py registers the classes (an extension
// loaded on its own), errors pass through unchanged and torch raises RuntimeError.
#include "python_errors.h"

#include <torch/csrc/Exceptions.h>

#include "b12x/core/error.h"
#include "common.h"

namespace b12x::torch_ext {

namespace {
struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* bad_argument = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* io_error = nullptr;
  PyObject* frozen = nullptr;
  PyObject* cuda_error = nullptr;
};
ErrorTypes g_types;  // strong references, held for the life of the process

struct TypedError : torch::PyTorchError {
  TypedError(PyObject* type, std::string msg) : torch::PyTorchError(std::move(msg)), type_(type) {}
  PyObject* python_type() override { return type_; }
  PyObject* type_;
};

[[noreturn]] void raise_as(PyObject* type, const std::exception& e) {
  if (type == nullptr) throw;
  throw TypedError(type, e.what());
}
}  // namespace

void register_error_types(const pybind11::object& error, const pybind11::object& bad_argument,
                          const pybind11::object& unsupported, const pybind11::object& io_error,
                          const pybind11::object& frozen, const pybind11::object& cuda_error) {
  auto keep = [](const pybind11::object& o) {
    if (!PyType_Check(o.ptr()) || !PyObject_IsSubclass(o.ptr(), PyExc_Exception))
      throw pybind11::type_error("b12x error types must be exception classes");
    Py_INCREF(o.ptr());
    return o.ptr();
  };
  g_types = {keep(error), keep(bad_argument), keep(unsupported), keep(io_error), keep(frozen), keep(cuda_error)};
}

void rethrow_translated() {
  try {
    throw;
  } catch (const KernelResolutionFrozenError& e) {
    raise_as(g_types.frozen, e);
  } catch (const BadArgument& e) {
    raise_as(g_types.bad_argument, e);
  } catch (const Unsupported& e) {
    raise_as(g_types.unsupported, e);
  } catch (const IoError& e) {
    raise_as(g_types.io_error, e);
  } catch (const CudaError& e) {
    raise_as(g_types.cuda_error, e);
  } catch (const Error& e) {
    raise_as(g_types.error, e);
  }
}

}  // namespace b12x::torch_ext
