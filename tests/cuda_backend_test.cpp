// The CUDA backend against the CPU backend on fresh random data: every op but sampling's
// (cuda_sample_test.cpp), ragged shapes included, with the GPU's outputs poisoned (NaN) before
// each run so that an element the GPU never writes fails (cuda_vs_cpu.h). Float results agree
// within 1e-5 relative (the two reduce in different orders); ids agree exactly. Skipped where no
// CUDA device is present.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "cuda_vs_cpu.h"
#ifdef LOCKSTEP_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lockstep {
namespace {

TEST_F(CudaVsCpu, Matmul) {
  for (DType wtype : {DType::f32, DType::bf16}) {
    for (int64_t k : {int64_t(8), int64_t(37), int64_t(200), int64_t(1030), int64_t(2688)}) {
      for (int64_t n : {int64_t(1), int64_t(5), int64_t(64), int64_t(130)}) {
        const int64_t m = 45;
        Pair x = random(DType::f32, {n, k}), w = random(wtype, {m, k}), out = output(DType::f32, {n, m});
        cpu.matmul(x.cpu, w.cpu, out.cpu);
        gpu->matmul(x.gpu, w.gpu, out.gpu);
        expect_close(out, "matmul");
      }
    }
  }
}

TEST_F(CudaVsCpu, RowOps) {
  const int64_t n = 7, d = 300;
  Pair x = random(DType::f32, {n, d}), y = random(DType::f32, {n, d}), w = random(DType::f32, {d});
  Pair norm = output(DType::f32, {n, d}), sum = output(DType::f32, {n, d});
  Pair glu = output(DType::f32, {n, d}), relu = output(DType::f32, {n, d}), gated = output(DType::f32, {n, d});
  for (Backend* b : {static_cast<Backend*>(&cpu), gpu.get()}) {
    bool on_cpu = b == &cpu;
    auto pick = [&](Pair& p) -> const Tensor& { return on_cpu ? p.cpu.view() : p.gpu.view(); };
    b->rms_norm(pick(x), pick(w), 1e-5f, pick(norm));
    b->add(pick(x), pick(y), pick(sum));
    b->swiglu(pick(x), pick(y), pick(glu));
    b->relu_squared(pick(x), pick(relu));
    b->gated_rms_norm(pick(x), pick(y), pick(w), 3, 1e-5f, pick(gated));
    b->add_bias(pick(sum), pick(w));
  }
  expect_close(norm, "rms_norm");
  expect_close(sum, "add, add_bias");
  expect_close(glu, "swiglu");
  expect_close(relu, "relu_squared");
  expect_close(gated, "gated_rms_norm");
}

// The fused residual add and norm: the same bits as add then rms_norm on the GPU, and close to
// the CPU's (which runs the two ops). Rows of 2688 (the Nemotron hidden size) and of 300.
TEST_F(CudaVsCpu, AddRmsNormEqualsItsTwoOps) {
  for (int64_t d : {int64_t(300), int64_t(2688)}) {
    const int64_t n = 5;
    Pair fused_x = random(DType::f32, {n, d}), delta = random(DType::f32, {n, d}), w = random(DType::f32, {d});
    std::vector<float> start = floats(cpu, fused_x.cpu);
    Pair apart_x = make(DType::f32, {n, d}, start.data());
    Pair fused = output(DType::f32, {n, d}), apart = output(DType::f32, {n, d});
    cpu.add_rms_norm(fused_x.cpu, delta.cpu, w.cpu, 1e-5f, fused.cpu);
    gpu->add_rms_norm(fused_x.gpu, delta.gpu, w.gpu, 1e-5f, fused.gpu);
    gpu->add(apart_x.gpu, delta.gpu, apart_x.gpu);
    gpu->rms_norm(apart_x.gpu, w.gpu, 1e-5f, apart.gpu);
    expect_close(fused_x, "add_rms_norm's sum");
    expect_close(fused, "add_rms_norm");
    EXPECT_EQ(floats(*gpu, fused_x.gpu), floats(*gpu, apart_x.gpu)) << "sums, d = " << d;
    std::vector<float> one = floats(*gpu, fused.gpu), two = floats(*gpu, apart.gpu);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << "norms, d = " << d;
  }
}

// The norm of gathered rows (the MTP head's read of the main pass's hidden states): the same
// bits as gather_rows then rms_norm on the GPU, and close to the CPU's. Rows repeat and skip.
TEST_F(CudaVsCpu, RmsNormRowsEqualsItsTwoOps) {
  for (int64_t d : {int64_t(300), int64_t(2688)}) {
    const int64_t m = 6;
    const std::vector<int32_t> picks = {4, 0, 4, 5, 2};
    const int64_t n = int64_t(picks.size());
    Pair x = random(DType::f32, {m, d}), w = random(DType::f32, {d});
    Pair rows = make(DType::i32, {n}, picks.data());
    Pair fused = output(DType::f32, {n, d}), apart = output(DType::f32, {n, d});
    cpu.rms_norm_rows(x.cpu, rows.cpu, w.cpu, 1e-5f, fused.cpu);
    gpu->rms_norm_rows(x.gpu, rows.gpu, w.gpu, 1e-5f, fused.gpu);
    gpu->gather_rows(x.gpu, rows.gpu, apart.gpu);
    gpu->rms_norm(apart.gpu, w.gpu, 1e-5f, apart.gpu);
    expect_close(fused, "rms_norm_rows");
    std::vector<float> one = floats(*gpu, fused.gpu), two = floats(*gpu, apart.gpu);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << "d = " << d;
  }
}

// The up projection with relu2 in the matmul's store: the same bits as matmul then
// relu_squared on the GPU, and close to the CPU's. f32 and bf16 weights; rows of a round, of a
// wide round and of a fill (the tiled kernel), k not a multiple of 32.
TEST_F(CudaVsCpu, MatmulReluSquaredEqualsItsTwoOps) {
  const int64_t k = 200, m = 72;
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (int64_t n : {int64_t(1), int64_t(20), int64_t(300)}) {
      Pair x = random(DType::f32, {n, k}), w = random(dtype, {m, k});
      Pair fused = output(DType::f32, {n, m}), apart = output(DType::f32, {n, m});
      cpu.matmul_relu_squared(x.cpu, w.cpu, fused.cpu);
      gpu->matmul_relu_squared(x.gpu, w.gpu, fused.gpu);
      gpu->matmul(x.gpu, w.gpu, apart.gpu);
      gpu->relu_squared(apart.gpu, apart.gpu);
      expect_close(fused, "matmul_relu_squared", 1e-4);
      std::vector<float> one = floats(*gpu, fused.gpu), two = floats(*gpu, apart.gpu);
      EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << dtype_name(dtype) << ", " << n << " rows";
    }
  }
}

