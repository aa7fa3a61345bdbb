// GGUF files, which users download from anywhere: the input is opened as a model file
// (GgufModel::open). A file that opens must hand out only tensors that lie inside it, a
// config or a clear error, every weight a model could ask for (plain, or quantized rows that
// dequantize), and its tokenizer and chat template or a clear error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_support.h"
#include "io/gguf_model.h"
#include "io/quantized_weights.h"
#include "text/model_text.h"

namespace lockstep::fuzz {
namespace {

void check(const GgufModel& model, const std::string& path, const uint8_t* data, size_t size) {
  auto file = GgufFile::open(path);
  if (!file.ok()) fail("a model opened whose file does not: " + file.error().message);
  const std::byte* mapped = (*file)->mapped().data();
  if ((*file)->mapped().size() != size) fail("the file mapped is not the input's size");
  for (const GgufTensor& tensor : (*file)->tensors()) {
    if (tensor.bytes == 0) continue;
    if (tensor.data < mapped || tensor.data + tensor.bytes > mapped + size)
      fail("tensor '" + tensor.name + "' lies outside the file");
    if (std::memcmp(tensor.data, data + (tensor.data - mapped), tensor.bytes) != 0)
      fail("tensor '" + tensor.name + "' does not point at its bytes");
  }
  (void)model.config();
  for (const std::string& name : model.names()) {
    const Shape shape = *model.shape(name);
    auto stored = model.quantized(name, shape);
    if (stored.ok() && *stored) {
      // A quantized matrix: rows of its layout's size, which dequantize.
      // (A matrix [rows, k] or a stack of them [experts, rows, k].)
      const int64_t k = shape[shape.rank - 1];
      if ((*stored)->rows.size() != size_t(shape.numel() / k) * quant_row_total((*stored)->layout, k))
        fail("quantized '" + name + "' has rows of another size");
      (void)dequantized_values(**stored);
      continue;
    }
    auto info = model.find(name);
    if (info.ok() && info->bytes != size_t(info->shape.numel()) * dtype_size(info->dtype))
      fail("tensor '" + name + "' has the bytes of another shape");
  }
  (void)ModelText::load(path);
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  if (size > fuzz::kMaxInputBytes) return 0;
  const std::string path = fuzz::write_scratch("model.gguf", fuzz::as_text(data, size));
  auto model = GgufModel::open(path);
  if (!model.ok()) return 0;
  fuzz::check(**model, path, data, size);
  return 0;
}
