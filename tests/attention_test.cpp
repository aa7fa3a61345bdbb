// Paged attention: matches a float64 reference, reads pages in any order, and a row's output
// does not depend on the other rows or sequences in its launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/backend.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr int64_t kHeads = 16, kKvHeads = 2, kHeadDim = 32, kPageSize = 16, kPages = 96;

struct Sequence {
  std::vector<int32_t> pages;
  int64_t length = 0;
};

class AttentionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend = make_test_backend(GetParam());
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    k_host.resize(size_t(kPages * kKvHeads * kPageSize * kHeadDim));
    v_host.resize(k_host.size());
    for (auto& x : k_host) x = normal(rng);
    for (auto& x : v_host) x = normal(rng);
    k = backend->alloc(DType::f32, {kPages, kKvHeads, kPageSize, kHeadDim});
    v = backend->alloc(DType::f32, {kPages, kKvHeads, kPageSize, kHeadDim});
    backend->upload(k, k_host.data());
    backend->upload(v, v_host.data());
    // Three sequences with shuffled pages; the longest crosses two attention splits.
    std::vector<int32_t> ids(kPages);
    for (int32_t i = 0; i < kPages; ++i) ids[size_t(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    int64_t lengths[] = {600, 37, 257};
    size_t next = 0;
    for (int64_t length : lengths) {
      Sequence s;
      s.length = length;
      for (int64_t p = 0; p < (length + kPageSize - 1) / kPageSize; ++p) s.pages.push_back(ids[next++]);
      sequences.push_back(s);
    }
  }

  const float* cached(const std::vector<float>& cache, const Sequence& s, int64_t pos, int64_t g) const {
    int64_t page = s.pages[size_t(pos / kPageSize)];
    return cache.data() + ((page * kKvHeads + g) * kPageSize + pos % kPageSize) * kHeadDim;
  }

  // Runs attention for rows (seq, pos) with queries q [n, heads, head_dim].
  std::vector<float> run(const std::vector<std::pair<int32_t, int32_t>>& rows, const std::vector<float>& q) {
    const int64_t n = int64_t(rows.size());
    const int64_t max_pages = 64;
    std::vector<int32_t> positions, row_seq, tables(sequences.size() * max_pages, 0);
    for (auto [seq, pos] : rows) {
      row_seq.push_back(seq);
      positions.push_back(pos);
    }
    for (size_t s = 0; s < sequences.size(); ++s)
      std::copy(sequences[s].pages.begin(), sequences[s].pages.end(), tables.begin() + int64_t(s) * max_pages);
    OwnedTensor tq = backend->alloc(DType::f32, {n, kHeads, kHeadDim});
    OwnedTensor tout = backend->alloc(DType::f32, {n, kHeads, kHeadDim});
    OwnedTensor tpos = backend->alloc(DType::i32, {n});
    OwnedTensor tseq = backend->alloc(DType::i32, {n});
    OwnedTensor ttab = backend->alloc(DType::i32, {int64_t(sequences.size()), max_pages});
    backend->upload(tq, q.data());
    backend->upload(tpos, positions.data());
    backend->upload(tseq, row_seq.data());
    backend->upload(ttab, tables.data());
    backend->attention(tq, KvLayer{k, v}, AttentionRows{tpos, tseq, ttab}, 0.25f, tout);
    std::vector<float> out(size_t(n * kHeads * kHeadDim));
    backend->download(out.data(), tout);
    return out;
  }

  std::unique_ptr<Backend> backend;
  std::vector<float> k_host, v_host;
  OwnedTensor k, v;
  std::vector<Sequence> sequences;
};

std::vector<float> random_queries(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> q(size_t(n * kHeads * kHeadDim));
  for (auto& x : q) x = normal(rng);
  return q;
}

TEST_P(AttentionTest, MatchesFloat64Reference) {
  // The CUDA kernel multiplies on the tensor cores with each f32 operand split into two bf16
  // halves (about 16 significant bits), so it is held to a looser bound than the CPU's f32.
  const double tolerance = GetParam() == "cuda" ? 1e-4 : 1e-5;
  std::vector<std::pair<int32_t, int32_t>> rows = {{0, 0}, {0, 255}, {0, 256}, {0, 599}, {1, 36}, {2, 256}};
  std::vector<float> q = random_queries(int64_t(rows.size()), 5);
  std::vector<float> out = run(rows, q);
  for (size_t r = 0; r < rows.size(); ++r) {
    auto [seq, pos] = rows[r];
    for (int64_t h = 0; h < kHeads; ++h) {
      int64_t g = h / (kHeads / kKvHeads);
      const float* qh = q.data() + (int64_t(r) * kHeads + h) * kHeadDim;
      std::vector<double> scores;
      double top = -1e300;
      for (int64_t t = 0; t <= pos; ++t) {
        const float* key = cached(k_host, sequences[size_t(seq)], t, g);
        double s = 0;
        for (int64_t i = 0; i < kHeadDim; ++i) s += double(qh[i]) * key[i];
        scores.push_back(s * 0.25);
        top = std::max(top, scores.back());
      }
      double sum = 0;
      std::vector<double> acc(kHeadDim, 0.0);
      for (int64_t t = 0; t <= pos; ++t) {
        double w = std::exp(scores[size_t(t)] - top);
        sum += w;
        const float* value = cached(v_host, sequences[size_t(seq)], t, g);
        for (int64_t i = 0; i < kHeadDim; ++i) acc[size_t(i)] += w * value[i];
      }
      for (int64_t i = 0; i < kHeadDim; ++i)
        EXPECT_NEAR(out[size_t((int64_t(r) * kHeads + h) * kHeadDim + i)], acc[size_t(i)] / sum, tolerance)
            << "row " << r << " head " << h;
    }
  }
}

TEST_P(AttentionTest, RowIsBitIdenticalWhateverSharesTheLaunch) {
  const std::pair<int32_t, int32_t> target = {0, 599};
  std::vector<float> target_q = random_queries(1, 9);
  std::vector<float> alone = run({target}, target_q);
  std::mt19937 rng(21);
  // Up to 33 rows; then 129 and 200, wide enough that the CUDA backend walks each row's splits
  // in one block rather than one block per split (the target alone takes the latter).
  std::vector<int> widths;
  for (int n = 2; n <= 33; ++n) widths.push_back(n);
  widths.push_back(129);
  widths.push_back(200);
  for (int n : widths) {
    std::vector<std::pair<int32_t, int32_t>> rows;
    std::vector<float> q = random_queries(n, uint32_t(100 + n));
    int at = int(rng() % uint32_t(n));
    for (int r = 0; r < n; ++r) {
      int32_t seq = int32_t(rng() % 3);
      rows.push_back({seq, int32_t(rng() % uint32_t(sequences[size_t(seq)].length))});
    }
    rows[size_t(at)] = target;
    std::copy(target_q.begin(), target_q.end(), q.begin() + int64_t(at) * kHeads * kHeadDim);
    std::vector<float> out = run(rows, q);
    ASSERT_EQ(0, std::memcmp(alone.data(), out.data() + int64_t(at) * kHeads * kHeadDim, alone.size() * 4))
        << "row " << at << " of " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AttentionTest, ::testing::ValuesIn(test_backend_names()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
