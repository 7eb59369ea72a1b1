#pragma once
// Byte-level BPE learner: a GPT-2-style vocabulary learned from a training text, in the form the
// engine's BPE tokenizer (tokenizer.ggml.model "gpt2", pre-tokenizer "gpt-2") and llama.cpp read.
//   1. split the text with the "gpt-2" pre-tokenizer regex and count the distinct pieces;
//   2. start from the 256 byte tokens (GPT-2 byte->char alphabet, in byte order);
//   3. repeatedly merge the most frequent adjacent pair (ties: lower left id, then lower right id),
//      all occurrences left to right, until vocab_size - 1 tokens exist;
//   4. append "<|endoftext|>" (control; EOS/BOS id, never added by encode).
// A merge whose result text already exists (reached by another path) reuses that token.
// Counting is a full recount per merge: O(merges * distinct-piece-symbols), a few seconds for
// Tiny Shakespeare and vocab 1024 (no library on Debian learns BPE in C++).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace moe::train {

struct BpeLearned {
    std::vector<std::string> tokens;      // token texts (byte-mapped)
    std::vector<std::pair<std::string, std::string>> merges;  // rank order
    int32_t eos = -1;                     // "<|endoftext|>"
    // Every distinct piece of the text and its final segmentation (token ids), for tests.
    std::vector<std::pair<std::string, std::vector<int32_t>>> pieces;
};

inline constexpr const char* kBpePre = "gpt-2";

// vocab_size >= 257. Throws moe::Error("[train] ...") for a bad size or an empty text.
BpeLearned learn_bpe(std::string_view text, int64_t vocab_size);

// The learned vocabulary as the engine's Vocab (finalized, ready for tokenizer::Tokenizer).
tokenizer::Vocab to_vocab(const BpeLearned& b);

}  // namespace moe::train