// matmul_split writes the product's columns straight into its tensors: the same bits as matmul
// then split_columns, for f32 and bf16 weights (packed too) in the round and tiled kernels.
TEST_F(CudaVsCpu, MatmulSplitEqualsItsTwoOps) {
  const int64_t k = 224, m = 80;
  const std::vector<int64_t> widths = {40, 24, 16};
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (bool pack : {false, true}) {
      if (pack && dtype != DType::bf16) continue;
      Pair w = random(dtype, {m, k});
      if (pack) gpu->prepare_matmul_weight(w.gpu);
      for (int64_t n : {int64_t(1), int64_t(20), int64_t(300)}) {
        Pair x = random(DType::f32, {n, k}), whole = output(DType::f32, {n, m}), scratch = output(DType::f32, {n, m});
        SplitParts parts = split_parts(n, widths);
        gpu->matmul(x.gpu, w.gpu, whole.gpu);
        gpu->split_columns(whole.gpu, parts.apart_views);
        gpu->matmul_split(x.gpu, w.gpu, scratch.gpu, parts.fused_views);
        if (!pack) cpu.matmul_split(x.cpu, w.cpu, scratch.cpu, parts.cpu_views);
        for (size_t j = 0; j < widths.size(); ++j) {
          if (!pack) expect_close(parts.fused[j], "matmul_split", 1e-4);
          std::vector<float> one = floats(*gpu, parts.fused[j].gpu), two = floats(*gpu, parts.apart[j].gpu);
          EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4))
              << dtype_name(dtype) << (pack ? " packed" : "") << ", " << n << " rows, part " << j;
        }
      }
    }
  }
}

