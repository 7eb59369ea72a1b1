#include "dist/sim.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace moe::dist {

SimLayer simulate_layer(const std::vector<std::vector<int32_t>>& tokens, const Placement& p, int layer, int k,
                        const SimSpec& s) {
    const int R = s.ranks;
    if (R < 1 || s.nodes < 1 || s.nodes > R || s.batch < 1 || s.dim < 1 || s.record_bytes < 1)
        throw_error("sim-ep", "bad simulation spec (ranks ", R, ", nodes ", s.nodes, ", batch ", s.batch, ")");
    if (p.n_ranks != R) throw_error("sim-ep", "placement for ", p.n_ranks, " ranks, simulating ", R);
    auto node = [&](int r) { return r * s.nodes / R; };
    const double intra = s.intra_gbps * 1e9 / 8, inter = s.inter_gbps * 1e9 / 8;
    const int64_t row_f32 = s.dim * 4;
    SimLayer out;
    out.layer = layer;
    out.tokens = static_cast<int64_t>(tokens.size());
    out.rank_bytes.assign(static_cast<size_t>(R), 0);
    std::vector<int64_t> computed(static_cast<size_t>(R), 0);
    // Per batch: bytes each rank sends, split intra / inter node, per phase.
    std::vector<double> d_in(static_cast<size_t>(R)), d_out(static_cast<size_t>(R)), c_in(static_cast<size_t>(R)),
        c_out(static_cast<size_t>(R)), g_in(static_cast<size_t>(R)), g_out(static_cast<size_t>(R));
    auto phase = [&](const std::vector<double>& a, const std::vector<double>& b) {
        double t = 0;
        for (int r = 0; r < R; ++r) t = std::max({t, a[static_cast<size_t>(r)] / intra, b[static_cast<size_t>(r)] / inter});
        return t;
    };
    for (int64_t b0 = 0; b0 < out.tokens; b0 += s.batch) {
        const int64_t T = std::min(s.batch, out.tokens - b0);
        for (auto* v : {&d_in, &d_out, &c_in, &c_out, &g_in, &g_out}) std::fill(v->begin(), v->end(), 0.0);
        for (int src = 0; src < R; ++src) {
            const int64_t t0 = T * src / R, t1 = T * (src + 1) / R;
            for (int64_t i = t0; i < t1; ++i) {
                const auto& ex = tokens[static_cast<size_t>(b0 + i)];
                for (size_t slot = 0; slot < ex.size() && slot < static_cast<size_t>(k); ++slot) {
                    const int e = ex[slot];
                    if (e < 0 || e >= p.n_experts)
                        throw_error("sim-ep", "layer ", layer, ": expert ", e, " outside the placement's ", p.n_experts);
                    const int dst = p.pick(layer, e, static_cast<uint64_t>(i * k) + slot);
                    ++computed[static_cast<size_t>(dst)];
                    if (dst == src) continue;
                    ++out.rows_remote;
                    const bool cross = node(src) != node(dst);
                    (cross ? d_out : d_in)[static_cast<size_t>(src)] += static_cast<double>(s.record_bytes);
                    (cross ? c_out : c_in)[static_cast<size_t>(dst)] += static_cast<double>(row_f32);
                    out.rank_bytes[static_cast<size_t>(src)] += s.record_bytes;
                    out.rank_bytes[static_cast<size_t>(dst)] += row_f32;
                    out.dispatch_bytes += s.record_bytes;
                    out.combine_bytes += row_f32;
                    if (cross) out.inter_node_bytes += s.record_bytes + row_f32;
                }
            }
            for (int dst = 0; dst < R && s.gather; ++dst) {
                if (dst == src) continue;
                const int64_t g = (t1 - t0) * row_f32;
                const bool cross = node(src) != node(dst);
                (cross ? g_out : g_in)[static_cast<size_t>(src)] += static_cast<double>(g);
                out.gather_bytes += g;
                if (cross) out.inter_node_bytes += g;
            }
        }
        out.seconds += phase(d_in, d_out) + phase(c_in, c_out) + phase(g_in, g_out);
        ++out.batches;
    }
    const double sum = std::accumulate(computed.begin(), computed.end(), 0.0);
    if (sum > 0) out.imbalance = static_cast<double>(*std::max_element(computed.begin(), computed.end())) / (sum / R);
    return out;
}

}  // namespace moe::dist
