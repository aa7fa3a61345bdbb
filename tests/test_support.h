// Helpers shared by the tests: the backends to run op tests on, the fixture folders.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "models/model_info.h"

namespace lockstep {

// "cpu" (the best kernels here, every core), "cpu-1thread", and a narrower kernel set per
// instruction set this CPU also runs ("cpu-avx2", "cpu-generic").
std::vector<std::string> test_backend_names();
std::unique_ptr<Backend> make_test_backend(const std::string& name);

// A string parameter as a gtest parameter name ("cpu-avx2" -> "cpu_avx2", "llama@cuda" ->
// "llama_cuda"), so that --gtest_filter='*cuda*' picks the GPU cases.
std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info);

// tests/data/<name>
std::string test_data(const std::string& name);

// A pass over one sequence (page table `table`, state slot `slot`): `tokens` at positions
// first, first + 1, ..., every row's logits wanted.
ForwardBatch one_sequence_batch(const std::vector<int32_t>& tokens, int32_t first, const PageTable& table,
                                int32_t slot);

class Model;

// Every position's logits of a prompt of `count` ids, id i being (i * step + offset) % 500,
// filled in chunks of `chunk` (SoloRun::prompt_logits); empty, with a test failure, if that fails.
std::vector<float> chunked_prompt_logits(Model& model, int count, int step, int offset, int64_t chunk = 16);

// Expects `got` and `want` of one size, not empty, and equal bit for bit.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want);

// A quantized model's logits `got` against `want`, the same prompt's through the model of its
// dequantized values: bit for bit where `exact` (the backend's quant_matmul_is_f32_matmul for
// every layout the model holds); else within 1e-3 of the largest logit, and then `rechunked`,
// the quantized model's logits with the prompt filled in other chunks, must equal `got` bit for
// bit (a row's sums do not depend on the rows beside it). Empty `rechunked`: no such check (a
// Mamba2 model's scan is cut where the chunks end, so other chunks give other bits).
// Whether the fixture family `family` has Mamba2 layers (the nemotron_h ones).
inline bool has_mamba(const std::string& family) { return family.rfind("nemotron_h", 0) == 0; }

void expect_logits_of_values(bool exact, const std::vector<float>& got, const std::vector<float>& want,
                             const std::vector<float>& rechunked);

// The lockstep binary the CLI tests run: LOCKSTEP_BINARY in the environment (a build carried to
// another machine), else the one this build made.
std::string lockstep_binary();

}  // namespace lockstep
