#include "tensor/tensor.h"

namespace lockstep {

std::string Shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) out += ", ";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

}  // namespace lockstep
