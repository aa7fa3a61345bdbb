#include "chat_template/jinja_list_filters.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "chat_template/jinja_case.h"
#include "chat_template/jinja_operators.h"
#include "chat_template/jinja_strings.h"

namespace lockstep::jinja {
namespace {

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Expected<Value> attribute_path(const Value& item, const Value& path) {
  if (path.is_int()) return get_item(item, path);
  if (!path.is_string()) return Error{"attribute must be a string or an integer"};
  Value current = item;
  for (const std::string& part : python_split(path.as_string(), std::string("."), -1)) {
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                [](char c) { return c >= '0' && c <= '9'; });
    LOCKSTEP_JINJA_ASSIGN(
        current, get_item(current, numeric ? Value(std::atoll(part.c_str())) : Value(part)));
  }
  return current;
}

// The sort key of jinja2's sort/unique/min/max: the attribute, lowercased unless case-sensitive.
Expected<Value> sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = item;
  if (!attribute.is_none()) {
    LOCKSTEP_JINJA_ASSIGN(key, attribute_path(item, attribute));
  }
  if (!case_sensitive && key.is_string()) return Value(python_lower(key.as_string()));
  return key;
}

// Sorts items by their keys (stable, as Python's sorted); fails on keys that do not compare.
Status sort_by_keys(std::vector<Value>& items, std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::optional<Error> failure;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto c = reverse ? compare(keys[b], keys[a]) : compare(keys[a], keys[b]);
    if (!c.ok()) failure = c.error();
    return c.ok() && *c < 0;
  });
  if (failure) return *failure;
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
  return Status();
}

template <bool Max>
Expected<Value> filter_extreme(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"case_sensitive", Value(false)}, {"attribute", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args(Max ? "max" : "min", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  if (items.empty()) return Value(Undefined{"No aggregated item, sequence was empty."});
  Value best = items[0];
  LOCKSTEP_JINJA_ASSIGN(Value best_key, sort_key(best, bound[1], truthy(bound[0])));
  for (size_t i = 1; i < items.size(); ++i) {
    LOCKSTEP_JINJA_ASSIGN(Value key, sort_key(items[i], bound[1], truthy(bound[0])));
    LOCKSTEP_JINJA_ASSIGN(int order, compare(key, best_key));
    if (Max ? order > 0 : order < 0) best = items[i], best_key = key;
  }
  return best;
}

// select / reject (by_attribute false) and selectattr / rejectattr.
Expected<Value> select_items(const Value& value, const CallArgs& args, bool keep_when,
                             bool by_attribute, TestLookup find_test) {
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) return Error{"selectattr/rejectattr need an attribute"};
    attribute = args.positional[next++];
  }
  TestFunction test = nullptr;
  if (next < args.positional.size()) {
    const Value& name = args.positional[next++];
    if (!name.is_string() || !(test = find_test(name.as_string())))
      return Error{"no test named " + repr(name)};
  }
  CallArgs rest{{args.positional.begin() + static_cast<long>(next), args.positional.end()},
                args.keywords};
  std::vector<Value> kept;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      LOCKSTEP_JINJA_ASSIGN(subject, attribute_path(item, attribute));
    }
    bool passed = truthy(subject);
    if (test) {
      LOCKSTEP_JINJA_ASSIGN(passed, test(subject, rest));
    }
    if (passed == keep_when) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

template <bool First>
Expected<Value> filter_end_item(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  if (items.empty())
    return Value(Undefined{First ? "No first item, sequence was empty."
                                 : "No last item, sequence was empty."});
  return First ? items.front() : items.back();
}

}  // namespace

