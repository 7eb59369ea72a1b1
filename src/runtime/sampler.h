#pragma once
// Token sampler. Greedy when temperature <= 0 (argmax of the penalised logits, ties -> lowest id);
// otherwise the llama.cpp-like chain, in this order:
//   repetition penalty -> top-k -> top-p -> min-p -> temperature -> softmax -> draw
//  - repetition penalty (!= 1): for each distinct token among the last repeat_last_n accepted ones,
//    a positive logit is divided by the penalty, a negative one multiplied (applies to greedy too);
//  - top-k (> 0): keep the k largest logits (ties -> lower id first);
//  - top-p (< 1): softmax (temperature 1) over what is left, keep the shortest prefix of the
//    sorted list whose probability sum reaches top_p (always at least one token);
//  - min-p (> 0): keep tokens with p >= min_p * p_max over what is left;
//  - temperature: logits / temperature, softmax in double, inverse-CDF draw with the sampler's own
//    RNG (core/rng.h), so the same seed and the same logits give the same tokens on every platform.
// NaN or +inf logits are a moe::Error (the model produced garbage); -inf means "never".
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace moe {

struct SamplerSpec {
    float temperature = 0.8f;
    int32_t top_k = 40;         // <= 0: off
    float top_p = 0.95f;        // >= 1: off
    float min_p = 0.05f;        // <= 0: off
    float repeat_penalty = 1.0f;  // 1: off
    int32_t repeat_last_n = 64;   // window of accepted tokens the penalty looks at (0: off)
    uint64_t seed = 0;
};

class Sampler {
public:
    // Throws moe::Error("sampler") for invalid settings (negative penalty, top_p <= 0, ...).
    explicit Sampler(const SamplerSpec& spec);

    const SamplerSpec& spec() const { return spec_; }

    // Picks a token from logits[n_vocab]. Does not record it: call accept() with the token that is
    // actually appended (it feeds the repetition-penalty window).
    int32_t sample(const float* logits, int64_t n_vocab);
    void accept(int32_t token);
    // Forget the history and restart the RNG from the seed.
    void reset();

    struct Candidate {
        int32_t id;
        float logit;  // after the penalty and the temperature
        double p;     // probability of being drawn
    };
    // The distribution sample() draws from (non-greedy specs), sorted by p descending, ties by id;
    // for greedy specs the single argmax with p = 1. For tests and for `--show-probs`-style output.
    const std::vector<Candidate>& distribution(const float* logits, int64_t n_vocab);

private:
    void build(const float* logits, int64_t n_vocab);
    SamplerSpec spec_;
    Rng rng_;
    std::vector<int32_t> history_;  // accepted tokens, most recent last (bounded by repeat_last_n)
    std::vector<Candidate> cand_;   // scratch, reused between calls
    std::vector<int32_t> penalised_;
};

}  // namespace moe
