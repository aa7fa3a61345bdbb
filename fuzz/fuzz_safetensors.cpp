// Checkpoint files from a model folder, which may come from anywhere: the input is opened as a
// model.safetensors (SafetensorsFile::open), and as the model.safetensors.index.json of a
// sharded folder (Checkpoint::open) whose two shards are written at start-up. A file that opens
// must hand out only tensors that lie inside it, with the bytes its header places there. The
// mutator changes a safetensors header as JSON and rewrites its length to match.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "json_mutator.h"

namespace lockstep::fuzz {
namespace {

using nlohmann::json;

// The little-endian length that starts a safetensors file (size >= 8).
uint64_t header_length(const uint8_t* data) {
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(data[i]) << (8 * i);
  return length;
}

// The tensors an opened file hands out against the header, read here independently.
void check_file(const SafetensorsFile& file, const uint8_t* data, size_t size) {
  const uint64_t header_bytes = header_length(data);
  const uint8_t* section = data + 8 + header_bytes;
  const size_t section_bytes = size - 8 - size_t(header_bytes);
  json header = json::parse(data + 8, section, nullptr, false);
  if (header.is_discarded() || !header.is_object()) fail("a file opened whose header is no JSON object");
  if (file.tensors().size() != header.size() - header.count("__metadata__"))
    fail("the file lists " + std::to_string(file.tensors().size()) + " tensors, its header " +
         std::to_string(header.size()));
  for (const auto& [name, info] : file.tensors()) {
    if (info.name != name || !header.contains(name)) fail("tensor '" + name + "' is not in the header");
    const json& entry = header[name];
    const uint64_t begin = entry["data_offsets"][0].get<uint64_t>();
    const uint64_t end = entry["data_offsets"][1].get<uint64_t>();
    if (begin > end || end > section_bytes || info.bytes != end - begin)
      fail("tensor '" + name + "' runs outside the data section");
    if (info.bytes != size_t(info.shape.numel()) * dtype_size(info.dtype))
      fail("tensor '" + name + "' has bytes for another shape");
    if (info.bytes > 0 && std::memcmp(info.data, section + begin, info.bytes) != 0)
      fail("tensor '" + name + "' does not point at its bytes");
  }
}

// A sharded folder's two shards, for the index to name (or misname).
void write_shards() {
  const float a[2] = {1.0f, -2.0f};
  const uint16_t b[3] = {0x3f80, 0x4000, 0x4040};
  const int32_t c[1] = {7};
  std::vector<TensorToWrite> first = {{"a", DType::f32, Shape{2}, a}, {"b", DType::bf16, Shape{3, 1}, b}};
  std::vector<TensorToWrite> second = {{"c", DType::i32, Shape{}, c}, {"empty", DType::f32, Shape{0}, nullptr}};
  const std::string dir = scratch_dir() + "/sharded/";
  std::filesystem::create_directories(dir);
  Status written = write_safetensors(dir + "model-00001-of-00002.safetensors", first, {{"format", "pt"}});
  if (written.ok()) written = write_safetensors(dir + "model-00002-of-00002.safetensors", second);
  if (!written.ok()) fail("cannot write the shards: " + written.message());
}

void check_checkpoint(const Checkpoint& checkpoint) {
  std::vector<std::string> names = checkpoint.names();
  for (const std::string& name : names) {
    Expected<TensorInfo> found = checkpoint.find(name);
    if (!checkpoint.has(name) || !found.ok() || found->name != name) fail("listed tensor '" + name + "' is not found");
    if (found->file.rfind(checkpoint.dir(), 0) != 0) fail("tensor '" + name + "' is read from " + found->file);
  }
}

// One structural change to the header of a safetensors input, or false when it has none.
bool mutate_header(uint8_t* data, size_t size, size_t max_size, std::minstd_rand& rng, size_t& new_size) {
  if (size < 8 || header_length(data) > size - 8) return false;
  const size_t header_bytes = size_t(header_length(data));
  json header = json::parse(data + 8, data + 8 + header_bytes, nullptr, false);
  if (header.is_discarded()) return false;
  mutate_json_value(header, rng);
  const std::string text = header.dump();
  const std::string tensor_bytes(data + 8 + header_bytes, data + size);
  new_size = 8 + text.size() + tensor_bytes.size();
  if (new_size > max_size) return false;
  for (int i = 0; i < 8; ++i) data[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  std::memcpy(data + 8, text.data(), text.size());
  std::memcpy(data + 8 + text.size(), tensor_bytes.data(), tensor_bytes.size());
  return true;
}

}  // namespace
}  // namespace lockstep::fuzz

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  std::minstd_rand rng(seed);
  size_t new_size = 0;
  if (rng() % 2 == 0 && lockstep::fuzz::mutate_header(data, size, max_size, rng, new_size)) return new_size;
  return lockstep::fuzz::mutate_json(data, size, max_size, unsigned(rng()));  // an index, or bytes
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lockstep::fuzz::write_shards();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep;
  using namespace lockstep::fuzz;
  if (size > kMaxInputBytes) return 0;
  const std::string_view bytes = as_text(data, size);

  std::string path = write_scratch("single/model.safetensors", bytes);
  if (auto file = SafetensorsFile::open(path); file.ok()) check_file(**file, data, size);

  write_scratch("sharded/model.safetensors.index.json", bytes);
  if (auto checkpoint = Checkpoint::open(scratch_dir() + "/sharded"); checkpoint.ok()) check_checkpoint(**checkpoint);
  return 0;
}
