#include "kernels/panel_case_util.h"

#include <gtest/gtest.h>

#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quant_random.h"
#include "kernels/ref/quantize_act.h"

namespace moe::testutil {

PanelCase make_panel_case(Rng& rng, DType t, int64_t N, int64_t K, int64_t m, int xcase) {
    PanelCase c{t, N, K, m, {}, {}, {}, {}, 0};
    c.w.resize(static_cast<size_t>(N) * c.row_stride());
    const int64_t blocks_per_row = K / static_cast<int64_t>(dtype_info(t).block);
    EXPECT_TRUE(ref::fill_random_blocks(t, rng, c.w.data(), N * blocks_per_row, 1.0f));
    c.P.resize(kernels::panel::panel_matrix_bytes(t, N, K));
    kernels::panel::repack_matrix(t, c.w.data(), c.row_stride(), N, K, c.P.data());
    c.x.resize(static_cast<size_t>(m * K));
    for (auto& v : c.x) v = xcase == 0 ? rng.normal() : (rng.next() % 2 ? 1.0f : -1.0f);
    c.xq_stride = ref::act_q8_row_bytes(K);
    c.xq.resize(c.xq_stride * static_cast<size_t>(m));
    kernels::quantize_act_rows(kernels::Isa::Scalar, kernels::act_quant(t), c.x.data(), K, m, K, c.xq.data(), c.xq_stride);
    return c;
}

kernels::MatmulArgs panel_case_args(const PanelCase& c, std::vector<float>& y, int64_t n0, int64_t n1, bool prepared) {
    y.assign(static_cast<size_t>(c.m * (n1 - n0)), -1.0f);
    kernels::MatmulArgs a;
    a.w = c.w.data();
    a.w_row_stride = c.row_stride();
    a.x = c.x.data();
    a.ldx = c.K;
    a.y = y.data();
    a.ldy = n1 - n0;
    a.m = c.m;
    a.K = c.K;
    a.n0 = n0;
    a.n1 = n1;
    if (prepared) {
        a.xq = c.xq.data();
        a.xq_stride = c.xq_stride;
    }
    return a;
}

}  // namespace moe::testutil
