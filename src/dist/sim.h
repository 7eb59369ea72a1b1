#pragma once
// Expert-parallel traffic simulator (`moe sim-ep`, docs/EP.md). It replays per-layer token routing
// through exactly the exchange moe-engine's --ep performs (moe/ep.h): tokens in batches of
// `batch`; in a batch of T tokens rank r owns tokens [T r / R, T (r + 1) / R); every (token, slot)
// row goes to the rank Placement::pick chooses (key = token index in the batch * k + slot); a row
// to another rank costs one dispatch record (ep_record_bytes) and one f32 combine row back; after
// the combine every rank's slice is all-gathered (T_r * D * 4 bytes to each other rank).
//
// Time model: within a phase (dispatch, combine, gather) each rank's intra-node and inter-node
// bytes go over separate links of intra / inter GB/s in parallel; the phase takes as long as the
// slowest rank's slower link. No latency, no congestion, no compute overlap.
#include <cstdint>
#include <vector>

#include "dist/placement.h"

namespace moe::dist {

struct SimSpec {
    int ranks = 1;
    int nodes = 1;             // rank r on node r * nodes / ranks
    double intra_gbps = 400;   // Gbit/s per rank inside a node
    double inter_gbps = 100;   // Gbit/s per rank between nodes
    int64_t batch = 512;       // tokens per forward step (all ranks together)
    int64_t dim = 0;           // D (hidden size)
    int64_t record_bytes = 0;  // dispatch bytes per row (moe::ep_record_bytes)
    bool gather = true;        // false: data-parallel attention (tokens stay on their rank, no all-gather)
};

struct SimLayer {
    int layer = 0;
    int64_t tokens = 0, batches = 0;
    int64_t rows_remote = 0;        // rows sent to another rank
    int64_t dispatch_bytes = 0, combine_bytes = 0, gather_bytes = 0;
    int64_t inter_node_bytes = 0;   // of dispatch + combine + gather
    std::vector<int64_t> rank_bytes;  // [R] dispatch + combine bytes each rank sends (the --ep counter)
    double seconds = 0;             // summed over batches
    double imbalance = 1;           // max / mean rows computed per rank (all batches)
    int64_t bytes() const { return dispatch_bytes + combine_bytes + gather_bytes; }
};

// tokens: this layer's expert ids per token (slot order), in sequence order.
SimLayer simulate_layer(const std::vector<std::vector<int32_t>>& tokens, const Placement& p, int layer, int k,
                        const SimSpec& s);

}  // namespace moe::dist
