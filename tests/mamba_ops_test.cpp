// The Mamba2 ops around the scan: the causal conv with its state (against a float64
// reference, and bit-identical whatever other sequences share the launch), the gated grouped
// RMSNorm, and split_columns (how a model splits xBC) and join_columns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "op_test_data.h"
#include "test_support.h"

namespace lockstep {
namespace {

constexpr int64_t kChannels = 70;  // more than one 64-channel block
constexpr int64_t kKernel = 4;
constexpr int64_t kKeep = kKernel - 1;
constexpr int64_t kSlots = 48;

double silu(double v) { return v / (1.0 + std::exp(-v)); }

class MambaOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend = make_test_backend(GetParam());
    std::mt19937 rng(31);
    weight_host = normal_floats(rng, kChannels * kKernel, 0.5f);
    bias_host = normal_floats(rng, kChannels, 0.5f);
    weight = to_backend(*backend, DType::f32, {kChannels, kKernel}, weight_host);
    bias = to_backend(*backend, DType::f32, {kChannels}, bias_host);
  }

  struct ConvResult {
    std::vector<float> out;    // [n, channels]
    std::vector<float> state;  // [slots, channels, K - 1]
  };

  // One conv1d_silu launch of `specs` with inputs x [n, channels] and the prior state.
  ConvResult conv(const std::vector<SeqSpec>& specs, const std::vector<float>& x, const std::vector<float>& state) {
    const int64_t n = int64_t(x.size()) / kChannels;
    OwnedTensor tx = to_backend(*backend, DType::f32, {n, kChannels}, x);
    OwnedTensor tstate = to_backend(*backend, DType::f32, {kSlots, kChannels, kKeep}, state);
    OwnedTensor tout = backend->alloc(DType::f32, {n, kChannels});
    SequenceTensors seqs(*backend, specs);
    backend->conv1d_silu(tx, weight, bias, tstate, seqs.rows(), tout);
    return {to_host(*backend, tout), to_host(*backend, tstate)};
  }

  std::unique_ptr<Backend> backend;
  std::vector<float> weight_host, bias_host;
  OwnedTensor weight, bias;
};

TEST_P(MambaOps, Conv1dSiluMatchesFloat64Reference) {
  // Fresh sequences (their slots hold garbage that must be ignored), a continued fill, a
  // continued fill shorter than K - 1, and a decode row. Slots 1 and 6 are nobody's.
  const std::vector<SeqSpec> specs = {{0, 5, 3}, {7, 4, 0}, {2, 2, 5}, {0, 1, 2}, {11, 1, 4}};
  std::mt19937 rng(5);
  std::vector<float> state = normal_floats(rng, kSlots * kChannels * kKeep);
  int64_t n = 0;
  for (const SeqSpec& s : specs) n += s.length;
  std::vector<float> x = normal_floats(rng, n * kChannels);
  ConvResult got = conv(specs, x, state);

  std::vector<int64_t> firsts = first_rows(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    const SeqSpec& s = specs[i];
    for (int64_t c = 0; c < kChannels; ++c) {
      // The window: the prior K - 1 inputs (zero at position 0), then the sequence's rows.
      std::vector<double> window;
      for (int64_t k = 0; k < kKeep; ++k)
        window.push_back(s.start == 0 ? 0.0 : state[size_t((s.slot * kChannels + c) * kKeep + k)]);
      for (int64_t t = 0; t < s.length; ++t) window.push_back(x[size_t((firsts[i] + t) * kChannels + c)]);
      for (int64_t t = 0; t < s.length; ++t) {
        double acc = bias_host[size_t(c)];
        for (int64_t k = 0; k < kKernel; ++k) acc += double(weight_host[size_t(c * kKernel + k)]) * window[size_t(t + k)];
        double want = silu(acc);
        EXPECT_NEAR(got.out[size_t((firsts[i] + t) * kChannels + c)], want, 1e-5 * (1 + std::abs(want)))
            << "sequence " << i << " row " << t << " channel " << c;
      }
      for (int64_t k = 0; k < kKeep; ++k)
        EXPECT_EQ(got.state[size_t((s.slot * kChannels + c) * kKeep + k)], float(window[size_t(s.length + k)]))
            << "sequence " << i << " keeps its last K - 1 inputs, channel " << c;
    }
  }
  for (int64_t untouched : {1, 6})
    EXPECT_TRUE(same_bits(got.state, untouched * kChannels * kKeep, state, untouched * kChannels * kKeep,
                          kChannels * kKeep))
        << "slot " << untouched;
}