// Weights the backend packed (prepare_matmul_weight) give the same bits as the rows they came
// from: the round, one-row and tiled kernels, plain and grouped (experts 96 and 640 wide), with
// relu2 or without. Shapes it cannot pack (rows not a multiple of 16, k not of 32) stay as they
// are.
TEST_F(CudaVsCpu, PreparedWeightsGiveTheSameBits) {
  auto prepared_copy = [&](const Pair& w) {
    OwnedTensor copy = gpu->alloc(w.gpu.view().dtype, w.gpu.view().shape);
    gpu->upload(copy, w.cpu.view().data);
    gpu->prepare_matmul_weight(copy);
    return copy;
  };
  for (auto [m, k] : {std::pair<int64_t, int64_t>{48, 96}, {40, 96}, {48, 80}, {64, 2688}, {4800, 256}}) {
    Pair w = random(DType::bf16, {m, k});
    OwnedTensor packed = prepared_copy(w);
    for (int64_t n : {1, 5, 8, 9, 16, 20, 64, 300}) {
      Pair x = random(DType::f32, {n, k});
      for (bool relu : {false, true}) {
        OwnedTensor plain = gpu->alloc(DType::f32, {n, m}), from_packed = gpu->alloc(DType::f32, {n, m});
        if (relu) {
          gpu->matmul_relu_squared(x.gpu, w.gpu, plain);
          gpu->matmul_relu_squared(x.gpu, packed, from_packed);
        } else {
          gpu->matmul(x.gpu, w.gpu, plain);
          gpu->matmul(x.gpu, packed, from_packed);
        }
        EXPECT_TRUE(same_on_gpu(plain, from_packed)) << "m " << m << " k " << k << " rows " << n << " relu2 " << relu;
      }
    }
  }
  struct Stack {
    int64_t experts, top, d, inner;
  };
  for (Stack stack : {Stack{8, 2, 64, 96}, Stack{16, 6, 640, 640}}) {
    const int64_t experts = stack.experts, top = stack.top, d = stack.d, inner = stack.inner;
    Pair up = random(DType::bf16, {experts, inner, d}), down = random(DType::bf16, {experts, d, inner});
    OwnedTensor up_packed = prepared_copy(up), down_packed = prepared_copy(down);
    // The last expert is every row's: in the grouped launches at 1 row, plain ones at 9 and 300.
    for (int64_t n : {int64_t(1), int64_t(9), int64_t(300)}) {
      std::vector<int32_t> chosen;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < top; ++j) chosen.push_back(int32_t((r + 2 * j) % (experts - 1)));  // distinct in a row
      Pair x = random(DType::f32, {n, d}), ids = ints({n, top}, chosen), weights = random(DType::f32, {n, top});
      OwnedTensor plain = gpu->alloc(DType::f32, {n, d}), from_packed = gpu->alloc(DType::f32, {n, d});
      gpu->moe_experts(x.gpu, ids.gpu, weights.gpu, up.gpu, down.gpu, 1, plain);
      gpu->moe_experts(x.gpu, ids.gpu, weights.gpu, up_packed, down_packed, 1, from_packed);
      EXPECT_TRUE(same_on_gpu(plain, from_packed)) << "moe_experts, " << d << " wide, rows " << n;
    }
  }
}

