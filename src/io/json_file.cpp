#include "io/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
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

namespace {

// nlohmann's SAX interface: counts depth, keeps each open object's keys, stops at the first
// problem.
class TextChecker {
 public:
  using json = nlohmann::json;
  JsonTextCheck result;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(size_t) { return open(); }
  bool start_array(size_t) { return open(); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    std::set<std::string>& keys = keys_[depth_ - 1];
    if (keys.insert(name).second) return true;
    result.has_duplicate = true;
    result.duplicate = name;
    return false;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  bool open() {
    if (int64_t(depth_) >= kMaxJsonDepth) {
      result.too_deep = true;
      return false;
    }
    ++depth_;
    if (keys_.size() < depth_) keys_.resize(depth_);
    keys_[depth_ - 1].clear();  // an array's stays empty
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  size_t depth_ = 0;                         // the arrays and objects open
  std::vector<std::set<std::string>> keys_;  // the keys of the object open at each depth
};

}  // namespace

JsonTextCheck check_json_text(const std::string& text) {
  TextChecker checker;
  const bool whole = nlohmann::json::sax_parse(text, &checker, nlohmann::json::input_format_t::json, true, false);
  JsonTextCheck result = std::move(checker.result);
  result.valid = whole && !result.too_deep && !result.has_duplicate;
  return result;
}

}  // namespace lockstep
