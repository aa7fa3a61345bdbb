#include "test_support.h"

#include "backend/cpu/cpu_backend.h"

namespace lockstep {

std::vector<std::string> test_backend_names() {
  std::vector<std::string> names = {"cpu", "cpu-1thread", "cpu-generic"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f")) names.push_back("cpu-avx2");
  return names;
}

std::unique_ptr<Backend> make_test_backend(const std::string& name) {
  if (name == "cpu-1thread") return std::make_unique<CpuBackend>(1);
  if (name == "cpu-generic") return std::make_unique<CpuBackend>(0, "generic");
  if (name == "cpu-avx2") return std::make_unique<CpuBackend>(0, "avx2");
  return std::make_unique<CpuBackend>(0);
}

std::string test_data(const std::string& name) { return std::string(LOCKSTEP_TEST_DATA) + "/" + name; }

}  // namespace lockstep