TEST_P(MambaOps, Conv1dSiluSequenceIsBitIdenticalWhateverSharesTheLaunch) {
  std::mt19937 rng(17);
  const std::vector<float> prior = normal_floats(rng, kChannels * kKeep);
  for (SeqSpec target : {SeqSpec{6, 3, 0}, SeqSpec{0, 5, 0}, SeqSpec{9, 1, 0}}) {
    const std::vector<float> target_x = normal_floats(rng, target.length * kChannels);
    std::vector<float> state = normal_floats(rng, kSlots * kChannels * kKeep);
    std::copy(prior.begin(), prior.end(), state.begin());
    ConvResult alone = conv({target}, target_x, state);
    for (int extra = 1; extra <= 33; ++extra) {
      // Other sequences in slots 1.. totalling `extra` rows, the target anywhere among them.
      std::vector<SeqSpec> specs;
      for (int left = extra; left > 0;) {
        int32_t length = int32_t(1 + rng() % uint32_t(std::min(left, 6)));
        specs.push_back({rng() % 2 ? 0 : int32_t(rng() % 20), length, int32_t(specs.size() + 1)});
        left -= length;
      }
      size_t at = rng() % (specs.size() + 1);
      specs.insert(specs.begin() + int64_t(at), target);
      std::vector<float> x = normal_floats(rng, (extra + target.length) * kChannels);
      int64_t first = first_rows(specs)[at];
      std::copy(target_x.begin(), target_x.end(), x.begin() + first * kChannels);
      state = normal_floats(rng, kSlots * kChannels * kKeep);
      std::copy(prior.begin(), prior.end(), state.begin());
      ConvResult shared = conv(specs, x, state);
      ASSERT_TRUE(same_bits(alone.out, 0, shared.out, first * kChannels, target.length * kChannels))
          << "output, sequence " << at << " of " << specs.size() << ", " << extra << " other rows";
      ASSERT_TRUE(same_bits(alone.state, 0, shared.state, 0, kChannels * kKeep))
          << "state, sequence " << at << " of " << specs.size() << ", " << extra << " other rows";
    }
  }
}

std::vector<float> gated_rms_norm(Backend& backend, const std::vector<float>& x, const std::vector<float>& gate,
                                  const std::vector<float>& weight, int64_t groups) {
  const int64_t d = int64_t(weight.size()), n = int64_t(x.size()) / d;
  OwnedTensor tx = to_backend(backend, DType::f32, {n, d}, x);
  OwnedTensor tgate = to_backend(backend, DType::f32, {n, d}, gate);
  OwnedTensor tweight = to_backend(backend, DType::f32, {d}, weight);
  OwnedTensor tout = backend.alloc(DType::f32, {n, d});
  backend.gated_rms_norm(tx, tgate, tweight, groups, 1e-5f, tout);
  return to_host(backend, tout);
}

TEST_P(MambaOps, GatedRmsNormMatchesFloat64Reference) {
  const int64_t d = 96, n = 5;
  std::mt19937 rng(8);
  std::vector<float> weight = normal_floats(rng, d), x = normal_floats(rng, n * d), gate = normal_floats(rng, n * d, 2);
  for (int64_t groups : {1, 4}) {
    std::vector<float> got = gated_rms_norm(*backend, x, gate, weight, groups);
    const int64_t size = d / groups;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        std::vector<double> gated;
        double squares = 0;
        for (int64_t i = g * size; i < (g + 1) * size; ++i) {
          gated.push_back(x[size_t(r * d + i)] * silu(gate[size_t(r * d + i)]));
          squares += gated.back() * gated.back();
        }
        double inv = 1.0 / std::sqrt(squares / double(size) + 1e-5);
        for (int64_t i = 0; i < size; ++i) {
          double want = weight[size_t(g * size + i)] * gated[size_t(i)] * inv;
          EXPECT_NEAR(got[size_t(r * d + g * size + i)], want, 2e-5 * (1 + std::abs(want)))
              << groups << " groups, row " << r << " column " << g * size + i;
        }
      }
    }
  }
}

