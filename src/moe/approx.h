#pragma once
// Opt-in routing approximations. ALL OFF BY DEFAULT; each one changes the model's output and
// reports how many tokens it changed (ApproxReport). Applied after exact routing, in this order:
// temperature, dynamic top-k, weight-threshold pruning, per-expert capacity.
//
//  - temperature T: router logits (after the router bias) are divided by T before gating.
//  - dynamic top-k (threshold h): with shares p_j = w_j / sum w over the token's slots (slot
//    order), keep the fewest leading slots whose cumulative share reaches h (so only the top-1
//    when its share >= h); kept weights are rescaled to the token's original weight sum.
//  - pruning (threshold h): drop every slot but the first whose share p_j < h; kept weights are
//    rescaled to the original sum. The top-1 slot is never dropped.
//  - capacity (factor c): cap = ceil(c * T * k / E) rows per expert (raised to ceil(rows / E) so
//    nothing can be dropped). Slots are admitted slot-major (every token's first choice, then
//    every second choice, ...), tokens in order; a slot whose expert is full is re-routed to the
//    token's next-best expert by selection score (ties to the lower index) that has room and is
//    not already used by the token; the token's weights are then recomputed for its new expert
//    set (and rescaled to the previous sum if dynamic top-k or pruning ran). Capacity makes a
//    token's routing depend on the rest of the batch (the only thing here that does).
#include <cstdint>
#include <string>
#include <cstddef>

#include "moe/router.h"

namespace moe {

struct MoeApprox {
    float temperature = 1.0f;             // 1 = off
    float dynamic_topk_threshold = 0.0f;  // 0 = off, else in (0, 1]
    float prune_threshold = 0.0f;         // 0 = off, else in (0, 1)
    float capacity_factor = 0.0f;         // 0 = off, else > 0

    bool any() const {
        return temperature != 1.0f || dynamic_topk_threshold > 0.0f || prune_threshold > 0.0f || capacity_factor > 0.0f;
    }
    void validate() const;  // throws moe::Error naming the bad knob
    std::string describe() const;
};

struct ApproxReport {
    int64_t tokens = 0;               // tokens routed while approximations were on
    int64_t temperature_changed = 0;  // tokens whose experts or weights differ from exact routing
    int64_t dynamic_topk_changed = 0; // tokens that used fewer experts
    int64_t prune_changed = 0;        // tokens with at least one slot pruned
    int64_t capacity_changed = 0;     // tokens with at least one slot re-routed
    int64_t slots_dropped = 0;        // by dynamic top-k and pruning
    int64_t slots_rerouted = 0;       // by capacity
    void add(const ApproxReport& o);
};

// Number of leading valid slots of token t (valid slots are kept as a prefix).
int valid_slots(const Routing& r, int64_t t);

void apply_dynamic_topk(float threshold, Routing& r, ApproxReport& rep);
void apply_pruning(float threshold, Routing& r, ApproxReport& rep);
// Scratch: load [E], totals [T], moved [T]. rescale: keep each token's weight sum (set when
// dynamic top-k or pruning ran before).
void apply_capacity(const MoeSpec& spec, float factor, bool rescale, Routing& r, int64_t* load, float* totals,
                    uint8_t* moved, ApproxReport& rep);

}  // namespace moe
