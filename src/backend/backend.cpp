#include "backend/backend.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace lockstep {

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) bytes /= 1024, ++unit;
  char text[64];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

void Backend::check_room(size_t bytes, const Shape& shape, double available) const {
  if (double(bytes) <= available) return;
  throw OutOfMemory("the " + std::string(name()) + " backend cannot allocate " + format_bytes(double(bytes)) +
                    " for a tensor " + shape.to_string() + ": it has " + format_bytes(std::max(available, 0.0)) +
                    " left, after " + format_bytes(allocated_bytes_) + " for this model");
}

OwnedTensor Backend::alloc_quantized(const QuantLayout& layout, Shape shape) {
  (void)shape;
  throw std::invalid_argument("the " + std::string(name()) + " backend does not run quantized weights (" +
                              quant_layout_name(layout) + ")");
}

OwnedTensor& OwnedTensor::operator=(OwnedTensor&& other) noexcept {
  if (this != &other) {
    if (owner_ && view_.data) owner_->release(view_);
    owner_ = other.owner_;
    view_ = other.view_;
    other.owner_ = nullptr;
    other.view_ = Tensor{};
  }
  return *this;
}

OwnedTensor::~OwnedTensor() {
  if (owner_ && view_.data) owner_->release(view_);
}

}  // namespace lockstep
