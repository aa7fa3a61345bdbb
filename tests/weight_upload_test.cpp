// upload_concatenated: tensors of different row counts become one tensor of their rows in
// order (Nemotron's q, k and v projections, read by one matmul), with clear errors.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "models/weight_upload.h"
#include "test_support.h"

namespace lockstep {
namespace {

// Weights held in memory, by name.
class MemoryWeights : public WeightSource {
 public:
  void add(const std::string& name, DType dtype, Shape shape, std::vector<uint16_t> words) {
    held_[name] = std::move(words);
    TensorInfo info;
    info.name = name;
    info.dtype = dtype;
    info.shape = shape;
    info.data = held_[name].data();
    info.bytes = held_[name].size() * 2;
    info.file = "memory";
    infos_[name] = info;
  }
  void add_f32(const std::string& name, Shape shape, const std::vector<float>& values) {
    std::vector<uint16_t> words(values.size() * 2);
    std::memcpy(words.data(), values.data(), values.size() * 4);
    add(name, DType::f32, shape, std::move(words));
  }
  bool has(const std::string& name) const override { return infos_.count(name) > 0; }
  Expected<TensorInfo> find(const std::string& name) const override {
    auto it = infos_.find(name);
    if (it == infos_.end()) return Error{"missing tensor '" + name + "' in memory"};
    return it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> all;
    for (const auto& [name, info] : infos_) all.push_back(name);
    return all;
  }

 private:
  std::map<std::string, std::vector<uint16_t>> held_;
  std::map<std::string, TensorInfo> infos_;
};

class WeightUpload : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { backend = make_test_backend(GetParam()); }
  std::unique_ptr<Backend> backend;
};

TEST_P(WeightUpload, ConcatenatedTensorHoldsEachTensorsRowsInOrder) {
  MemoryWeights weights;
  weights.add_f32("q", {2, 3}, {1, 2, 3, 4, 5, 6});
  weights.add_f32("k", {1, 3}, {7, 8, 9});
  weights.add_f32("v", {3, 3}, {10, 11, 12, 13, 14, 15, 16, 17, 18});
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

TEST_P(WeightUpload, ConcatenatedBf16StaysBf16) {
  MemoryWeights weights;
  weights.add("a", DType::bf16, {1, 2}, {0x3f80, 0x4000});  // 1, 2
  weights.add("b", DType::bf16, {1, 2}, {0x4040, 0x4080});  // 3, 4
  auto all = upload_concatenated(weights, *backend, {"a", "b"}, {{1, 2}, {1, 2}}, WeightUse::matrix);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->view().dtype, DType::bf16);
  std::vector<uint16_t> got(4);
  backend->download(got.data(), all->view());
  EXPECT_EQ(got, (std::vector<uint16_t>{0x3f80, 0x4000, 0x4040, 0x4080}));
}

TEST_P(WeightUpload, ConcatenatedErrorsNameTheTensor) {
  MemoryWeights weights;
  weights.add_f32("q", {1, 2}, {1, 2});
  weights.add("k", DType::bf16, {1, 2}, {0x3f80, 0x4000});
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

INSTANTIATE_TEST_SUITE_P(Backends, WeightUpload, ::testing::ValuesIn(test_backend_names()), backend_param_name);

}  // namespace
}  // namespace lockstep
