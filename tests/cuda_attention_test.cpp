// The CUDA attention kernels at the models' own shapes: a row's output must be the same bits
// alone (a round of one, each split in a warp or block of its own), inside a fill chunk (its
// sequence's consecutive rows, walked one row a warp) and inside a wide round of other rows,
// and close to the CPU's. Shapes: 16 query heads of 128 a KV head (Nemotron 3 Nano), 4 of 64
// (Llama 3.2 1B), 2 of 16 (the smallest fixture) on the tensor-core kernel; 32 of 64 on the
// scalar one.
#include <array>

#include "cuda_vs_cpu.h"

namespace lockstep {
namespace {

TEST_F(CudaVsCpu, AttentionRowKeepsItsBitsInRoundsAndFillChunks) {
  for (auto [per_kv, head_dim] : {std::array<int64_t, 2>{16, 128}, std::array<int64_t, 2>{4, 64},
                                  std::array<int64_t, 2>{2, 16}, std::array<int64_t, 2>{32, 64}}) {
    SCOPED_TRACE("heads per KV head " + std::to_string(per_kv) + ", head_dim " + std::to_string(head_dim));
    const int64_t kv_heads = 2, heads = per_kv * kv_heads, page_size = 16, max_pages = 40;
    const int64_t pages = 2 * max_pages;
    // Sequence 0 owns pages 0, 2, 4, ...; sequence 1 the odd ones (so pages interleave).
    std::vector<int32_t> tables(size_t(2 * max_pages));
    for (int64_t p = 0; p < max_pages; ++p) tables[size_t(p)] = int32_t(2 * p), tables[size_t(max_pages + p)] = int32_t(2 * p + 1);
    Pair k_cache = random(DType::f32, {pages, kv_heads, page_size, head_dim});
    Pair v_cache = random(DType::f32, {pages, kv_heads, page_size, head_dim});
    Pair table = ints({2, max_pages}, tables);
    // The target: sequence 0 at position 600 (ten splits of 64, the last of 25 positions).
    const int32_t target_pos = 600;
    Pair target_q = random(DType::f32, {1, heads, head_dim});
    std::vector<float> target_host = floats(*gpu, target_q.gpu);
    auto run = [&](const std::vector<int32_t>& seqs, const std::vector<int32_t>& positions, int64_t target_row,
                   bool check_cpu) {
      const int64_t n = int64_t(seqs.size());
      Pair q = random(DType::f32, {n, heads, head_dim});
      std::vector<float> q_host = floats(*gpu, q.gpu);
      std::copy(target_host.begin(), target_host.end(), q_host.begin() + target_row * heads * head_dim);
      cpu.upload(q.cpu, q_host.data());
      gpu->upload(q.gpu, q_host.data());
      Pair pos = ints({n}, positions), seq = ints({n}, seqs), out = output(DType::f32, {n, heads, head_dim});
      gpu->attention(q.gpu, KvLayer{k_cache.gpu, v_cache.gpu}, {pos.gpu, seq.gpu, table.gpu}, 0.088f, out.gpu);
      if (check_cpu) {
        cpu.attention(q.cpu, KvLayer{k_cache.cpu, v_cache.cpu}, {pos.cpu, seq.cpu, table.cpu}, 0.088f, out.cpu);
        expect_close(out, "attention", 5e-5);
      }
      std::vector<float> all = floats(*gpu, out.gpu);
      return std::vector<float>(all.begin() + target_row * heads * head_dim,
                                all.begin() + (target_row + 1) * heads * head_dim);
    };
    const std::vector<float> alone = run({0}, {target_pos}, 0, true);
    // A fill chunk: sequence 0's positions 512..639 (the target is row 88), after a round row of
    // sequence 1.
    std::vector<int32_t> seqs = {1}, positions = {300};
    for (int32_t p = 512; p < 640; ++p) seqs.push_back(0), positions.push_back(p);
    EXPECT_EQ(0, std::memcmp(alone.data(), run(seqs, positions, 1 + 600 - 512, true).data(), alone.size() * 4))
        << "in a fill chunk";
    // A wide round: 600 rows of both sequences at scattered positions, the target among them.
    // (Alone, the target's splits each take a warp of their own and a second kernel folds them;
    // in the chunk and the round a warp walks a row's splits itself.)
    std::mt19937 pick(7);
    seqs.clear(), positions.clear();
    for (int r = 0; r < 600; ++r) {
      seqs.push_back(int32_t(pick() % 2));
      positions.push_back(int32_t(pick() % 640));
    }
    seqs[123] = 0, positions[123] = target_pos;
    EXPECT_EQ(0, std::memcmp(alone.data(), run(seqs, positions, 123, false).data(), alone.size() * 4))
        << "in a round of 600 rows";
  }
}

}  // namespace
}  // namespace lockstep
