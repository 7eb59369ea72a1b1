#pragma once
// A random panel-GEMM case shared by the panel GEMM tests (test_panel_gemm, test_panel_amx): N x K
// random valid blocks of type t, their panels (repack_matrix), m activation rows (xcase 0: normal
// values, 1: +-1, the saturating case) and those rows quantized to the type's activation format.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/ref/matmul_ref.h"

namespace moe::testutil {

struct PanelCase {
    DType t;
    int64_t N, K, m;
    std::vector<uint8_t> w, P;  // blocks (row_bytes(t, K) per row), panels
    std::vector<float> x;       // [m][K]
    std::vector<unsigned char> xq;
    size_t xq_stride = 0;
    size_t row_stride() const { return row_bytes(t, static_cast<uint64_t>(K)); }
};

PanelCase make_panel_case(Rng& rng, DType t, int64_t N, int64_t K, int64_t m, int xcase);
// The call for columns [n0, n1) of c into y (resized to m x (n1 - n0), filled with -1); with
// `prepared` the quantized rows are given as xq, else the kernel quantizes x itself.
kernels::MatmulArgs panel_case_args(const PanelCase& c, std::vector<float>& y, int64_t n0, int64_t n1, bool prepared);

}  // namespace moe::testutil
