#pragma once
// The next panels of a prefill GEMM, requested from DRAM a slice at a time while the current ones
// compute: shared by the VNNI panel GEMM (rows_all, qmatmul_avx512_panel.h) and the AMX kernels
// with folded scales (qmatmul_panel_amx_folded.cpp). Spread over the compute, not one burst ahead
// of it (576 requests for a Q4_K pair at K = 2048): docs/PERFORMANCE.md session 38.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/qmatmul_panel_layout.h"

namespace moe::kernels::panel {

// The stored bytes of the panels the caller computes next: up to three ranges (region-major
// types: their levels, scales and d, each contiguous over consecutive panels; panel-major: one).
struct NextPanels {
    const uint8_t* at[3] = {};
    size_t bytes[3] = {};
};

// Panels [p, p + k) of w (none when k <= 0 or p is past the last panel).
inline NextPanels next_panels(const PanelMatrix& w, int64_t p, int64_t k) {
    const int64_t n_panels = (w.N + 15) / 16;
    k = std::min(k, n_panels - p);
    if (k <= 0) return {};
    const size_t kk = static_cast<size_t>(k);
    const PanelParts nx = panel_parts(w.type, w.K, w.panels, n_panels, p);
    if (!nx.sc) return NextPanels{{nx.lev, nullptr, nullptr}, {kk * panel_bytes(w.type, w.K), 0, 0}};
    const PanelRegionBytes rb = panel_region_bytes(w.type, w.K);
    return NextPanels{{nx.lev, nx.sc, nx.d}, {kk * rb.lev, kk * rb.sc, kk * rb.d}};
}

// PREFETCHT0 of whole lines, ceil(bytes / steps) of each range per step(): after `steps` calls
// every line has been requested once (further calls request nothing). Addresses only, no loads:
// bits are never changed.
class SlicedPrefetch {
public:
    SlicedPrefetch(const NextPanels& next, int64_t steps) : next_(next) {
        const size_t s = static_cast<size_t>(std::max<int64_t>(steps, 1));
        for (int q = 0; q < 3; ++q) slice_[q] = (next.bytes[q] + 64 * s - 1) / (64 * s) * 64;
    }
    void step() {
        for (int q = 0; q < 3; ++q)
            for (const size_t end = std::min(next_.bytes[q], done_[q] + slice_[q]); done_[q] < end; done_[q] += 64)
                _mm_prefetch(reinterpret_cast<const char*>(next_.at[q] + done_[q]), _MM_HINT_T0);
    }

private:
    NextPanels next_;
    size_t done_[3] = {}, slice_[3] = {};
};

}  // namespace moe::kernels::panel
