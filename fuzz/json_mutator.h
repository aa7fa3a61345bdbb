// A libFuzzer mutator for JSON inputs. Byte-level mutations seldom leave JSON valid, so on
// their own they rarely give a deep field the wrong type; this one also changes the parsed
// value: a node becomes a value of another type or a boundary number, a key or element goes,
// an element repeats, a subtree is copied over another. Targets whose inputs are JSON define
// LLVMFuzzerCustomMutator to call mutate_json (libFuzzer then uses it instead of its own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>

namespace lockstep::fuzz {

// One structural change to `value`, chosen by `rng`.
void mutate_json_value(nlohmann::json& value, std::minstd_rand& rng);

// Half the time libFuzzer's own byte mutation (LLVMFuzzerMutate, which knows the -dict
// tokens); otherwise, when data[0, size) parses as JSON, one structural change, written back.
// Returns the new size, at most max_size, as LLVMFuzzerCustomMutator must.
size_t mutate_json(uint8_t* data, size_t size, size_t max_size, unsigned seed);

}  // namespace lockstep::fuzz