TEST_F(CudaVsCpu, GatherSplitAndEmbed) {
  const int64_t n = 5, d = 1000;
  Pair x = random(DType::f32, {n, d});
  Pair rows = ints({3}, {4, 0, 4}), gathered = output(DType::f32, {3, d});
  Pair first = output(DType::f32, {n, 17}), second = output(DType::f32, {n, 300}), third = output(DType::f32, {n, 1});
  cpu.gather_rows(x.cpu, rows.cpu, gathered.cpu);
  gpu->gather_rows(x.gpu, rows.gpu, gathered.gpu);
  expect_close(gathered, "gather_rows", 0.0);
  cpu.split_columns(x.cpu, {first.cpu, second.cpu, third.cpu});
  gpu->split_columns(x.gpu, {first.gpu, second.gpu, third.gpu});
  expect_close(first, "split_columns, first", 0.0);
  expect_close(second, "split_columns, second", 0.0);
  expect_close(third, "split_columns, third", 0.0);
  Pair joined = output(DType::f32, {n, 318});
  cpu.join_columns({first.cpu, second.cpu, third.cpu}, joined.cpu);
  gpu->join_columns({first.gpu, second.gpu, third.gpu}, joined.gpu);
  expect_close(joined, "join_columns", 0.0);
  for (DType dtype : {DType::f32, DType::bf16}) {
    Pair table = random(dtype, {50, 24}), tokens = ints({4}, {3, 49, 0, 3}), out = output(DType::f32, {4, 24});
    cpu.embed(table.cpu, tokens.cpu, out.cpu);
    gpu->embed(table.gpu, tokens.gpu, out.gpu);
    expect_close(out, "embed", 0.0);
  }
}

// The GPU sampler against the host Sampler, id for id: rows with ties, NaN and -inf, an all
// -inf row, a +inf row, a peaked row and one whose top is zeros of both signs (-0 ties +0), under each filter alone and together, at several
// positions and seeds. Each row is then sampled alone, and its id must not change.
TEST_F(CudaVsCpu, RopeKvWriteAndPagedAttention) {
  // The first two shapes run the tensor-core kernel, the third (32 query heads a KV head) the
  // scalar one.
  for (auto [heads, kv_heads, head_dim] : {std::array<int64_t, 3>{4, 2, 64}, std::array<int64_t, 3>{32, 2, 128},
                                           std::array<int64_t, 3>{64, 2, 64}}) {
    const int64_t page_size = 16, pages = 40, max_pages = 20;
    const int64_t n = 6;
    // Two sequences: rows 0-2 at positions 0, 300, 301 of sequence 0; rows 3-5 at 5, 6, 7 of 1.
    std::vector<int32_t> positions = {0, 300, 301, 5, 6, 7}, row_seq = {0, 0, 0, 1, 1, 1};
    std::vector<int32_t> tables(size_t(2 * max_pages));
    for (int64_t p = 0; p < max_pages; ++p)
      tables[size_t(p)] = int32_t(p), tables[size_t(max_pages + p)] = int32_t(39 - p);
    Pair k_cache = random(DType::f32, {pages, kv_heads, page_size, head_dim});
    Pair v_cache = random(DType::f32, {pages, kv_heads, page_size, head_dim});
    Pair q = random(DType::f32, {n, heads, head_dim}), k = random(DType::f32, {n, kv_heads, head_dim});
    Pair v = random(DType::f32, {n, kv_heads, head_dim}), cos_sin = random(DType::f32, {512, head_dim});
    Pair pos = ints({n}, positions), seq = ints({n}, row_seq), table = ints({2, max_pages}, tables);
    std::vector<int32_t> slots;
    for (int64_t r = 0; r < n; ++r)
      slots.push_back(tables[size_t(row_seq[size_t(r)] * max_pages + positions[size_t(r)] / page_size)] * page_size +
                      positions[size_t(r)] % page_size);
    Pair slot = ints({n}, slots), out = output(DType::f32, {n, heads, head_dim});
    for (Backend* b : {static_cast<Backend*>(&cpu), gpu.get()}) {
      bool on_cpu = b == &cpu;
      auto pick = [&](Pair& p) -> const Tensor& { return on_cpu ? p.cpu.view() : p.gpu.view(); };
      b->rope(pick(q), pick(pos), pick(cos_sin));
      b->rope(pick(k), pick(pos), pick(cos_sin));
      KvLayer layer{pick(k_cache), pick(v_cache)};
      b->kv_write(pick(k), pick(v), pick(slot), layer);
      b->attention(pick(q), layer, {pick(pos), pick(seq), pick(table)}, 0.125f, pick(out));
    }
    expect_close(q, "rope");
    expect_close(k_cache, "kv_write");
    expect_close(out, "attention", 5e-5);  // the GPU's tensor-core products keep about 16 bits
  }
}

