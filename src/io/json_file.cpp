#include "io/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>
#include <vector>

namespace lockstep {

Expected<nlohmann::json> read_json_file(const std::string& path) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (!in)
    return Error{"cannot open " + path + ": " +
                 std::error_code(errno, std::generic_category()).message()};
  std::string text;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, in)) > 0) text.append(buffer, got);
  bool failed = std::ferror(in) != 0;
  int saved_errno = errno;
  std::fclose(in);
  if (failed)  // a folder opens but does not read
    return Error{"cannot read " + path + ": " +
                 std::error_code(saved_errno, std::generic_category()).message()};

  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Error{path + ": invalid JSON: " + e.what()};
  }
}

namespace {

template <class Json>
int64_t depth_of(const Json& value) {
  int64_t deepest = 0;
  std::vector<std::pair<const Json*, int64_t>> pending = {{&value, 0}};
  while (!pending.empty()) {
    auto [at, depth] = pending.back();
    pending.pop_back();
    if (!at->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const auto& item : *at) pending.push_back({&item, depth + 1});
  }
  return deepest;
}

}  // namespace

int64_t json_depth(const nlohmann::json& value) { return depth_of(value); }
int64_t json_depth(const nlohmann::ordered_json& value) { return depth_of(value); }

}  // namespace lockstep