Expected<Value> filter_sort(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {
      {"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("sort", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  std::vector<Value> keys;
  for (const Value& item : items) {
    LOCKSTEP_JINJA_ASSIGN(Value key, sort_key(item, bound[2], truthy(bound[1])));
    keys.push_back(std::move(key));
  }
  LOCKSTEP_TRY(sort_by_keys(items, keys, truthy(bound[0])));
  return Value::list(std::move(items));
}

Expected<Value> filter_dictsort(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {
      {"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("dictsort", args, kParams));
  if (!value.is_dict()) return Error{"dictsort needs a dict"};
  bool by_value = bound[1].is_string() && bound[1].as_string() == "value";
  std::vector<Value> items, keys;
  for (const auto& [key, item] : value.as_dict().entries) {
    items.push_back(Value::tuple({Value(key), item}));
    LOCKSTEP_JINJA_ASSIGN(Value sort_by,
                          sort_key(by_value ? item : Value(key), Value(None{}), truthy(bound[0])));
    keys.push_back(std::move(sort_by));
  }
  LOCKSTEP_TRY(sort_by_keys(items, keys, truthy(bound[2])));
  return Value::list(std::move(items));
}

Expected<Value> filter_unique(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"case_sensitive", Value(false)}, {"attribute", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("unique", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  std::vector<Value> kept, seen;
  for (const Value& item : items) {
    LOCKSTEP_JINJA_ASSIGN(Value key, sort_key(item, bound[1], truthy(bound[0])));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); }))
      continue;
    seen.push_back(key);
    kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

Expected<Value> filter_sum(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"attribute", Value(None{})}, {"start", Value(0)}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("sum", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  Value total = bound[1];
  for (const Value& item : items) {
    Value term = item;
    if (!bound[0].is_none()) {
      LOCKSTEP_JINJA_ASSIGN(term, attribute_path(item, bound[0]));
    }
    LOCKSTEP_JINJA_ASSIGN(total, binary_op(BinaryOp::kAdd, total, term));
  }
  return total;
}

Expected<Value> filter_join(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"d", Value("")}, {"attribute", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("join", args, kParams));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (!bound[1].is_none()) {
      LOCKSTEP_JINJA_ASSIGN(item, attribute_path(item, bound[1]));
    }
    if (i) out += to_str(bound[0]);
    std::string text = to_str(item);
    limit_text(out.size() + text.size());
    out += text;
  }
  return Value(std::move(out));
}

// map(attribute=...) or map('filter', args...).
Expected<Value> filter_map(const Value& value, const CallArgs& args, FilterLookup find_filter) {
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  std::vector<Value> mapped;
  if (args.positional.empty()) {
    Value attribute, fallback{None{}};
    for (const auto& [name, argument] : args.keywords) {
      if (name == "attribute")
        attribute = argument;
      else if (name == "default")
        fallback = argument;
      else
        return Error{"map() got an unexpected keyword argument '" + name + "'"};
    }
    if (attribute.is_undefined()) return Error{"map() needs a filter name or attribute="};
    for (const Value& item : items) {
      LOCKSTEP_JINJA_ASSIGN(Value got, attribute_path(item, attribute));
      mapped.push_back(got.is_undefined() && !fallback.is_none() ? fallback : got);
    }
    return Value::list(std::move(mapped));
  }
  if (!args.positional[0].is_string()) return Error{"map() filter name must be a string"};
  FilterFunction filter = find_filter(args.positional[0].as_string());
  if (!filter) return Error{"no filter named '" + args.positional[0].as_string() + "'"};
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keywords};
  for (const Value& item : items) {
    LOCKSTEP_JINJA_ASSIGN(Value got, filter(item, rest));
    mapped.push_back(std::move(got));
  }
  return Value::list(std::move(mapped));
}

Expected<Value> filter_length(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  LOCKSTEP_JINJA_ASSIGN(int64_t n, length(value));
  return Value(n);
}

Expected<Value> filter_list(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  return Value::list(std::move(items));
}

Expected<Value> filter_reverse(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  std::reverse(items.begin(), items.end());
  if (!value.is_string()) return Value::list(std::move(items));
  std::string out;
  for (const Value& item : items) out += item.as_string();
  return Value(std::move(out));
}

Expected<Value> filter_items(const Value& value, const CallArgs& args) {
  LOCKSTEP_TRY(expect_no_args("filter", args));
  if (value.is_undefined()) return Value::list({});
  if (!value.is_dict()) return Error{"Can only get item pairs from a mapping."};
  std::vector<Value> pairs;
  for (const auto& [key, item] : value.as_dict().entries)
    pairs.push_back(Value::tuple({key, item}));
  return Value::list(std::move(pairs));
}

Expected<Value> filter_max(const Value& value, const CallArgs& args) {
  return filter_extreme<true>(value, args);
}
Expected<Value> filter_min(const Value& value, const CallArgs& args) {
  return filter_extreme<false>(value, args);
}
Expected<Value> filter_select(const Value& value, const CallArgs& args, TestLookup find_test) {
  return select_items(value, args, true, false, find_test);
}
Expected<Value> filter_reject(const Value& value, const CallArgs& args, TestLookup find_test) {
  return select_items(value, args, false, false, find_test);
}
Expected<Value> filter_selectattr(const Value& value, const CallArgs& args, TestLookup find_test) {
  return select_items(value, args, true, true, find_test);
}
Expected<Value> filter_rejectattr(const Value& value, const CallArgs& args, TestLookup find_test) {
  return select_items(value, args, false, true, find_test);
}
Expected<Value> filter_first(const Value& value, const CallArgs& args) {
  return filter_end_item<true>(value, args);
}
Expected<Value> filter_last(const Value& value, const CallArgs& args) {
  return filter_end_item<false>(value, args);
}

Expected<Value> filter_batch(const Value& value, const CallArgs& args) {
  static const Param kParams[] = {{"linecount", std::nullopt}, {"fill_with", Value(None{})}};
  LOCKSTEP_JINJA_ASSIGN(auto bound, bind_args("batch", args, kParams));
  if (!bound[0].is_int() || bound[0].as_int() <= 0)
    return Error{"batch size must be a positive integer"};
  size_t size = static_cast<size_t>(bound[0].as_int());
  LOCKSTEP_JINJA_ASSIGN(auto items, iterate(value));
  std::vector<Value> batches;
  for (size_t start = 0; start < items.size(); start += size) {
    std::vector<Value> batch(
        items.begin() + static_cast<long>(start),
        items.begin() + static_cast<long>(std::min(items.size(), start + size)));
    if (!bound[1].is_none())
      while (batch.size() < size) batch.push_back(bound[1]);
    batches.push_back(Value::list(std::move(batch)));
  }
  return Value::list(std::move(batches));
}

}  // namespace lockstep::jinja
