// llama.cpp's tensor names and shapes in a GGUF file, and the Hugging Face ones lockstep's model
// families ask for: "blk.3.ssm_in.weight" is "backbone.layers.3.mixer.in_proj.weight" in a
// Nemotron-H file and "blk.3.attn_q.weight" "model.layers.3.self_attn.q_proj.weight" in a Llama.
#pragma once

#include <string>

#include "io/gguf_file.h"
#include "tensor/tensor.h"

namespace lockstep {

// The GGUF architectures lockstep reads: llama, qwen3, nemotron_h and nemotron_h_moe.
bool gguf_architecture_known(const std::string& architecture);
bool gguf_is_nemotron(const std::string& architecture);

// The Hugging Face name of GGUF tensor `gguf` in a file of `architecture`; empty for one no
// model of that family reads.
std::string gguf_hf_name(const std::string& architecture, const std::string& gguf);

// The shape a model asks for under the Hugging Face name `hf` (same bytes, same order): ggml's
// dims reversed, and for Nemotron-H the shapes llama.cpp's converter changed put back (A and D
// [heads, 1] -> [heads], the conv [channels, kernel] -> [channels, 1, kernel], the gated norm
// [groups, width] -> [groups * width]).
Shape gguf_hf_shape(const std::string& hf, const GgufTensor& tensor);

// The layer of a Hugging Face tensor name ("model.layers.3.x" or "backbone.layers.3.x"), or -1.
int64_t hf_layer_of(const std::string& hf);

}  // namespace lockstep
