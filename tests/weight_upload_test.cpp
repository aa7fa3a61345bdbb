// upload_concatenated: tensors of different row counts become one tensor of their rows in
// order (Nemotron's q, k and v projections, read by one matmul), with clear errors.
// upload_experts: the routed experts, then the shared expert cut into experts of their width.
// upload_rows and upload_columns: a tensor-parallel rank's share of a weight.
#include <gtest/gtest.h>

#include <cstring>

#include "io/checkpoint.h"
#include "io/quantized_weights.h"
#include "models/weight_upload.h"
#include "tensor/quant_tensor.h"
#include "test_support.h"

namespace lockstep {
namespace {

// Adds f32 or bf16 (16-bit words) values to `weights`.
void add_f32(MemoryWeights& weights, const std::string& name, Shape shape, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  weights.add(name, DType::f32, shape, std::move(bytes));
}
void add_bf16(MemoryWeights& weights, const std::string& name, Shape shape, const std::vector<uint16_t>& words) {
  std::vector<uint8_t> bytes(words.size() * 2);
  std::memcpy(bytes.data(), words.data(), bytes.size());
  weights.add(name, DType::bf16, shape, std::move(bytes));
}

class WeightUpload : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { backend = make_test_backend(GetParam()); }
  std::unique_ptr<Backend> backend;
};

TEST_P(WeightUpload, ConcatenatedTensorHoldsEachTensorsRowsInOrder) {
  MemoryWeights weights;
  add_f32(weights, "q", {2, 3}, {1, 2, 3, 4, 5, 6});
  add_f32(weights, "k", {1, 3}, {7, 8, 9});
  add_f32(weights, "v", {3, 3}, {10, 11, 12, 13, 14, 15, 16, 17, 18});
  auto all = upload_concatenated(weights, *backend, {"q", "k", "v"}, {{2, 3}, {1, 3}, {3, 3}}, WeightUse::matrix);
  ASSERT_TRUE(all.ok()) << all.error().message;
  const Tensor t = all->view();
  EXPECT_EQ(t.dtype, DType::f32);
  ASSERT_EQ(t.shape.rank, 2);
  EXPECT_EQ(t.shape[0], 6);
  EXPECT_EQ(t.shape[1], 3);
  std::vector<float> got(18);
  backend->download(got.data(), t);
  for (int i = 0; i < 18; ++i) EXPECT_EQ(got[size_t(i)], float(i + 1)) << i;
}

// A tensor-parallel rank's shares: rows of a matrix, columns of one, elements of a vector.
TEST_P(WeightUpload, RowsAndColumnsAreTheRanksShares) {
  MemoryWeights weights;
  add_f32(weights, "w", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  add_f32(weights, "b", {4}, {1, 2, 3, 4});
  auto rows = upload_rows(weights, *backend, "w", {4, 3}, 2, 2, WeightUse::matrix);
  auto cols = upload_columns(weights, *backend, "w", {4, 3}, 1, 2, WeightUse::matrix);
  auto part = upload_rows(weights, *backend, "b", {4}, 1, 2, WeightUse::vector);
  ASSERT_TRUE(rows.ok() && cols.ok() && part.ok());
  ASSERT_EQ(rows->view().shape, (Shape{2, 3}));
  ASSERT_EQ(cols->view().shape, (Shape{4, 2}));
  ASSERT_EQ(part->view().shape, (Shape{2}));
  std::vector<float> got_rows(6), got_cols(8), got_part(2);
  backend->download(got_rows.data(), rows->view());
  backend->download(got_cols.data(), cols->view());
  backend->download(got_part.data(), part->view());
  EXPECT_EQ(got_rows, (std::vector<float>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(got_cols, (std::vector<float>{2, 3, 5, 6, 8, 9, 11, 12}));
  EXPECT_EQ(got_part, (std::vector<float>{2, 3}));
}

TEST_P(WeightUpload, ConcatenatedBf16StaysBf16) {
  MemoryWeights weights;
  add_bf16(weights, "a", {1, 2}, {0x3f80, 0x4000});  // 1, 2
  add_bf16(weights, "b", {1, 2}, {0x4040, 0x4080});  // 3, 4
  auto all = upload_concatenated(weights, *backend, {"a", "b"}, {{1, 2}, {1, 2}}, WeightUse::matrix);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->view().dtype, DType::bf16);
  std::vector<uint16_t> got(4);
  backend->download(got.data(), all->view());
  EXPECT_EQ(got, (std::vector<uint16_t>{0x3f80, 0x4000, 0x4040, 0x4080}));
}

TEST_P(WeightUpload, ConcatenatedErrorsNameTheTensor) {
  MemoryWeights weights;
  add_f32(weights, "q", {1, 2}, {1, 2});
  add_bf16(weights, "k", {1, 2}, {0x3f80, 0x4000});
  auto missing = upload_concatenated(weights, *backend, {"q", "v"}, {{1, 2}, {1, 2}}, WeightUse::matrix);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("'v'"), std::string::npos) << missing.error().message;
  auto mixed = upload_concatenated(weights, *backend, {"q", "k"}, {{1, 2}, {1, 2}}, WeightUse::matrix);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("another dtype"), std::string::npos) << mixed.error().message;
  auto shape = upload_concatenated(weights, *backend, {"q"}, {{2, 2}}, WeightUse::matrix);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.error().message.find("'q'"), std::string::npos) << shape.error().message;
}

