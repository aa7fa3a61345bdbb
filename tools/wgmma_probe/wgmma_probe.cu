// Whether a wgmma step (Hopper's warpgroup mma, m64nNk16, bf16 in, f32 accumulate) rounds as an
// mma.sync step (m16n8k16) of the same 16 slots: the fact that lets the wgmma fill kernel
// (src/backend/cuda/cuda_matmul_bf16_wgmma.cu) keep the other matmul kernels' bits.
//
// A 64 x 1024 matrix times a 1024 x N one (bf16 values with exponents spread over 2^-8 to 2^8,
// so that any other rounding inside a step would show), as 64 chained k steps of 16: four warps
// of mma.sync against one warpgroup of wgmma, A from registers in the same fragments, B from
// shared memory as 8 x 8 core matrices with no swizzle (the two k halves of a step 128 bytes
// apart, row groups 256). Prints, for N = 8 and 16, how far mma.sync is from an f64 sum and how
// many of wgmma's outputs differ from mma.sync's in their bits; exits 1 if any do.
//
// Built and run on the GPU machine (sm_90a only):
//   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -std=c++17 -o wgmma_probe tools/wgmma_probe/wgmma_probe.cu
//   ./wgmma_probe
// Seen on an H100 (2026-12-07, session 44), N = 8: mma.sync within 8.6e-7 of the f64 sums
// (relative to the sum of magnitudes), 0 of 512 outputs differing.
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

constexpr int M = 64, S = 64, K = 16 * S;

__device__ inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline uint32_t pair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// A fragment of mma m16n8k16 for rows r0.., k step s: a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
__device__ inline void a_frag(const __nv_bfloat16* A, int r0, int s, int lane, uint32_t (&a)[4]) {
  const int g = lane / 4, t = lane % 4, k0 = 16 * s;
  a[0] = pair(A + (r0 + g) * K + k0 + 2 * t);
  a[1] = pair(A + (r0 + g + 8) * K + k0 + 2 * t);
  a[2] = pair(A + (r0 + g) * K + k0 + 2 * t + 8);
  a[3] = pair(A + (r0 + g + 8) * K + k0 + 2 * t + 8);
}

// B is stored n-major: Bt[n * K + k].
__global__ void mma_kernel(const __nv_bfloat16* A, const __nv_bfloat16* Bt, int N, float* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int n0 = 0; n0 < N; n0 += 8) {
    float d[4] = {0, 0, 0, 0};
    for (int s = 0; s < S; ++s) {
      uint32_t a[4];
      a_frag(A, 16 * warp, s, lane, a);
      const __nv_bfloat16* b = Bt + (n0 + g) * K + 16 * s + 2 * t;
      mma16816(d, a, pair(b), pair(b + 8));
    }
    const int r = 16 * warp + g;
    out[r * N + n0 + 2 * t] = d[0], out[r * N + n0 + 2 * t + 1] = d[1];
    out[(r + 8) * N + n0 + 2 * t] = d[2], out[(r + 8) * N + n0 + 2 * t + 1] = d[3];
  }
}

__device__ inline uint64_t desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(smem));
  return uint64_t((addr >> 4) & 0x3FFF) | uint64_t((lbo >> 4) & 0x3FFF) << 16 | uint64_t((sbo >> 4) & 0x3FFF) << 32;
}

template <int N>
__device__ inline void wgmma(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db);

