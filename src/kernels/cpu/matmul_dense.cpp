#include "kernels/cpu/matmul_dense.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

namespace moe::cpu {

namespace {
// Output rows per parallel task: enough to amortise a task (16 rows x K >= 1024 floats of weights)
// and a multiple of the kernels' 4-row register block.
constexpr int64_t kRowsPerTask = 16;
}  // namespace

void matmul_dense(const MatmulSpec& s, const kernels::MatmulKernel& kernel, const float* x, const void* w,
                  const float* bias, float* y, ThreadPool* pool) {
    MOE_ASSERT(s.n_tokens >= 0 && s.n_out > 0 && s.n_in > 0, "matmul_dense shape T=", s.n_tokens, " N=", s.n_out,
               " K=", s.n_in);
    MOE_ASSERT(kernel.fn != nullptr, "matmul_dense without a kernel");
    if (s.n_tokens == 0) return;
    const size_t stride = s.w_row_stride ? s.w_row_stride : static_cast<size_t>(s.n_in) * sizeof(float);
    auto block = [&](int64_t n0, int64_t n1, int) {
        kernels::MatmulArgs a;
        a.w = w;
        a.w_row_stride = stride;
        a.x = x;
        a.ldx = s.n_in;
        a.y = y + n0;  // the kernel writes column (n - n0)
        a.ldy = s.n_out;
        a.m = s.n_tokens;
        a.K = s.n_in;
        a.n0 = n0;
        a.n1 = n1;
        kernel(a);
        if (bias)
            for (int64_t t = 0; t < s.n_tokens; ++t)
                for (int64_t n = n0; n < n1; ++n) y[t * s.n_out + n] += bias[n];
    };
    if (!pool || pool->size() == 1)
        block(0, s.n_out, 0);
    else
        pool->parallel_for(s.n_out, kRowsPerTask, block);
}

}  // namespace moe::cpu
