// Hopper's warpgroup mma (wgmma) and the tensor memory accelerator (TMA), as the bf16 fill
// kernels use them: the m64n128k16 step with A from registers, shared-memory descriptors of
// unswizzled core matrices, and the mbarriers and bulk tensor copies that feed them. Hopper's
// own instructions exist only in the sm_90a code; in the portable compute_90 PTX the steps and
// waits trap and the rest is empty (the kernels are chosen only on compute capability 9.0).
#pragma once

#include <cstdint>

namespace lockstep::cuda {

// The descriptor of a shared-memory operand of 8 x 8 core matrices (8 rows of 16 bytes each,
// contiguous) with no swizzle: `k_apart` bytes between the two core matrices along a step's k,
// `n_apart` between groups of 8 rows.
__device__ inline uint64_t wgmma_matrices(const void* tile, uint32_t k_apart, uint32_t n_apart) {
  const uint32_t address = uint32_t(__cvta_generic_to_shared(tile));
  return uint64_t((address >> 4) & 0x3FFF) | uint64_t(k_apart >> 4) << 16 | uint64_t(n_apart >> 4) << 32;
}

// The descriptor of a shared-memory operand in the 64-byte swizzle, K-major: rows of 64 bytes
// (two k steps of bf16), groups of 8 rows `n_apart` bytes apart, the tile 512-byte aligned;
// `at` may start 32 bytes into the rows (a step's k offset within them).
__device__ inline uint64_t wgmma_matrices_swizzled_64(const void* at, uint32_t n_apart) {
  const uint32_t address = uint32_t(__cvta_generic_to_shared(at));
  return uint64_t((address >> 4) & 0x3FFF) | uint64_t(1) << 16 | uint64_t(n_apart >> 4) << 32 | uint64_t(2) << 62;
}

// d += a * b: one m64n128k16 step, a from registers, b by descriptor (not transposed).
__device__ inline void wgmma_step(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t b) {
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b));
#else
  __trap();
#endif
}

#ifdef __CUDA_ARCH_FEAT_SM90_ALL
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ inline void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory"); }
#else
__device__ inline void wgmma_fence() {}
__device__ inline void wgmma_commit() {}
template <int kPending>
__device__ inline void wgmma_wait() {}
#endif
// Makes the compiler hold v's registers as they are up to here (the A fragments of steps that
// may still be running: wgmma reads them after it is issued).
__device__ inline void keep(uint4& v) { asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)); }

// Shared memory written by the copies, read next by the tensor cores (the async proxy).
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// --- mbarriers and bulk tensor copies (TMA) ---

__device__ inline uint32_t shared_address(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

#ifdef __CUDA_ARCH_FEAT_SM90_ALL
__device__ inline void barrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
}
// Makes the barriers' initialization visible to the copies (the async proxy).
__device__ inline void barrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One arrival that also expects `bytes` more from copies in this phase.
__device__ inline void barrier_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}
// Whether the barrier's phase of parity `parity` has completed (after a while, if not yet).
__device__ inline bool barrier_done(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred done;\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%1], %2;\n"
      "selp.u32 %0, 1, 0, done;\n}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ inline void barrier_wait(uint64_t* bar, uint32_t parity) {
  while (!barrier_done(bar, parity)) {
  }
}
// One arrival on this block's barrier.
__device__ inline void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
// The 2-d box of the tensor `map` at (c0, c1) into `to`, its bytes completing on `bar`.
__device__ inline void tensor_copy(void* to, const void* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(to)),
      "l"(map), "r"(c0), "r"(c1), "r"(shared_address(bar))
      : "memory");
}
#else
__device__ inline void barrier_init(uint64_t*, uint32_t) {}
__device__ inline void barrier_init_fence() {}
__device__ inline void barrier_expect(uint64_t*, uint32_t) {}
__device__ inline void barrier_wait(uint64_t*, uint32_t) { __trap(); }
__device__ inline void barrier_arrive(uint64_t*) {}
__device__ inline void tensor_copy(void*, const void*, int, int, uint64_t*) {}
#endif

}  // namespace lockstep::cuda
