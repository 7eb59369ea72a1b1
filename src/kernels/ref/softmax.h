#pragma once
// Row softmax in f32 with max subtraction: y[r, i] = exp(x[r, i] - max_r) / sum_j exp(x[r, j] - max_r).
// -inf entries get probability 0; a row must hold at least one finite value (internal invariant:
// callers mask, they never pass an all -inf row). Cheap next to the matmuls, so there is no
// separate fast path.
#include <cstdint>

namespace moe {

struct SoftmaxSpec {
    int64_t n_rows = 0;
    int64_t row_len = 0;
};

namespace ref {
// x, y: [n_rows, row_len]; y may equal x. Sums are accumulated in double.
void softmax(const SoftmaxSpec& spec, const float* x, float* y);
}  // namespace ref

}  // namespace moe
