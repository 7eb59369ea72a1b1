// Table: tokenizer.ggml.pre name -> regex set and flags, for every pre-tokenizer that the MoE
// families llama.cpp supports use (plus their common aliases). The regex strings are facts: the
// pre-tokenizer regexes of each model's tokenizer.json, in the spelling llama.cpp runs them
// (case-insensitive contractions written out letter by letter; possessive quantifiers made greedy;
// upper/lower-case letter classes expressed through [^a-z] / [^A-Z] lookaheads). Our results are
// checked against llama.cpp's token ids (tests/data/tokenizer/), not against these texts.
#include "tokenizer/pretokenize.h"

namespace moe::tokenizer::detail {

namespace {

#define MOE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define MOE_GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

// GPT-2 (openai/gpt-2 encoder.py): lower-case contractions only.
const PreSet kGpt2{"gpt-2", {MOE_GPT2_RE}};
// Fallback chain for a BPE vocab without a named pre-tokenizer.
const PreSet kDefault{"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", MOE_GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}};
// Llama 3 (tiktoken cl100k): numbers in groups of up to three digits.
const PreSet kLlama3{"llama3", {MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
// Qwen2 (also Grok-2, Hunyuan, StableLM2): as Llama 3 but one digit per piece.
const PreSet kQwen2{"qwen2", {MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
// Qwen3.5: marks join letters.
const PreSet kQwen35{"qwen35", {MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
// DeepSeek LLM (v1/v2): newlines, Latin/Greek/Cyrillic/... words, ASCII and full-width
// punctuation, trailing spaces, CJK runs, numbers.
const PreSet kDeepseekLlm{"deepseek-llm", {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
}};
// DeepSeek Coder.
const PreSet kDeepseekCoder{"deepseek-coder", {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}",
}};
// DeepSeek V3 / R1 (also Hunyuan dense): numbers in threes, CJK/kana runs, then words.
const PreSet kDeepseek3{"deepseek-v3", {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
}};
// Falcon.
const PreSet kFalcon{"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", MOE_GPT2_RE, "[0-9][0-9][0-9]"}};
// StarCoder / Refact / Command-R / SmolLM: single digits, then GPT-2.
const PreSet kStarcoder{"starcoder", {"\\p{N}", MOE_GPT2_RE}};
// Tekken (Mistral NeMo and later): case-aware words, single digits.
const PreSet kTekken{"tekken", {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
// GPT-4o / o200k (gpt-oss, Llama 4, MiniMax-M2): case-aware words with contractions, digits in threes.
const PreSet kGpt4o{"gpt-4o", {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" MOE_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" MOE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
// Kimi K2 (tokenization_kimi.py): Han runs first; other letters (upper/lower not distinguished,
// marks not letters, as llama.cpp runs it) with an optional contraction; digits in threes.
// \p{Han} and \p{Lx} (letter but not Han) are classes of this engine, see pretokenize.cpp.
const PreSet kKimiK2{"kimi-k2", {
    "\\p{Han}+|[^\\r\\n\\p{L}\\p{N}]?\\p{Lx}+" MOE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    /*han=*/true};
// Ling / Ring (bailingmoe, bailingmoe2): one digit per piece, single newline pieces.
const PreSet kBailing{"bailingmoe", {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}};
// EXAONE MoE: letters with their marks, words may continue across single spaces.
const PreSet kExaoneMoe{"exaone-moe", {MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}};
// Seed-Coder.
const PreSet kSeedCoder{"seed-coder", {MOE_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};

constexpr PreInfo kPlain{false, false, true};    // clean_spaces on (llama.cpp's BPE default)
constexpr PreInfo kNoClean{false, false, false};
constexpr PreInfo kLlama3Info{true, true, true};  // ignore_merges + BOS
constexpr PreInfo kTekkenInfo{true, true, false};

}  // namespace

const std::vector<PreName>& pre_table() {
    static const std::vector<PreName> t = {
        {"default", &kDefault, kPlain},
        {"gpt-2", &kGpt2, kPlain},
        {"phi-2", &kGpt2, kPlain},
        {"olmo", &kGpt2, kPlain},
        {"mpt", &kGpt2, kPlain},
        {"llama3", &kLlama3, kLlama3Info},
        {"llama-bpe", &kLlama3, kLlama3Info},
        {"llama-v3", &kLlama3, kLlama3Info},
        {"falcon3", &kLlama3, kLlama3Info},
        {"pixtral", &kLlama3, kLlama3Info},
        {"dbrx", &kLlama3, kPlain},
        {"smaug-bpe", &kLlama3, kPlain},
        {"glm4", &kLlama3, kPlain},
        {"chatglm-bpe", &kLlama3, kPlain},
        {"qwen2", &kQwen2, kNoClean},
        {"deepseek-r1-qwen", &kQwen2, kNoClean},
        {"megrez", &kQwen2, kPlain},
        {"stablelm2", &kQwen2, kPlain},
        {"hunyuan", &kQwen2, kNoClean},
        {"grok-2", &kQwen2, kNoClean},
        {"solar-open", &kQwen2, kNoClean},
        {"qwen35", &kQwen35, kNoClean},
        {"deepseek-llm", &kDeepseekLlm, kNoClean},
        {"deepseek-coder", &kDeepseekCoder, kNoClean},
        {"deepseek-v3", &kDeepseek3, kNoClean},
        {"hunyuan-dense", &kDeepseek3, kNoClean},
        {"falcon", &kFalcon, kPlain},
        {"starcoder", &kStarcoder, kPlain},
        {"refact", &kStarcoder, kPlain},
        {"command-r", &kStarcoder, kNoClean},
        {"smollm", &kStarcoder, kNoClean},
        {"tekken", &kTekken, kTekkenInfo},
        {"gpt-4o", &kGpt4o, kNoClean},
        {"llama4", &kGpt4o, kNoClean},
        {"minimax-m2", &kGpt4o, kNoClean},
        {"kimi-k2", &kKimiK2, kNoClean},
        {"bailingmoe", &kBailing, kNoClean},
        {"bailingmoe2", &kBailing, kNoClean},
        {"llada-moe", &kBailing, kNoClean},
        {"exaone-moe", &kExaoneMoe, kPlain},
        {"seed-coder", &kSeedCoder, kNoClean},
    };
    return t;
}

}  // namespace moe::tokenizer::detail