TEST_F(CudaVsCpu, MambaConvAndRecurrence) {
  // Three sequences: a fresh one of 5 rows, one continuing at position 9 with 2 rows (fewer
  // than the conv's history), and a fresh one of 1 row; state slots 2, 0, 1. Chunk size 1
  // makes both run the recurrence for every row (the GPU's SSD kernel, through scan_row). Then
  // a round of the conv and the scan: one row for each sequence.
  const int64_t channels = 40, kernel = 4, heads = 4, head_dim = 16, groups = 2, state_size = 32, slots = 3;
  const int64_t n = 8;
  Pair seq_begin = ints({4}, {0, 5, 7, 8}), seq_start = ints({3}, {0, 9, 0}), seq_slot = ints({3}, {2, 0, 1});
  SequenceRows cpu_seqs{seq_begin.cpu, seq_start.cpu, seq_slot.cpu, {}},
      gpu_seqs{seq_begin.gpu, seq_start.gpu, seq_slot.gpu, {}};
  Pair x = random(DType::f32, {n, channels}), weight = random(DType::f32, {channels, kernel});
  Pair bias = random(DType::f32, {channels}), conv_state = state({slots, channels, kernel - 1});
  Pair conv_out = output(DType::f32, {n, channels});
  cpu.conv1d_silu(x.cpu, weight.cpu, bias.cpu, conv_state.cpu, cpu_seqs, conv_out.cpu);
  gpu->conv1d_silu(x.gpu, weight.gpu, bias.gpu, conv_state.gpu, gpu_seqs, conv_out.gpu);
  expect_close(conv_out, "conv1d_silu");
  expect_close(conv_state, "conv1d_silu state");
  Pair round_begin = ints({4}, {0, 1, 2, 3}), round_start = ints({3}, {5, 11, 1});
  Pair round_x = random(DType::f32, {3, channels}), round_out = output(DType::f32, {3, channels});
  cpu.conv1d_silu(round_x.cpu, weight.cpu, bias.cpu, conv_state.cpu, {round_begin.cpu, round_start.cpu, seq_slot.cpu, {}},
                  round_out.cpu);
  gpu->conv1d_silu(round_x.gpu, weight.gpu, bias.gpu, conv_state.gpu,
                   {round_begin.gpu, round_start.gpu, seq_slot.gpu, {}}, round_out.gpu);
  expect_close(round_out, "conv1d_silu, a round");
  expect_close(conv_state, "conv1d_silu state after a round");

  Pair xs = random(DType::f32, {n, heads, head_dim}), dt = random(DType::f32, {n, heads});
  Pair b = random(DType::f32, {n, groups, state_size}), c = random(DType::f32, {n, groups, state_size});
  Pair a_log = random(DType::f32, {heads}, 0.5f), d = random(DType::f32, {heads}),
       dt_bias = random(DType::f32, {heads});
  Pair ssm_state = state({slots, heads, head_dim, state_size}), y = output(DType::f32, {n, heads, head_dim});
  for (Backend* be : {static_cast<Backend*>(&cpu), gpu.get()}) {
    bool on_cpu = be == &cpu;
    auto pick = [&](Pair& p) -> const Tensor& { return on_cpu ? p.cpu.view() : p.gpu.view(); };
    SsmScan scan{pick(xs),      pick(dt), pick(b), pick(c),         pick(a_log), pick(d),
                 pick(dt_bias), 0.0f,     1,       pick(ssm_state), pick(y)};
    be->ssm_scan(scan, on_cpu ? cpu_seqs : gpu_seqs);
  }
  expect_close(y, "ssm_scan", 1e-4);
  expect_close(ssm_state, "ssm_scan state", 1e-4);
  // The round (the GPU's round kernel), from those states.
  Pair round_xs = random(DType::f32, {3, heads, head_dim}), round_dt = random(DType::f32, {3, heads});
  Pair round_b = random(DType::f32, {3, groups, state_size}), round_c = random(DType::f32, {3, groups, state_size});
  Pair round_y = output(DType::f32, {3, heads, head_dim});
  for (Backend* be : {static_cast<Backend*>(&cpu), gpu.get()}) {
    bool on_cpu = be == &cpu;
    auto pick = [&](Pair& p) -> const Tensor& { return on_cpu ? p.cpu.view() : p.gpu.view(); };
    SsmScan scan{pick(round_xs), pick(round_dt), pick(round_b), pick(round_c),   pick(a_log),   pick(d),
                 pick(dt_bias),  0.0f,           128,           pick(ssm_state), pick(round_y)};
    be->ssm_scan(scan, on_cpu ? SequenceRows{round_begin.cpu, round_start.cpu, seq_slot.cpu, {}}
                              : SequenceRows{round_begin.gpu, round_start.gpu, seq_slot.gpu, {}});
  }
  expect_close(round_y, "ssm_scan, a round", 1e-4);
  expect_close(ssm_state, "ssm_scan state after a round", 1e-4);
}

