// Byte-level BPE learner (see bpe_learn.h).
#include "train/bpe_learn.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"

namespace moe::train {

BpeLearned learn_bpe(std::string_view text, int64_t vocab_size) {
    if (vocab_size < 257 || vocab_size > 1000000)
        throw_error("train", "--vocab-size ", vocab_size, " must be in [257, 1000000] (256 byte tokens + <|endoftext|>)");
    if (text.empty()) throw_error("train", "the training text is empty");
    BpeLearned out;
    const auto& b2c = tokenizer::BpeModel::byte_to_char();
    for (int b = 0; b < 256; ++b) out.tokens.push_back(b2c[static_cast<size_t>(b)]);
    std::unordered_map<std::string, int32_t> index;
    for (int b = 0; b < 256; ++b) index[out.tokens[static_cast<size_t>(b)]] = b;

    // Distinct pieces in first-seen order (deterministic), with counts.
    const tokenizer::PreTokenizer pre(kBpePre);
    std::unordered_map<std::string_view, size_t> where;
    std::vector<std::string_view> words;
    std::vector<int64_t> count;
    for (std::string_view p : pre.split(text)) {
        auto [it, fresh] = where.emplace(p, words.size());
        if (fresh) {
            words.push_back(p);
            count.push_back(0);
        }
        ++count[it->second];
    }
    std::vector<std::vector<int32_t>> sym(words.size());
    for (size_t w = 0; w < words.size(); ++w)
        for (unsigned char ch : words[w]) sym[w].push_back(ch);

    const int64_t target = vocab_size - 1;  // room for <|endoftext|>
    std::unordered_map<uint64_t, int64_t> pairs;
    while (static_cast<int64_t>(out.tokens.size()) < target) {
        pairs.clear();
        for (size_t w = 0; w < words.size(); ++w)
            for (size_t i = 0; i + 1 < sym[w].size(); ++i)
                pairs[(static_cast<uint64_t>(sym[w][i]) << 32) | static_cast<uint32_t>(sym[w][i + 1])] += count[w];
        uint64_t best = 0;
        int64_t best_n = 0;
        for (const auto& [key, n] : pairs)
            if (n > best_n || (n == best_n && key < best)) {
                best = key;
                best_n = n;
            }
        if (best_n < 2) break;  // nothing left worth merging
        const int32_t a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffffu);
        const std::string merged = out.tokens[static_cast<size_t>(a)] + out.tokens[static_cast<size_t>(b)];
        out.merges.emplace_back(out.tokens[static_cast<size_t>(a)], out.tokens[static_cast<size_t>(b)]);
        int32_t id;
        if (auto it = index.find(merged); it != index.end()) {
            id = it->second;
        } else {
            id = static_cast<int32_t>(out.tokens.size());
            out.tokens.push_back(merged);
            index.emplace(merged, id);
        }
        for (auto& s : sym) {
            size_t o = 0;
            for (size_t i = 0; i < s.size(); ++i) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    s[o++] = id;
                    ++i;
                } else {
                    s[o++] = s[i];
                }
            }
            s.resize(o);
        }
    }
    out.eos = static_cast<int32_t>(out.tokens.size());
    out.tokens.push_back("<|endoftext|>");
    for (size_t w = 0; w < words.size(); ++w) out.pieces.emplace_back(std::string(words[w]), sym[w]);
    return out;
}

tokenizer::Vocab to_vocab(const BpeLearned& b) {
    tokenizer::Vocab v;
    v.source = "<learned BPE>";
    v.model = "gpt2";
    v.pre = kBpePre;
    v.type = tokenizer::ModelType::Bpe;
    v.tokens = b.tokens;
    v.types.assign(b.tokens.size(), tokenizer::TokenType::Normal);
    v.types[static_cast<size_t>(b.eos)] = tokenizer::TokenType::Control;
    v.merges = b.merges;
    v.bos_id = v.eos_id = b.eos;
    v.add_bos = v.add_eos = false;
    v.finalize();
    return v;
}

}  // namespace moe::train
