// The one non-owning tensor view, plus a small owning host tensor for references, tools and tests.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "b12x/core/dtype.h"

namespace b12x {

enum class DeviceKind : uint8_t { host, cuda };

struct Device {
  DeviceKind kind = DeviceKind::host;
  int index = 0;
  static Device host() { return {DeviceKind::host, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  bool is_host() const { return kind == DeviceKind::host; }
  bool operator==(const Device&) const = default;
};

constexpr int kMaxDims = 6;

// Non-owning view: data pointer, dtype, shape and strides (in elements), device.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::u8;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};
  Device device{};

  TensorView() = default;
  // Contiguous row-major view.
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::host());
  TensorView(void* data, DType dtype, const std::vector<int64_t>& shape, Device device = Device::host());

  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  bool empty() const { return data == nullptr; }
  std::vector<int64_t> shape_vec() const { return {shape.begin(), shape.begin() + ndim}; }
  std::string describe() const;  // e.g. "u8[4, 2, 74] host"

  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
};

std::string shape_string(const std::vector<int64_t>& shape);

// Validates one argument; every failure throws BadArgument naming it. Chain the rules:
//   expect(w, "weight").host().dtype(DType::u8).shape({n, k / 256, 74}).contiguous();
// Device-side binds (the ops' bind()):
//   expect(out, "out").present().dtype(d).shape({n, k}).contiguous().on_cuda().same_device(w, "weight").aligned(16);
class Expect {
 public:
  Expect(const TensorView& t, std::string name) : t_(t), name_(std::move(name)) {}
  Expect& present();
  Expect& host();
  // A CUDA device tensor: "must be a CUDA device tensor, got <view>". Checks the device only (chain
  // present() first where the tensor is required).
  Expect& on_cuda();
  // On the same device as `other`, which is named `other_name` in the message:
  // "must be on the <other_name>'s device, got <view> with <other_name> <other view>".
  Expect& same_device(const TensorView& other, const std::string& other_name);
  Expect& dtype(DType d);
  Expect& dtype_in(std::initializer_list<DType> allowed);
  Expect& ndim(int n);
  Expect& shape(std::initializer_list<int64_t> s);  // -1 = any extent
  Expect& shape(const std::vector<int64_t>& s);
  Expect& contiguous();
  Expect& aligned(size_t bytes);

 private:
  const TensorView& t_;
  std::string name_;
};

inline Expect expect(const TensorView& t, std::string name) { return Expect(t, std::move(name)); }

// Owning, contiguous host tensor (zero-initialised).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);
  HostTensor(const HostTensor& o);
  HostTensor& operator=(const HostTensor& o);
  HostTensor(HostTensor&&) noexcept = default;  // vector moves keep their buffer, so the view stays valid
  HostTensor& operator=(HostTensor&&) noexcept = default;
  TensorView view() const { return view_; }
  DType dtype() const { return view_.dtype; }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return view_.nbytes(); }
  template <class T>
  T* ptr() const { return view_.ptr<T>(); }
  std::vector<uint8_t>& bytes() { return storage_; }
  const std::vector<uint8_t>& bytes() const { return storage_; }

 private:
  std::vector<uint8_t> storage_;
  TensorView view_;
};

}  // namespace b12x
