#include "b12x/core/tensor.h"

#include <cstdint>
#include <limits>
#include <sstream>

#include "b12x/core/error.h"

namespace b12x {

namespace {
void init_view(TensorView& v, void* data, DType dtype, const int64_t* shape, size_t n, Device device) {
  if (n > static_cast<size_t>(kMaxDims)) fail_arg("shape", "at most ", kMaxDims, " dimensions, got ", n);
  v.data = data;
  v.dtype = dtype;
  v.ndim = static_cast<int>(n);
  v.device = device;
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    if (shape[d] < 0) fail_arg("shape", "extent of dimension ", d, " is negative (", shape[d], ")");
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    if (shape[d] != 0 && stride > std::numeric_limits<int64_t>::max() / shape[d])
      fail_arg("shape", "has more elements than int64 can count");
    stride *= shape[d];
  }
}
}  // namespace

TensorView::TensorView(void* d, DType t, std::initializer_list<int64_t> s, Device dev) {
  init_view(*this, d, t, s.begin(), s.size(), dev);
}
TensorView::TensorView(void* d, DType t, const std::vector<int64_t>& s, Device dev) {
  init_view(*this, d, t, s.data(), s.size(), dev);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != stride) return false;
    stride *= shape[d];
  }
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << shape_string(shape_vec()) << (device.is_host() ? " host" : " cuda");
  return os.str();
}

Expect& Expect::present() {
  if (t_.data == nullptr && t_.numel() != 0) fail_arg(name_, "is required but was not given");
  return *this;
}
Expect& Expect::host() {
  present();
  if (!t_.device.is_host()) fail_arg(name_, "must be a host tensor, got ", t_.describe());
  return *this;
}
Expect& Expect::on_cuda() {
  if (t_.device.kind != DeviceKind::cuda) fail_arg(name_, "must be a CUDA device tensor, got ", t_.describe());
  return *this;
}
Expect& Expect::same_device(const TensorView& other, const std::string& other_name) {
  if (t_.device != other.device)
    fail_arg(name_, "must be on the ", other_name, "'s device, got ", t_.describe(), " with ", other_name, " ",
             other.describe());
  return *this;
}
Expect& Expect::dtype(DType d) {
  if (t_.dtype != d) fail_arg(name_, "dtype must be ", dtype_name(d), ", got ", dtype_name(t_.dtype));
  return *this;
}
Expect& Expect::dtype_in(std::initializer_list<DType> allowed) {
  std::string names;
  for (DType d : allowed) {
    if (t_.dtype == d) return *this;
    names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
  }
  fail_arg(name_, "dtype must be one of {", names, "}, got ", dtype_name(t_.dtype));
}
Expect& Expect::ndim(int n) {
  if (t_.ndim != n) fail_arg(name_, "must have ", n, " dimensions, got ", t_.describe());
  return *this;
}
Expect& Expect::shape(std::initializer_list<int64_t> s) { return shape(std::vector<int64_t>(s)); }
Expect& Expect::shape(const std::vector<int64_t>& s) {
  bool ok = t_.ndim == static_cast<int>(s.size());
  for (int d = 0; ok && d < t_.ndim; ++d) ok = s[d] < 0 || s[d] == t_.shape[d];
  if (!ok) {
    std::ostringstream want;
    want << '[';
    for (size_t i = 0; i < s.size(); ++i) want << (i ? ", " : "") << (s[i] < 0 ? std::string("*") : std::to_string(s[i]));
    want << ']';
    fail_arg(name_, "shape must be ", want.str(), ", got ", shape_string(t_.shape_vec()));
  }
  return *this;
}
Expect& Expect::contiguous() {
  if (!t_.is_contiguous()) fail_arg(name_, "must be contiguous (row-major), got strides that are not");
  return *this;
}
Expect& Expect::aligned(size_t bytes) {
  if (reinterpret_cast<uintptr_t>(t_.data) % bytes != 0)
    fail_arg(name_, "data pointer must be aligned to ", bytes, " bytes");
  return *this;
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) {
  view_ = TensorView(nullptr, dtype, shape);
  storage_.assign(view_.nbytes(), 0);
  view_.data = storage_.data();
}
HostTensor::HostTensor(const HostTensor& o) : storage_(o.storage_), view_(o.view_) { view_.data = storage_.data(); }
HostTensor& HostTensor::operator=(const HostTensor& o) {
  if (this != &o) {
    storage_ = o.storage_;
    view_ = o.view_;
    view_.data = storage_.data();
  }
  return *this;
}

}  // namespace b12x
