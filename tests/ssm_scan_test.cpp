// The Mamba2 selective scan: matches a float64 run of the recurrence for pieces on both sides
// of the chunk cuts; gives bit-identical results however a sequence is split at multiples of
// the chunk, and whatever other sequences share the launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "op_test_data.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr int64_t kHeads = 4, kHeadDim = 8, kGroups = 2, kStateSize = 16, kChunk = 16, kSlots = 40;
constexpr int64_t kStateFloats = kHeads * kHeadDim * kStateSize;  // one slot
constexpr float kDtMin = 0.01f;

// A launch's per-row inputs.
struct ScanRows {
  std::vector<float> x, dt, b, c;  // [n, heads, head_dim], [n, heads], [n, groups, state_size] x2
  int64_t n() const { return int64_t(dt.size()) / kHeads; }
};

ScanRows random_rows(std::mt19937& rng, int64_t n) {
  return {normal_floats(rng, n * kHeads * kHeadDim), normal_floats(rng, n * kHeads),
          normal_floats(rng, n * kGroups * kStateSize, 0.5f), normal_floats(rng, n * kGroups * kStateSize, 0.5f)};
}

// Rows [first, first + count) of `from`, written over rows from `at` of `into` (or appended).
void copy_rows(const ScanRows& from, int64_t first, int64_t count, ScanRows& into, int64_t at) {
  auto copy = [&](const std::vector<float>& src, std::vector<float>& dst, int64_t width) {
    if (dst.size() < size_t((at + count) * width)) dst.resize(size_t((at + count) * width));
    std::copy_n(src.begin() + first * width, count * width, dst.begin() + at * width);
  };
  copy(from.x, into.x, kHeads * kHeadDim);
  copy(from.dt, into.dt, kHeads);
  copy(from.b, into.b, kGroups * kStateSize);
  copy(from.c, into.c, kGroups * kStateSize);
}

struct ScanResult {
  std::vector<float> out;    // [n, heads, head_dim]
  std::vector<float> state;  // [slots, heads, head_dim, state_size]
};

class SsmScanTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend = make_test_backend(GetParam());
    a_log = to_backend(*backend, DType::f32, {kHeads}, a_log_host);
    d = to_backend(*backend, DType::f32, {kHeads}, d_host);
    dt_bias = to_backend(*backend, DType::f32, {kHeads}, dt_bias_host);
  }

  ScanResult scan(const std::vector<SeqSpec>& specs, const ScanRows& rows, const std::vector<float>& state) {
    const int64_t n = rows.n();
    OwnedTensor x = to_backend(*backend, DType::f32, {n, kHeads, kHeadDim}, rows.x);
    OwnedTensor dt = to_backend(*backend, DType::f32, {n, kHeads}, rows.dt);
    OwnedTensor b = to_backend(*backend, DType::f32, {n, kGroups, kStateSize}, rows.b);
    OwnedTensor c = to_backend(*backend, DType::f32, {n, kGroups, kStateSize}, rows.c);
    OwnedTensor tstate = to_backend(*backend, DType::f32, {kSlots, kHeads, kHeadDim, kStateSize}, state);
    OwnedTensor out = backend->alloc(DType::f32, {n, kHeads, kHeadDim});
    SsmScan s{x, dt, b, c, a_log, d, dt_bias, kDtMin, kChunk, tstate, out};
    SequenceTensors seqs(*backend, specs);
    backend->ssm_scan(s, seqs.rows());
    return {to_host(*backend, out), to_host(*backend, tstate)};
  }

  // One sequence scanned as consecutive launches of the given lengths, the state carried.
  ScanResult scan_in_pieces(SeqSpec whole, const ScanRows& rows, std::vector<float> state,
                            const std::vector<int32_t>& lengths) {
    ScanResult all;
    int32_t done = 0;
    for (int32_t length : lengths) {
      ScanRows piece;
      copy_rows(rows, done, length, piece, 0);
      ScanResult part = scan({{whole.start + done, length, whole.slot}}, piece, state);
      all.out.insert(all.out.end(), part.out.begin(), part.out.end());
      state = all.state = part.state;
      done += length;
    }
    EXPECT_EQ(done, whole.length);
    return all;
  }

  // The recurrence in float64 over rows [first, first + length) of `rows` for a sequence at
  // position `start` whose prior state is `prior` (one slot); checks `got` against it.
  void expect_matches_reference(const ScanRows& rows, int64_t first, SeqSpec seq, const float* prior,
                                const ScanResult& got, int64_t got_first) const {
    std::vector<double> h(size_t(kStateFloats), 0.0);
    if (seq.start > 0) std::copy_n(prior, kStateFloats, h.begin());
    for (int64_t t = 0; t < seq.length; ++t) {
      const int64_t r = first + t;
      for (int64_t head = 0; head < kHeads; ++head) {
        const int64_t group = head / (kHeads / kGroups);
        double raw = double(rows.dt[size_t(r * kHeads + head)]) + dt_bias_host[size_t(head)];
        double dt = std::max(std::log1p(std::exp(raw)), double(kDtMin));
        double decay = std::exp(-dt * std::exp(double(a_log_host[size_t(head)])));
        const float* b = rows.b.data() + (r * kGroups + group) * kStateSize;
        const float* c = rows.c.data() + (r * kGroups + group) * kStateSize;
        for (int64_t p = 0; p < kHeadDim; ++p) {
          double x = rows.x[size_t((r * kHeads + head) * kHeadDim + p)];
          double y = d_host[size_t(head)] * x;
          for (int64_t i = 0; i < kStateSize; ++i) {
            double& hi = h[size_t((head * kHeadDim + p) * kStateSize + i)];
            hi = decay * hi + dt * x * b[i];
            y += hi * c[i];
          }
          float g = got.out[size_t(((got_first + t) * kHeads + head) * kHeadDim + p)];
          ASSERT_NEAR(g, y, 1e-4 * (1 + std::abs(y)))
              << "sequence at " << seq.start << " length " << seq.length << ": row " << t << " head " << head;
        }
      }
    }
    for (int64_t i = 0; i < kStateFloats; ++i)
      ASSERT_NEAR(got.state[size_t(seq.slot * kStateFloats + i)], h[size_t(i)], 1e-4 * (1 + std::abs(h[size_t(i)])))
          << "final state of the sequence at " << seq.start << " length " << seq.length << ", element " << i;
  }

  std::unique_ptr<Backend> backend;
  // Per head: head 2's dt falls below dt_min; head 3's dt_bias crosses softplus's linear cut.
  const std::vector<float> a_log_host = {0.0f, std::log(4.0f), std::log(0.5f), std::log(0.05f)};
  const std::vector<float> d_host = {1.0f, 0.5f, -0.3f, 2.0f};
  const std::vector<float> dt_bias_host = {0.5f, -1.0f, -15.0f, 20.5f};
  OwnedTensor a_log, d, dt_bias;
};

TEST_P(SsmScanTest, MatchesFloat64RecurrenceAcrossChunkCuts) {
  std::vector<SeqSpec> specs;
  for (int32_t start : {0, 5})
    for (int32_t length : {1, 15, 16, 17, 40}) specs.push_back({start, length, int32_t(specs.size())});
  specs.push_back({15, 2, int32_t(specs.size())});  // two one-row pieces
  specs.push_back({31, 3, int32_t(specs.size())});  // one row, then a piece of two
  std::mt19937 rng(2);
  std::vector<float> state = normal_floats(rng, kSlots * kStateFloats);  // garbage for the fresh ones
  int64_t n = 0;
  for (const SeqSpec& s : specs) n += s.length;
  ScanRows rows = random_rows(rng, n);
  ScanResult got = scan(specs, rows, state);
  std::vector<int64_t> firsts = first_rows(specs);
  for (size_t i = 0; i < specs.size(); ++i)
    expect_matches_reference(rows, firsts[i], specs[i], state.data() + specs[i].slot * kStateFloats, got, firsts[i]);
  EXPECT_TRUE(same_bits(got.state, int64_t(specs.size()) * kStateFloats, state, int64_t(specs.size()) * kStateFloats,
                        (kSlots - int64_t(specs.size())) * kStateFloats))
      << "slots of no sequence are untouched";
}