TEST_F(CudaVsCpu, SsdChunkedScan) {
  // The SSD form against the CPU's, both cutting at multiples of the chunk: a fresh sequence of
  // 300 rows, one at position 100 of 200 rows, one at 127 of 3, a one-row sequence and a fresh
  // one of 2 rows. At chunk 128 the pieces are 128, 128, 44; 28, 128, 44; and a one-row piece
  // then two. Three shapes: the 30B model's state size and chunk with columns that do not fill
  // the last block; a state size short of a multiple of 32 with a chunk short of one of the
  // kernel's tiles; and the largest the kernel takes (state 256, chunk 256).
  struct Shape4 {
    int64_t heads, head_dim, groups, state_size, chunk;
  };
  for (Shape4 shape : {Shape4{4, 80, 2, 128, 128}, Shape4{4, 16, 2, 40, 20}, Shape4{2, 24, 1, 256, 256}}) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim) + ", chunk " + std::to_string(shape.chunk));
    const int64_t heads = shape.heads, head_dim = shape.head_dim, groups = shape.groups, states = shape.state_size;
    const int64_t slots = 6, n = 300 + 200 + 3 + 1 + 2;
    Pair seq_begin = ints({6}, {0, 300, 500, 503, 504, 506}), seq_start = ints({5}, {0, 100, 127, 50, 0});
    Pair seq_slot = ints({5}, {4, 0, 2, 5, 1});
    SequenceRows cpu_seqs{seq_begin.cpu, seq_start.cpu, seq_slot.cpu, {}},
        gpu_seqs{seq_begin.gpu, seq_start.gpu, seq_slot.gpu, {}};
    Pair xs = random(DType::f32, {n, heads, head_dim}), dt = random(DType::f32, {n, heads});
    Pair b = random(DType::f32, {n, groups, states}, 0.5f), c = random(DType::f32, {n, groups, states}, 0.5f);
    Pair a_log = random(DType::f32, {heads}, 0.5f), d = random(DType::f32, {heads});
    Pair dt_bias = random(DType::f32, {heads});
    Pair ssm_state = state({slots, heads, head_dim, states}), y = output(DType::f32, {n, heads, head_dim});
    for (Backend* be : {static_cast<Backend*>(&cpu), gpu.get()}) {
      bool on_cpu = be == &cpu;
      auto pick = [&](Pair& p) -> const Tensor& { return on_cpu ? p.cpu.view() : p.gpu.view(); };
      SsmScan scan{pick(xs),      pick(dt), pick(b),     pick(c),         pick(a_log), pick(d),
                   pick(dt_bias), 0.001f,   shape.chunk, pick(ssm_state), pick(y)};
      be->ssm_scan(scan, on_cpu ? cpu_seqs : gpu_seqs);
    }
    expect_close(y, "ssm_scan", 1e-4);
    expect_close(ssm_state, "ssm_scan state", 1e-4);
  }
}

