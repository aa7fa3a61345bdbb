#include "backend/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace lockstep {

CpuBackend::CpuBackend(int threads, std::string_view isa) : pool_(threads), matmul_(cpu::select_matmul_kernels(isa)) {}

OwnedTensor CpuBackend::alloc(DType dtype, Shape shape) {
  Tensor view;
  view.dtype = dtype;
  view.shape = shape;
  size_t bytes = (std::max<size_t>(view.bytes(), 1) + 63) / 64 * 64;
  view.data = std::aligned_alloc(64, bytes);
  if (!view.data) throw std::bad_alloc();
  return OwnedTensor(this, view);
}

void CpuBackend::release(const Tensor& tensor) { std::free(tensor.data); }

void CpuBackend::upload(const Tensor& dst, const void* src) { std::memcpy(dst.data, src, dst.bytes()); }

void CpuBackend::download(void* dst, const Tensor& src) { std::memcpy(dst, src.data, src.bytes()); }

void CpuBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  cpu::MatmulArgs args{x.as<float>(), w.data, out.as<float>(), x.rows(), x.cols(), w.shape[0]};
  cpu::MatmulFn fn = w.dtype == DType::bf16 ? matmul_.bf16 : matmul_.f32;
  pool_.parallel_for(args.m, cpu::kColumnGrain, [&](int64_t begin, int64_t end) { fn(args, begin, end); });
}

}  // namespace lockstep
