#include "backend/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#ifdef LOCKSTEP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lockstep {

std::vector<std::string> built_backends() {
#ifdef LOCKSTEP_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

bool backend_usable(const std::string& name) {
  if (name == "cpu") return true;
#ifdef LOCKSTEP_WITH_CUDA
  if (name == "cuda") return cuda_device_available();
#endif
  return false;
}

Expected<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads) {
  if (name == "cpu") return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(threads));
  if (name == "cuda") {
#ifdef LOCKSTEP_WITH_CUDA
    std::string why;
    if (!cuda_device_available(&why)) return make_error("--backend cuda: no usable CUDA device (" + why + ")");
    return std::unique_ptr<Backend>(std::make_unique<CudaBackend>());
#else
    return make_error("--backend cuda: this lockstep was built without CUDA (nvcc was not found at build time)");
#endif
  }
  return make_error("unknown backend '" + name + "' (known: cpu, cuda)");
}

}  // namespace lockstep
