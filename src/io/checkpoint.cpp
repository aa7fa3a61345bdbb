#include "io/checkpoint.h"

#include <cassert>
#include <filesystem>
#include <system_error>

#include "io/json_file.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// A shard name from the index must be a relative path that stays inside the folder.
bool is_inside_folder(const std::string& shard) {
  fs::path path(shard);
  if (shard.empty() || path.is_absolute()) return false;
  for (const fs::path& part : path)
    if (part == "..") return false;
  return true;
}

Expected<TensorInfo> checked(Expected<TensorInfo> found, const Shape& expected) {
  if (!found.ok()) return found;
  const TensorInfo& info = *found;
  if (info.dtype != DType::f32 && info.dtype != DType::bf16 && info.dtype != DType::f16)
    return Error{info.file + ": tensor '" + info.name + "' has dtype " +
                 std::string(dtype_name(info.dtype)) + ", expected f32, bf16 or f16"};
  if (!(info.shape == expected))
    return Error{info.file + ": tensor '" + info.name + "' has shape " + info.shape.to_string() +
                 ", expected " + expected.to_string()};
  return found;
}

}  // namespace

Expected<TensorInfo> WeightSource::get(const std::string& name, const Shape& expected) const {
  return checked(find(name), expected);
}

Expected<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error{"checkpoint folder " + dir + " does not exist or is not a folder"};
  std::string single = (fs::path(dir) / kSingleFile).string();
  std::string index = (fs::path(dir) / kIndexFile).string();

  if (is_file(single)) {
    Expected<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::open(single);
    if (!file.ok()) return file.error();
    std::unique_ptr<Checkpoint> checkpoint(new Checkpoint(dir, single));
    checkpoint->tensors_ = (*file)->tensors();
    checkpoint->files_.push_back(std::move(file).value());
    return checkpoint;
  }
  if (is_file(index)) {
    std::unique_ptr<Checkpoint> checkpoint(new Checkpoint(dir, index));
    LOCKSTEP_TRY(checkpoint->open_sharded());
    return checkpoint;
  }
  return Error{"checkpoint folder " + dir + " has neither " + kSingleFile + " nor " + kIndexFile};
}

Status Checkpoint::open_sharded() {
  Expected<nlohmann::json> index = read_json_file(source_);
  if (!index.ok()) return index.error();
  auto map_it = index->is_object() ? index->find("weight_map") : index->end();
  if (map_it == index->end() || !map_it->is_object())
    return Error{source_ + ": no \"weight_map\" object"};
  if (map_it->empty()) return Error{source_ + ": \"weight_map\" is empty"};

  std::map<std::string, const SafetensorsFile*> shards;  // by name in the index
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    const std::string& name = it.key();
    if (!it->is_string())
      return Error{source_ + ": weight_map entry for tensor '" + name + "' is not a file name"};
    std::string shard = it->get<std::string>();
    if (!is_inside_folder(shard))
      return Error{source_ + ": tensor '" + name + "' names shard '" + shard +
                   "', which is not a file inside the folder"};

    auto shard_it = shards.find(shard);
    if (shard_it == shards.end()) {
      Expected<std::unique_ptr<SafetensorsFile>> file =
          SafetensorsFile::open((fs::path(dir_) / shard).string());
      if (!file.ok()) return Error{file.error().message + " (a shard named in " + source_ + ")"};
      files_.push_back(std::move(file).value());
      shard_it = shards.emplace(shard, files_.back().get()).first;
    }
    const SafetensorsFile& file = *shard_it->second;
    auto tensor_it = file.tensors().find(name);
    if (tensor_it == file.tensors().end())
      return Error{source_ + ": maps tensor '" + name + "' to " + file.path() +
                   ", which does not contain it"};
    tensors_.emplace(name, tensor_it->second);
  }
  return Status::success();
}

bool Checkpoint::has(const std::string& name) const { return tensors_.count(name) > 0; }

Expected<TensorInfo> Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Error{"missing tensor '" + name + "' in " + source_};
  return it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

void MemoryWeights::add(std::string name, DType dtype, Shape shape, std::vector<uint8_t> bytes) {
  assert(bytes.size() == size_t(shape.numel()) * dtype_size(dtype));
  Entry& entry = entries_[name];
  entry.bytes = std::move(bytes);
  entry.info = TensorInfo{name, dtype, shape, entry.bytes.data(), entry.bytes.size(), label_};
}

bool MemoryWeights::has(const std::string& name) const { return entries_.count(name) > 0; }

Expected<TensorInfo> MemoryWeights::find(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return Error{"missing tensor '" + name + "' in " + label_};
  return it->second.info;
}

std::vector<std::string> MemoryWeights::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

}  // namespace lockstep