// conv1d_silu_split writes the conv's channels straight into its tensors: the same bits (and
// the same conv state) as conv1d_silu then split_columns, for a fill and for a round.
TEST_F(CudaVsCpu, ConvSplitEqualsItsTwoOps) {
  const int64_t channels = 40, kernel = 4, slots = 3, n = 8;
  const std::vector<int64_t> widths = {24, 8, 8};
  Pair seq_begin = ints({4}, {0, 5, 7, 8}), seq_start = ints({3}, {0, 9, 0}), seq_slot = ints({3}, {2, 0, 1});
  Pair round_begin = ints({4}, {0, 1, 2, 3}), round_start = ints({3}, {5, 11, 1});
  Pair weight = random(DType::f32, {channels, kernel}), bias = random(DType::f32, {channels});
  Pair start = state({slots, channels, kernel - 1});
  OwnedTensor state_apart = gpu->alloc(DType::f32, {slots, channels, kernel - 1});
  OwnedTensor state_fused = gpu->alloc(DType::f32, {slots, channels, kernel - 1});
  gpu->upload(state_apart, start.cpu.view().data);
  gpu->upload(state_fused, start.cpu.view().data);
  for (bool round : {false, true}) {
    const int64_t rows = round ? 3 : n;
    SequenceRows seqs{round ? round_begin.gpu.view() : seq_begin.gpu.view(),
                      round ? round_start.gpu.view() : seq_start.gpu.view(), seq_slot.gpu.view(), {}};
    Pair x = random(DType::f32, {rows, channels}), whole = output(DType::f32, {rows, channels});
    Pair scratch = output(DType::f32, {rows, channels});
    SplitParts parts = split_parts(rows, widths);
    gpu->conv1d_silu(x.gpu, weight.gpu, bias.gpu, state_apart, seqs, whole.gpu);
    gpu->split_columns(whole.gpu, parts.apart_views);
    gpu->conv1d_silu_split(x.gpu, weight.gpu, bias.gpu, state_fused, seqs, scratch.gpu, parts.fused_views);
    for (size_t j = 0; j < widths.size(); ++j)
      EXPECT_TRUE(same_on_gpu(parts.apart[j].gpu, parts.fused[j].gpu)) << (round ? "round" : "fill") << ", part " << j;
    EXPECT_TRUE(same_on_gpu(state_apart, state_fused)) << (round ? "round" : "fill") << ": conv state";
  }
}