// Two routed experts of [2, 3] (values 1..12), then a shared expert 5 rows wide: as an up
// projection [5, 3] it becomes 3 experts of 2 rows (the last half zeros); as a down projection
// [3, 5] it becomes 3 experts of 2 columns.
TEST_P(WeightUpload, ExpertsHoldTheRoutedThenTheSharedInPieces) {
  for (bool stacked : {false, true}) {
    MemoryWeights weights;
    std::vector<float> routed(12), shared(15);
    for (int i = 0; i < 12; ++i) routed[size_t(i)] = float(i + 1);
    for (int i = 0; i < 15; ++i) shared[size_t(i)] = float(101 + i);
    if (stacked) {
      add_f32(weights, "all", {2, 2, 3}, routed);
    } else {
      add_f32(weights, "e0", {2, 3}, {routed.begin(), routed.begin() + 6});
      add_f32(weights, "e1", {2, 3}, {routed.begin() + 6, routed.end()});
    }
    add_f32(weights, "up", {5, 3}, shared);
    add_f32(weights, "down", {3, 5}, shared);
    ExpertNames names{stacked ? std::vector<std::string>{"all"} : std::vector<std::string>{"e0", "e1"}, stacked, 2,
                      "up", 5};
    auto up = upload_experts(weights, *backend, names, {2, 3}, 0, WeightUse::matmul);
    ASSERT_TRUE(up.ok()) << up.error().message;
    ASSERT_EQ(up->view().shape[0], 5);
    std::vector<float> got(30);
    backend->download(got.data(), up->view());
    std::vector<float> want = routed;
    want.insert(want.end(), shared.begin(), shared.end());
    want.resize(30, 0.0f);
    EXPECT_EQ(got, want) << "up, stacked " << stacked;

    // Only the routed experts' shape differs for the down projections: [3, 2] pieces of columns.
    if (stacked) {
      weights.add("all3", DType::f32, {2, 3, 2}, std::vector<uint8_t>(48, 0));
      names.routed = {"all3"};
    } else {
      weights.add("d0", DType::f32, {3, 2}, std::vector<uint8_t>(24, 0));
      weights.add("d1", DType::f32, {3, 2}, std::vector<uint8_t>(24, 0));
      names.routed = {"d0", "d1"};
    }
    names.shared = "down";
    auto down = upload_experts(weights, *backend, names, {3, 2}, 1, WeightUse::matmul);
    ASSERT_TRUE(down.ok()) << down.error().message;
    backend->download(got.data(), down->view());
    want.assign(12, 0.0f);
    for (int piece = 0; piece < 3; ++piece)
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c) want.push_back(piece * 2 + c < 5 ? shared[size_t(r * 5 + piece * 2 + c)] : 0.0f);
    EXPECT_EQ(got, want) << "down, stacked " << stacked;
  }
}