template <>
__device__ inline void wgmma<8>(float (&d)[4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1, 0;\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

template <>
__device__ inline void wgmma<16>(float (&d)[8], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, 1, 1, 1, 0;\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// One warpgroup; B of each k step in smem as core matrices (8 n x 8 k, 128 bytes), core (nb, kb)
// at (nb * 2 + kb) * 128. lbo/sbo: the descriptor's two offsets.
template <int N>
__global__ void wgmma_kernel(const __nv_bfloat16* A, const __nv_bfloat16* Bt, uint32_t lbo, uint32_t sbo, float* out) {
  __shared__ __align__(128) __nv_bfloat16 b_s[N * 16];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  for (int s = 0; s < S; ++s) {
    for (int i = threadIdx.x; i < N * 16; i += blockDim.x) {
      const int n = i / 16, k = i % 16;
      const int core = (n / 8) * 2 + k / 8;
      b_s[core * 64 + (n % 8) * 8 + k % 8] = Bt[n * K + 16 * s + k];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    uint32_t a[4];
    a_frag(A, 16 * warp, s, lane, a);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    wgmma<N>(d, a, desc(b_s, lbo, sbo));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }
  // d layout: for each 8-column chunk c: d[4c + 0..1] (row g, cols 8c + 2t..), d[4c + 2..3] (row g + 8)
  const int r = 16 * warp + g;
  for (int c = 0; c < N / 8; ++c) {
    out[r * N + 8 * c + 2 * t] = d[4 * c], out[r * N + 8 * c + 2 * t + 1] = d[4 * c + 1];
    out[(r + 8) * N + 8 * c + 2 * t] = d[4 * c + 2], out[(r + 8) * N + 8 * c + 2 * t + 1] = d[4 * c + 3];
  }
}

bool all_same = true;

template <int N>
void probe(const std::vector<__nv_bfloat16>& a, std::vector<__nv_bfloat16>& bt_all) {
  std::vector<__nv_bfloat16> bt(bt_all.begin(), bt_all.begin() + size_t(N) * K);
  __nv_bfloat16 *dA, *dB;
  float *o1, *o2;
  cudaMalloc(&dA, a.size() * 2), cudaMalloc(&dB, bt.size() * 2);
  cudaMalloc(&o1, M * N * 4), cudaMalloc(&o2, M * N * 4);
  cudaMemcpy(dA, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, bt.data(), bt.size() * 2, cudaMemcpyHostToDevice);
  mma_kernel<<<1, 128>>>(dA, dB, N, o1);
  std::vector<float> r1(M * N), r2(M * N);
  cudaMemcpy(r1.data(), o1, M * N * 4, cudaMemcpyDeviceToHost);
  // the f64 reference, to tell a layout error from rounding
  double worst = 0;
  for (int r = 0; r < M; ++r)
    for (int n = 0; n < N; ++n) {
      double s = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = double(__bfloat162float(a[r * K + k])) * double(__bfloat162float(bt[n * K + k]));
        s += p, mag += std::fabs(p);
      }
      worst = std::fmax(worst, std::fabs(s - r1[r * N + n]) / mag);
    }
  std::printf("N=%d mma.sync vs f64: worst |err|/sum|p| = %.3g\n", N, worst);
  wgmma_kernel<N><<<1, 128>>>(dA, dB, 128, 256, o2);
  const cudaError_t e = cudaDeviceSynchronize();
  cudaMemcpy(r2.data(), o2, M * N * 4, cudaMemcpyDeviceToHost);
  int differ = 0;
  for (int i = 0; i < M * N; ++i) differ += std::memcmp(&r1[i], &r2[i], 4) != 0;
  std::printf("N=%d wgmma (%s): %d of %d outputs differ in bits from mma.sync\n", N, cudaGetErrorString(e), differ,
              M * N);
  all_same = all_same && e == cudaSuccess && differ == 0;
  cudaFree(dA), cudaFree(dB), cudaFree(o1), cudaFree(o2);
}

int main() {
  srand(7);
  auto rnd = [] {
    // values with spread exponents, so rounding inside the sums shows
    const float m = float(rand()) / RAND_MAX * 2.0f - 1.0f;
    const int e = rand() % 16 - 8;
    return __float2bfloat16(std::ldexp(m, e));
  };
  std::vector<__nv_bfloat16> a(size_t(M) * K), bt(size_t(16) * K);
  for (auto& v : a) v = rnd();
  for (auto& v : bt) v = rnd();
  probe<8>(a, bt);
  probe<16>(a, bt);
  return all_same ? 0 : 1;
}