TEST_F(CudaVsCpu, MoeRouteAndExperts) {
  const int64_t n = 9, experts = 16, k = 4, d = 64, inner = 40;
  for (int64_t groups : {int64_t(1), int64_t(4)}) {
    Pair logits = random(DType::f32, {n, experts}), bias = random(DType::f32, {experts}, 0.1f);
    Pair ids = output(DType::i32, {n, k}), weights = output(DType::f32, {n, k});
    MoeRouting routing{groups, groups == 1 ? 1 : 2, true, 2.5f};
    cpu.moe_route(logits.cpu, bias.cpu, routing, ids.cpu, weights.cpu);
    gpu->moe_route(logits.gpu, bias.gpu, routing, ids.gpu, weights.gpu);
    expect_equal_ids(ids, "moe_route ids");
    expect_close(weights, "moe_route weights");
    // The routed experts, then two more that every row takes (a shared expert's pieces).
    for (DType wtype : {DType::f32, DType::bf16}) {
      Pair x = random(DType::f32, {n, d}), up = random(wtype, {experts + 2, inner, d}),
           down = random(wtype, {experts + 2, d, inner});
      Pair out = output(DType::f32, {n, d});
      cpu.moe_experts(x.cpu, ids.cpu, weights.cpu, up.cpu, down.cpu, 2, out.cpu);
      gpu->moe_experts(x.gpu, ids.gpu, weights.gpu, up.gpu, down.gpu, 2, out.gpu);
      expect_close(out, "moe_experts");
    }
  }
}

// moe runs the routing in the expert list's launch for rounds of up to 8 rows without expert
// groups: the same ids, weights and output bits as moe_route then moe_experts, at 1 to 9 rows
// (9: the two ops), with 16 and 130 router experts, and with groups (the two ops).
TEST_F(CudaVsCpu, MoeEqualsRouteThenExperts) {
  const int64_t k = 4, d = 64, inner = 32, always = 2;
  for (int64_t experts : {int64_t(16), int64_t(130)}) {
    Pair up = random(DType::bf16, {experts + always, inner, d}), down = random(DType::bf16, {experts + always, d, inner});
    Pair bias = random(DType::f32, {experts}, 0.1f);
    for (int64_t groups : {int64_t(1), int64_t(2)}) {
      const MoeRouting routing{groups, 1, true, 2.5f};
      for (int64_t n = 1; n <= 9; ++n) {
        Pair logits = random(DType::f32, {n, experts}), x = random(DType::f32, {n, d});
        OwnedTensor ids = gpu->alloc(DType::i32, {n, k}), weights = gpu->alloc(DType::f32, {n, k});
        OwnedTensor out = gpu->alloc(DType::f32, {n, d});
        OwnedTensor ids2 = gpu->alloc(DType::i32, {n, k}), weights2 = gpu->alloc(DType::f32, {n, k});
        OwnedTensor out2 = gpu->alloc(DType::f32, {n, d});
        gpu->moe(x.gpu, logits.gpu, bias.gpu, routing, up.gpu, down.gpu, always, ids, weights, out);
        gpu->moe_route(logits.gpu, bias.gpu, routing, ids2, weights2);
        gpu->moe_experts(x.gpu, ids2, weights2, up.gpu, down.gpu, always, out2);
        const std::string label = std::to_string(experts) + " experts, " + std::to_string(groups) + " groups, " +
                                  std::to_string(n) + " rows";
        EXPECT_TRUE(same_on_gpu(ids, ids2)) << "ids, " << label;
        EXPECT_TRUE(same_on_gpu(weights, weights2)) << "weights, " << label;
        EXPECT_TRUE(same_on_gpu(out, out2)) << "out, " << label;
      }
    }
  }
}

#ifdef LOCKSTEP_WITH_CUDA
// The relaxed (cuBLAS) matmul of the benchmark's cost-of-exactness table computes the same
// product, within bf16 rounding of the activations.
TEST_F(CudaVsCpu, RelaxedMatmulAgreesWithinBf16Rounding) {
  std::string why;
  if (!static_cast<CudaBackend&>(*gpu).use_relaxed_matmul(&why)) GTEST_SKIP() << why;
  for (int64_t n : {int64_t(1), int64_t(24), int64_t(300)}) {
    const int64_t k = 512, m = 96;
    Pair x = random(DType::f32, {n, k}), w = random(DType::bf16, {m, k}), out = output(DType::f32, {n, m});
    cpu.matmul(x.cpu, w.cpu, out.cpu);
    gpu->matmul(x.gpu, w.gpu, out.gpu);
    expect_close(out, "relaxed matmul", 1e-2);
  }
}
#endif

}  // namespace
}  // namespace lockstep