TEST_P(MambaOps, GatedRmsNormRowIsBitIdenticalWhateverSharesTheLaunch) {
  const int64_t d = 256;
  std::mt19937 rng(9);
  const std::vector<float> weight = normal_floats(rng, d);
  for (int64_t groups : {1, 4}) {
    const std::vector<float> target_x = normal_floats(rng, d), target_gate = normal_floats(rng, d);
    std::vector<float> alone = gated_rms_norm(*backend, target_x, target_gate, weight, groups);
    for (int64_t n = 1; n <= 33; ++n) {
      for (int64_t at : {int64_t(0), n / 2, n - 1}) {
        std::vector<float> x = normal_floats(rng, n * d), gate = normal_floats(rng, n * d);
        std::copy(target_x.begin(), target_x.end(), x.begin() + at * d);
        std::copy(target_gate.begin(), target_gate.end(), gate.begin() + at * d);
        std::vector<float> shared = gated_rms_norm(*backend, x, gate, weight, groups);
        ASSERT_TRUE(same_bits(alone, 0, shared, at * d, d)) << groups << " groups: row " << at << " of " << n;
      }
    }
  }
}

TEST_P(MambaOps, SplitColumnsCutsEachRowInOrder) {
  const int64_t n = 5, d = 10;
  std::mt19937 rng(4);
  std::vector<float> x = normal_floats(rng, n * d);
  OwnedTensor tx = to_backend(*backend, DType::f32, {n, d}, x);
  for (const std::vector<int64_t>& widths : {std::vector<int64_t>{3, 4, 2}, {10}, {1, 1, 1, 7}}) {
    std::vector<OwnedTensor> owned;
    std::vector<Tensor> outs;
    for (int64_t w : widths) owned.push_back(backend->alloc(DType::f32, {n, w}));
    for (const OwnedTensor& t : owned) outs.push_back(t.view());
    backend->split_columns(tx, outs);
    int64_t begin = 0;
    for (size_t j = 0; j < widths.size(); ++j) {
      const int64_t width = widths[j];
      std::vector<float> got = to_host(*backend, owned[j]);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < width; ++i)
          EXPECT_EQ(got[size_t(r * width + i)], x[size_t(r * d + begin + i)])
              << "output " << j << " row " << r << " column " << i;
      begin += width;
    }
  }
}

// join_columns puts split_columns' parts back: the same bits, any number of parts (the LM head
// of tensor-parallel ranks joins one part a rank).
TEST_P(MambaOps, JoinColumnsUndoesTheSplit) {
  const int64_t n = 5, d = 10;
  std::mt19937 rng(5);
  std::vector<float> x = normal_floats(rng, n * d);
  OwnedTensor tx = to_backend(*backend, DType::f32, {n, d}, x);
  for (const std::vector<int64_t>& widths : {std::vector<int64_t>{3, 4, 2, 1}, {10}, {1, 1, 1, 1, 1, 5}}) {
    std::vector<OwnedTensor> owned;
    std::vector<Tensor> parts;
    for (int64_t w : widths) owned.push_back(backend->alloc(DType::f32, {n, w}));
    for (const OwnedTensor& t : owned) parts.push_back(t.view());
    backend->split_columns(tx, parts);
    OwnedTensor joined = backend->alloc(DType::f32, {n, d});
    backend->join_columns(parts, joined);
    EXPECT_EQ(to_host(*backend, joined), x) << widths.size() << " parts";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MambaOps, ::testing::ValuesIn(test_backend_names()),
                         backend_param_name);

}  // namespace
}  // namespace lockstep
