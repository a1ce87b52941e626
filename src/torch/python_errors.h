// Registration of the Python exception classes b12x errors become (see python_errors.cpp).
#pragma once
#include <pybind11/pybind11.h>

namespace b12x::torch_ext {

// Called once by b12x/__init__.py with the classes of b12x.errors.
void register_error_types(const pybind11::object& error, const pybind11::object& bad_argument,
                          const pybind11::object& unsupported, const pybind11::object& io_error,
                          const pybind11::object& frozen, const pybind11::object& cuda_error);

}  // namespace b12x::torch_ext
