#include "backend/cpu/matmul.h"

namespace lockstep::cpu {

MatmulKernels select_matmul_kernels(std::string_view limit) {
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl");
  if (limit == "generic") return matmul_kernels_generic();
  if (avx512 && (limit.empty() || limit == "avx512")) return matmul_kernels_avx512();
  if (avx2) return matmul_kernels_avx2();
  return matmul_kernels_generic();
}

}  // namespace lockstep::cpu