// f16 checkpoints become f32 (as upload_weight makes them), the shared expert's pieces too.
TEST_P(WeightUpload, F16ExpertsBecomeF32) {
  MemoryWeights weights;
  auto add_f16 = [&](const std::string& name, Shape shape, const std::vector<uint16_t>& words) {
    std::vector<uint8_t> bytes(words.size() * 2);
    std::memcpy(bytes.data(), words.data(), bytes.size());
    weights.add(name, DType::f16, shape, std::move(bytes));
  };
  add_f16("e0", {1, 2}, {0x3c00, 0x4000});          // 1, 2
  add_f16("up", {3, 2}, {0x4200, 0x4400, 0x4500,    // 3, 4, 5
                         0x4600, 0x4700, 0x4800});  // 6, 7, 8
  auto up = upload_experts(weights, *backend, {{"e0"}, false, 1, "up", 3}, {1, 2}, 0, WeightUse::matmul);
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->view().dtype, DType::f32);
  std::vector<float> got(8);
  backend->download(got.data(), up->view());
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_P(WeightUpload, ExpertsErrorsNameTheTensor) {
  MemoryWeights weights;
  add_f32(weights, "e0", {1, 2}, {1, 2});
  add_bf16(weights, "up", {1, 2}, {0x3f80, 0x4000});
  auto mixed = upload_experts(weights, *backend, {{"e0"}, false, 1, "up", 1}, {1, 2}, 0, WeightUse::matmul);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("'up' has another dtype"), std::string::npos) << mixed.error().message;
  auto missing = upload_experts(weights, *backend, {{"e0"}, false, 1, "gone", 1}, {1, 2}, 0, WeightUse::matmul);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("'gone'"), std::string::npos) << missing.error().message;
}

// FP8 experts (one scale a tensor) load as one quantized stack: the routed experts' rows, then the
// shared expert's cut into pieces as for plain weights (rows for up projections; for down
// projections columns, its blocks of 128 taken as two of the experts' 64), holding exactly the
// values the f32 path gives.
TEST_P(WeightUpload, QuantizedExpertsStayQuantizedAndHoldTheSameValues) {
  auto add_fp8 = [](MemoryWeights& weights, const std::string& name, Shape shape, float scale, int seed) {
    std::vector<uint8_t> codes(size_t(shape.numel()));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t((i * 37 + size_t(seed)) % 126);  // no NaN
    weights.add(name + ".weight", DType::f8_e4m3, shape, std::move(codes));
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &scale, 4);
    weights.add(name + ".weight_scale", DType::f32, {1}, std::move(bytes));
  };
  for (int cut : {0, 1}) {
    SCOPED_TRACE("cut " + std::to_string(cut));
    const Shape shape = {2, 64};
    const Shape shared_shape = cut == 0 ? Shape{3, 64} : Shape{2, 128};
    MemoryWeights quantized;
    add_fp8(quantized, "e0", shape, 0.5f, 1);
    add_fp8(quantized, "e1", shape, 0.25f, 2);
    add_fp8(quantized, "s", shared_shape, 0.125f, 3);
    const ExpertNames names{{"e0.weight", "e1.weight"}, false, 2, "s.weight", shared_shape[cut]};
    auto stack = upload_experts(quantized, *backend, names, shape, cut, WeightUse::matmul);
    ASSERT_TRUE(stack.ok()) << stack.error().message;
    const Tensor& q = stack->view();
    ASSERT_EQ(q.dtype, DType::quant);
    // The f32 path over the same values.
    MemoryWeights plain;
    for (const std::string name : {"e0.weight", "e1.weight", "s.weight"}) {
      const Shape& s = name[0] == 's' ? shared_shape : shape;
      auto stored = quantized.quantized(name, s);
      ASSERT_TRUE(stored.ok() && *stored);
      const std::vector<float> values = dequantized_values(**stored);
      std::vector<uint8_t> bytes(values.size() * 4);
      std::memcpy(bytes.data(), values.data(), bytes.size());
      plain.add(name, DType::f32, s, std::move(bytes));
    }
    auto f32 = upload_experts(plain, *backend, names, shape, cut, WeightUse::matmul);
    ASSERT_TRUE(f32.ok()) << f32.error().message;
    ASSERT_EQ(f32->view().dtype, DType::f32);
    std::vector<float> want(size_t(f32->view().numel()));
    backend->download(want.data(), f32->view());
    std::vector<std::byte> rows(q.bytes());
    backend->download(rows.data(), q);
    const int64_t k = shape[1];
    const size_t row_bytes = quant_row_total(q.quant, k);
    std::vector<float> got(want.size());
    for (size_t r = 0; r < got.size() / size_t(k); ++r)
      dequantize_stored_row(q.quant, rows.data() + r * row_bytes, k, got.data() + r * size_t(k));
    EXPECT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, WeightUpload, ::testing::ValuesIn(test_backend_names()), backend_param_name);

}  // namespace
}  // namespace lockstep
