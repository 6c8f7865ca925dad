// The tokenizer a GGUF file carries (tokenizer.ggml.*).
#pragma once

#include "io/gguf.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

// Reads tokenizer.ggml.model (must be "gpt2": byte-level BPE), .pre (must be "qwen2"),
// .tokens, .token_type, .merges and the optional .eos_token_id / .padding_token_id, and builds
// the tokenizer through Tokenizer::from_vocab. Throws Error naming the file and the key.
Tokenizer tokenizer_from_gguf(const GgufLayout& layout);

}  // namespace nanoinfer