TEST_P(SsmScanTest, PiecesCutAtChunkMultiplesAreBitIdenticalToTheWhole) {
  std::mt19937 rng(3);
  const ScanRows rows = random_rows(rng, 40);
  const std::vector<float> state = normal_floats(rng, kSlots * kStateFloats);
  const std::vector<std::pair<SeqSpec, std::vector<int32_t>>> cases = {
      {{0, 40, 3}, {16, 16, 8}}, {{5, 40, 3}, {11, 16, 13}}, {{5, 40, 3}, {11, 29}}, {{32, 17, 3}, {16, 1}}};
  for (const auto& [whole, lengths] : cases) {
    ScanRows own;
    copy_rows(rows, 0, whole.length, own, 0);
    ScanResult at_once = scan({whole}, own, state);
    ScanResult pieces = scan_in_pieces(whole, own, state, lengths);
    std::string label = "from " + std::to_string(whole.start) + " in " + std::to_string(lengths.size()) + " pieces";
    EXPECT_TRUE(same_bits(at_once.out, 0, pieces.out, 0, whole.length * kHeads * kHeadDim)) << label;
    EXPECT_TRUE(same_bits(at_once.state, 0, pieces.state, 0, kSlots * kStateFloats)) << label;
  }
}

TEST_P(SsmScanTest, PiecesCutElsewhereMatchWithinTolerance) {
  std::mt19937 rng(4);
  const SeqSpec whole{0, 40, 1};
  const ScanRows rows = random_rows(rng, 40);
  const std::vector<float> state = normal_floats(rng, kSlots * kStateFloats);
  for (const std::vector<int32_t>& lengths : {std::vector<int32_t>{7, 33}, std::vector<int32_t>(40, 1)}) {
    ScanResult pieces = scan_in_pieces(whole, rows, state, lengths);
    expect_matches_reference(rows, 0, whole, state.data() + whole.slot * kStateFloats, pieces, 0);
  }
}

TEST_P(SsmScanTest, SequenceIsBitIdenticalWhateverSharesTheLaunch) {
  std::mt19937 rng(6);
  const std::vector<float> prior = normal_floats(rng, kStateFloats);
  for (SeqSpec target : {SeqSpec{37, 1, 0}, SeqSpec{5, 20, 0}, SeqSpec{0, 17, 0}}) {
    const ScanRows target_rows = random_rows(rng, target.length);
    std::vector<float> state = normal_floats(rng, kSlots * kStateFloats);
    std::copy(prior.begin(), prior.end(), state.begin());
    ScanResult alone = scan({target}, target_rows, state);
    for (int others = 1; others <= 33; ++others) {
      std::vector<SeqSpec> specs = random_sequences(rng, others, rng() % 2 ? 1 : 20, 1);
      size_t at = rng() % (specs.size() + 1);
      specs.insert(specs.begin() + int64_t(at), target);
      int64_t n = 0;
      for (const SeqSpec& s : specs) n += s.length;
      ScanRows rows = random_rows(rng, n);
      int64_t first = first_rows(specs)[at];
      copy_rows(target_rows, 0, target.length, rows, first);
      state = normal_floats(rng, kSlots * kStateFloats);
      std::copy(prior.begin(), prior.end(), state.begin());
      ScanResult shared = scan(specs, rows, state);
      ASSERT_TRUE(same_bits(alone.out, 0, shared.out, first * kHeads * kHeadDim, target.length * kHeads * kHeadDim))
          << "output of the sequence at " << target.start << ": " << at << " of " << specs.size();
      ASSERT_TRUE(same_bits(alone.state, 0, shared.state, 0, kStateFloats))
          << "state of the sequence at " << target.start << ": " << at << " of " << specs.size();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SsmScanTest, ::testing::ValuesIn(test_backend_names()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
