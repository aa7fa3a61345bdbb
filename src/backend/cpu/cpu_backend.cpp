#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace lockstep {

CpuBackend::CpuBackend(int threads, std::string_view isa) : pool_(threads), matmul_(cpu::select_matmul_kernels(isa)) {}

std::string CpuBackend::device() const {
  std::string model = "CPU";
  if (std::FILE* file = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof(line), file)) {
      std::string text = line;
      if (text.rfind("model name", 0) != 0) continue;
      const size_t colon = text.find(':');
      if (colon == std::string::npos) break;
      model = text.substr(text.find_first_not_of(" \t", colon + 1));
      while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
      break;
    }
    std::fclose(file);
  }
  return model + ", " + std::to_string(pool_.size()) + " threads";
}

namespace {

// What this process may still take: MemAvailable, capped by a cgroup v2 memory.max.
double available_host_bytes() {
  double available = 0;
  if (std::FILE* file = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), file))
      if (std::strncmp(line, "MemAvailable:", 13) == 0) available = std::strtod(line + 13, nullptr) * 1024;
    std::fclose(file);
  }
  auto read_number = [](const char* path) -> double {
    std::FILE* file = std::fopen(path, "r");
    if (!file) return -1;
    char text[64] = {};
    bool got = std::fgets(text, sizeof(text), file) != nullptr;
    std::fclose(file);
    if (!got || std::strncmp(text, "max", 3) == 0) return -1;
    return std::strtod(text, nullptr);
  };
  double limit = read_number("/sys/fs/cgroup/memory.max");
  double used = read_number("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) available = available > 0 ? std::min(available, limit - used) : limit - used;
  return available > 0 ? available : 1e300;  // unknown: let malloc decide
}

}  // namespace

OwnedTensor CpuBackend::alloc(DType dtype, Shape shape) { return allocate(Tensor(nullptr, dtype, shape)); }

OwnedTensor CpuBackend::alloc_quantized(const QuantLayout& layout, Shape shape) {
  return allocate(Tensor::quantized(layout, shape));
}

OwnedTensor CpuBackend::allocate(Tensor view) {
  const Shape& shape = view.shape;
  size_t bytes = (std::max<size_t>(view.bytes(), 1) + 63) / 64 * 64;
  // Memory is promised at malloc and taken when first written, so what is free now, less what
  // this backend already holds (perhaps not yet written), is what there is.
  check_room(bytes, shape, free_memory());
  view.data = std::aligned_alloc(64, bytes);
  if (!view.data) throw OutOfMemory("the cpu backend could not allocate " + format_bytes(double(bytes)) + " for a tensor " +
                                    shape.to_string());
  allocated_bytes_ += double(bytes);
  return OwnedTensor(this, view);
}

double CpuBackend::free_memory() {
  if (host_budget_ < 0) host_budget_ = available_host_bytes();
  return host_budget_ - allocated_bytes_;
}

void CpuBackend::release(const Tensor& tensor) {
  forget_prepared(tensor);
  allocated_bytes_ -= double((std::max<size_t>(tensor.bytes(), 1) + 63) / 64 * 64);
  std::free(tensor.data);
}

void CpuBackend::upload(const Tensor& dst, const void* src) {
  forget_prepared(dst);  // the stored order again
  std::memcpy(dst.data, src, dst.bytes());
}

void CpuBackend::download(void* dst, const Tensor& src) { std::memcpy(dst, src.data, src.bytes()); }

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  if (code_order(src) == cpu::CodeOrder::halves)
    throw std::logic_error("copy: a weight prepare_matmul_weight rearranged is read by the matmuls alone");
  forget_prepared(dst);
  std::memcpy(dst.data, src.data, src.bytes());
}

void CpuBackend::prepare_matmul_weight(const Tensor& w) {
  const int64_t k = w.shape.rank >= 2 ? w.shape[w.shape.rank - 1] : 0;
  if (w.dtype != DType::quant || k == 0 || !cpu::takes_halves(matmul_, w.quant, k)) return;
  auto* data = static_cast<std::byte*>(w.data);
  const std::byte* end = data + w.bytes();
  const auto at = first_prepared(data);
  if (at != halves_.end() && at->first < end) {
    if (at->first == data && at->second == end) return;  // prepared before
    throw std::logic_error("prepare_matmul_weight: part of this weight was prepared as another");
  }
  const size_t row_bytes = quant_row_total(w.quant, k);
  pool_.parallel_for(w.numel() / k, 64, [&](int64_t begin, int64_t rows_end) {
    cpu::split_nibbles(w.quant, data + size_t(begin) * row_bytes, rows_end - begin, k);
  });
  halves_[data] = end;
}

std::map<const std::byte*, const std::byte*>::const_iterator CpuBackend::first_prepared(const std::byte* at) const {
  auto after = halves_.upper_bound(at);
  if (after != halves_.begin() && std::prev(after)->second > at) --after;  // one that starts before and covers it
  return after;
}

void CpuBackend::forget_prepared(const Tensor& t) {
  const auto* begin = static_cast<const std::byte*>(t.data);
  const std::byte* end = begin + t.bytes();
  auto at = first_prepared(begin);
  // What lies outside [begin, end) of an overlapping range (the other experts of a stack one
  // expert of which is uploaded again) keeps its order.
  std::vector<std::pair<const std::byte*, const std::byte*>> kept;
  while (at != halves_.end() && at->first < end) {
    if (at->first < begin) kept.emplace_back(at->first, begin);
    if (at->second > end) kept.emplace_back(end, at->second);
    at = halves_.erase(at);
  }
  for (const auto& [first, last] : kept) halves_[first] = last;
}

cpu::CodeOrder CpuBackend::code_order(const Tensor& w) const {
  const auto* data = static_cast<const std::byte*>(w.data);
  const auto at = first_prepared(data);
  return at != halves_.end() && at->first <= data ? cpu::CodeOrder::halves : cpu::CodeOrder::stored;
}

void CpuBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  cpu::MatmulArgs args{x.as<float>(), w.data, out.as<float>(), x.rows(), x.cols(), w.shape[0]};
  if (w.dtype == DType::quant) {
    const cpu::CodeOrder order = code_order(w);
    pool_.parallel_for(args.m, cpu::kColumnGrain, [&](int64_t begin, int64_t end) {
      cpu::matmul_quantized(matmul_, args, w.quant, order, begin, end);
    });
    return;
  }
  cpu::MatmulFn fn = w.dtype == DType::bf16 ? matmul_.bf16 : matmul_.f32;
  pool_.parallel_for(args.m, cpu::kColumnGrain, [&](int64_t begin, int64_t end) { fn(args, begin, end); });
}

}  // namespace lockstep
