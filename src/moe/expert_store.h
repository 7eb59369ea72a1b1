#pragma once
// ExpertStore: where the grouped FFN of a MoE block gets a routed expert's weights from.
// Without a store (MoeBlock's default) the experts are read in place in the GGUF mapping. With
// one (the tiered expert cache, expert_cache.h), a block asks for the experts one call needs:
//
//   acquire(layer, ids[n]) -> out[i] = {gate, up, down} base pointers of expert ids[i]
//   ... compute with them ...
//   release(layer)         -> the views may be evicted again
//
// or, out of order (MoeBlock): acquire_async, then wait_ready until every expert was ready (the
// resident ones come first, the rest as their reads complete), computing each batch as it comes.
//
// At most capacity() experts may be held at once; MoeBlock splits a layer's active experts into
// groups of at most that many (results are bitwise the same: each output element is one kernel
// dot product whatever the grouping, experts.h).
#include <cstdint>

namespace moe {

struct ExpertSlices {
    const char* gate = nullptr;  // [F rows of the gate stack's row stride]
    const char* up = nullptr;
    const char* down = nullptr;  // [D rows]
};

class ExpertStore {
public:
    virtual ~ExpertStore() = default;
    // Experts ids[0..n) of `layer` (distinct, n <= capacity()) -> out[n]; blocks until they are
    // loaded. Throws moe::Error naming file, layer and expert when a load fails.
    virtual void acquire(int layer, const int32_t* ids, int n, ExpertSlices* out) = 0;
    // Out of order: like acquire (same views in out[n], same release), but returns at once with
    // the loads in flight; wait_ready then says which experts may be used. The default waits in
    // acquire and reports all of them ready at once.
    virtual void acquire_async(int layer, const int32_t* ids, int n, ExpertSlices* out) {
        acquire(layer, ids, n, out);
    }
    // After acquire_async of n experts: sets ready[i] = 1 (from 0) for each expert i whose load has
    // landed, blocking until at least one is; returns how many it set (0 once none is left).
    // Entries the caller changed from 1 to anything else are left alone. Throws as acquire.
    virtual int wait_ready(uint8_t* ready, int n) {
        int c = 0;
        for (int i = 0; i < n; ++i)
            if (!ready[i]) ready[i] = 1, ++c;
        return c;
    }
    // Ends the views of the last acquire of `layer`.
    virtual void release(int layer) = 0;
    virtual int capacity() const = 0;
    // Hint: experts of `layer` likely needed next (router lookahead); may start their loads.
    virtual void prefetch(int layer, const int32_t* ids, int n) {}
};

}  // namespace moe
