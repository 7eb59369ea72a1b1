#pragma once
// RMSNorm over rows: y[r, i] = x[r, i] / sqrt(mean_i(x[r, :]^2) + eps) * w[i].
// The per-head variant (Qwen3-MoE q/k norm over head_dim chunks) is the same op with
// row_len = head_dim and n_rows = n_tokens * n_head: w has row_len entries shared by every row.
#include <cstdint>

namespace moe {

struct RmsNormSpec {
    int64_t n_rows = 0;
    int64_t row_len = 0;  // elements normalised together (n_embd, or head_dim for the per-head variant)
    float eps = 1e-6f;
};

namespace ref {
// x, y: [n_rows, row_len] (y may equal x); w: [row_len], or nullptr for no weight.
// Sum of squares accumulated in double (the oracle).
void rmsnorm(const RmsNormSpec& spec, const float* x, const float* w, float* y);
}  // namespace ref

}  // namespace moe
