#include "backend/backend.h"

namespace lockstep {

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
