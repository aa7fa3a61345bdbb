#include "fixture_reference.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "io/safetensors.h"

namespace lockstep {

namespace {

template <class T>
std::vector<T> copy_tensor(const TensorInfo& info) {
  std::vector<T> out(info.bytes / sizeof(T));
  std::memcpy(out.data(), info.data, info.bytes);
  return out;
}

}  // namespace

Expected<std::vector<FixtureCase>> load_fixture_reference(const std::string& path) {
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) return file.error();
  const auto& tensors = (*file)->tensors();
  std::vector<FixtureCase> cases;
  for (int i = 0;; ++i) {
    std::string suffix = "_" + std::to_string(i);
    auto ids = tensors.find("ids" + suffix);
    if (ids == tensors.end()) break;
    FixtureCase c;
    c.ids = copy_tensor<int32_t>(ids->second);
    for (const char* name : {"logits", "greedy", "margin"})
      if (!tensors.count(name + suffix)) return make_error(path + ": missing " + name + suffix);
    c.logits = copy_tensor<float>(tensors.at("logits" + suffix));
    c.greedy = copy_tensor<int32_t>(tensors.at("greedy" + suffix));
    c.margins = copy_tensor<float>(tensors.at("margin" + suffix));
    cases.push_back(std::move(c));
  }
  return cases;
}

size_t greedy_steps_to_check(const std::vector<float>& margins, float margin) {
  size_t steps = 0;
  while (steps < margins.size() && margins[steps] >= margin) ++steps;
  return steps;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - double(b[i]);
    diff += d * d;
    norm += double(b[i]) * double(b[i]);
  }
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

}  // namespace lockstep
