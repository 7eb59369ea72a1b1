#pragma once
// Rotary position embedding, llama.cpp semantics (ggml_rope_ext):
//  - theta_i(pos) = pos * freq_base^(-2i / n_rot), i = 0 .. n_rot/2 - 1;
//  - RopeMode::Normal (llama / Mixtral): rotates adjacent pairs (x[2i], x[2i+1]);
//    RopeMode::Neox (qwen2moe / qwen3moe / olmoe): rotates halves (x[i], x[i + n_rot/2]);
//    (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos);
//  - dimensions n_rot .. head_dim-1 pass through unchanged;
//  - frequency scaling with freq_scale = 1 / factor:
//      None:   theta = theta_extrap, cos/sin scaled by attn_factor;
//      Linear: theta = freq_scale * theta_extrap (i.e. pos / factor), scaled by attn_factor;
//      YaRN:   theta_interp = freq_scale * theta_extrap; with ramp(i) = 1 - clamp((i - lo) /
//              max(0.001, hi - lo), 0, 1) and mix = ramp(i) * ext_factor,
//              theta = theta_interp * (1 - mix) + theta_extrap * mix, and (only when ext_factor != 0)
//              the magnitude attn_factor * (1 + 0.1 ln(1 / freq_scale)).
//              lo = max(0, floor(corr(beta_fast))), hi = min(n_rot - 1, ceil(corr(beta_slow))),
//              corr(b) = n_rot * ln(n_ctx_orig / (b * 2 pi)) / (2 ln freq_base).
// We compute theta and cos/sin in double and round once to f32 (llama.cpp uses an f32 recurrence
// theta *= base^(-2/n_rot), which drifts by a few ulp of theta; at pos ~ 32k that is ~1e-3 rad).
// Cos/sin are precomputed per position into a RopeCache (built once per model/context).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace moe {

enum class RopeMode { Normal, Neox };
enum class RopeScaling { None, Linear, Yarn };

struct RopeSpec {
    RopeMode mode = RopeMode::Normal;
    int64_t head_dim = 0;
    int64_t n_rot = 0;  // rotated dims (even, <= head_dim)
    float freq_base = 10000.0f;
    RopeScaling scaling = RopeScaling::None;
    float factor = 1.0f;       // rope.scaling.factor (freq_scale = 1 / factor) for Linear and YaRN
    float ext_factor = 1.0f;   // YaRN only (llama.cpp sets 1.0 for YaRN models; 0 = pure interpolation)
    float attn_factor = 1.0f;  // magnitude scale of cos/sin
    float beta_fast = 32.0f;   // YaRN
    float beta_slow = 1.0f;    // YaRN
    int64_t n_ctx_orig = 0;    // YaRN: rope.scaling.original_context_length
};

// Throws moe::Error("rope") for invalid specs (they come from model metadata).
void rope_validate(const RopeSpec& spec);

// cos/sin for positions [0, n_pos), n_rot/2 of each per position.
class RopeCache {
public:
    RopeCache(const RopeSpec& spec, int64_t n_pos);
    const RopeSpec& spec() const { return spec_; }
    int64_t n_pos() const { return n_pos_; }
    int64_t n_pairs() const { return spec_.n_rot / 2; }
    const float* cos(int64_t pos) const { return cos_.data() + pos * n_pairs(); }
    const float* sin(int64_t pos) const { return sin_.data() + pos * n_pairs(); }
    size_t bytes() const { return (cos_.size() + sin_.size()) * sizeof(float); }

private:
    RopeSpec spec_;
    int64_t n_pos_;
    std::vector<float> cos_, sin_;  // [n_pos, n_rot/2]
};

// (cos, sin) of pair i at position pos, in double, straight from the formulas above (the cache is
// filled from it; tests use it too).
void rope_angle(const RopeSpec& spec, int64_t pos, int64_t i, double* cos_out, double* sin_out);

namespace ref {
// In place on x: [n_tokens, n_head, head_dim] (row stride head_dim, token stride n_head * head_dim);
// token t is at position pos[t] (0 <= pos[t] < cache.n_pos()).
void rope_apply(const RopeCache& cache, float* x, int64_t n_tokens, int64_t n_head, const int32_t* pos);
}  // namespace ref

}  // namespace moe
