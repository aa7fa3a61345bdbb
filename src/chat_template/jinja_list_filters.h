// Filters on sequences and mappings, from jinja2's filters.py (registered in jinja_filters.cpp).
// Each takes the filtered value and the call's other arguments; see jinja_filters.h. map and
// the select family call other filters or tests by name, through the lookup they are given.
#pragma once

#include "chat_template/jinja_function_types.h"

namespace lockstep::jinja {

// sort(reverse=False, case_sensitive=False, attribute=None): a stable sort.
[[nodiscard]] Expected<Value> filter_sort(const Value& value, const CallArgs& args);
// dictsort(case_sensitive=False, by='key', reverse=False): (key, value) pairs.
[[nodiscard]] Expected<Value> filter_dictsort(const Value& value, const CallArgs& args);
// unique(case_sensitive=False, attribute=None): first occurrences, in order.
[[nodiscard]] Expected<Value> filter_unique(const Value& value, const CallArgs& args);
// max / min(case_sensitive=False, attribute=None); undefined for an empty sequence.
[[nodiscard]] Expected<Value> filter_max(const Value& value, const CallArgs& args);
[[nodiscard]] Expected<Value> filter_min(const Value& value, const CallArgs& args);
// sum(attribute=None, start=0).
[[nodiscard]] Expected<Value> filter_sum(const Value& value, const CallArgs& args);
// join(d='', attribute=None): str() of each item.
[[nodiscard]] Expected<Value> filter_join(const Value& value, const CallArgs& args);
// map('filter', args...) or map(attribute='a.b', default=None).
[[nodiscard]] Expected<Value> filter_map(const Value& value, const CallArgs& args, FilterLookup find_filter);
// select / reject('test', args...) and selectattr / rejectattr('attribute', 'test', args...);
// without a test, the item's truth.
[[nodiscard]] Expected<Value> filter_select(const Value& value, const CallArgs& args, TestLookup find_test);
[[nodiscard]] Expected<Value> filter_reject(const Value& value, const CallArgs& args, TestLookup find_test);
[[nodiscard]] Expected<Value> filter_selectattr(const Value& value, const CallArgs& args, TestLookup find_test);
[[nodiscard]] Expected<Value> filter_rejectattr(const Value& value, const CallArgs& args, TestLookup find_test);
// first / last item (undefined when empty), length, list, reverse, items (pairs of a dict).
[[nodiscard]] Expected<Value> filter_first(const Value& value, const CallArgs& args);
[[nodiscard]] Expected<Value> filter_last(const Value& value, const CallArgs& args);
[[nodiscard]] Expected<Value> filter_length(const Value& value, const CallArgs& args);
[[nodiscard]] Expected<Value> filter_list(const Value& value, const CallArgs& args);
[[nodiscard]] Expected<Value> filter_reverse(const Value& value, const CallArgs& args);
[[nodiscard]] Expected<Value> filter_items(const Value& value, const CallArgs& args);
// batch(linecount, fill_with=None): lists of `linecount` items, the last one filled.
[[nodiscard]] Expected<Value> filter_batch(const Value& value, const CallArgs& args);

}  // namespace lockstep::jinja
