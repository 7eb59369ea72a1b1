#pragma once
// MoeBlock's scratch buffers of one forward (shared by moe_block.cpp and moe_block_ep.cpp).
#include <cstdint>

#include "moe/moe_block.h"

namespace moe {

// Every scratch buffer of one forward, with its shape.
struct MoeBlock::Buffers {
    float* logits;          // [T, E]
    float* scores;          // [T, E]
    float* select;          // [T, E]
    int32_t* ids;           // [T, k]
    float* weights;         // [T, k]
    int32_t* ids_exact;     // [T, k]  (temperature only: exact routing, to count changes)
    float* weights_exact;   // [T, k]
    void* route_scratch;    // n_threads * route_token_scratch_bytes
    int64_t* counts;        // [E]
    int64_t* offsets;       // [E + 1]
    int32_t* row_token;     // [T * k]
    int32_t* row_slot;      // [T * k]
    int32_t* slot_row;      // [T * k]
    float* xp;              // [T * k, D] permuted inputs
    float* h;               // [T * k, F] act(gate) * up
    float* yp;              // [T * k, D] expert outputs, permuted order
    void* ffn_scratch;      // GroupedFfn::scratch_bytes(E + (shared ? 1 : 0), n_threads)
    void* act_scratch;      // [T * (k + (shared ? 1 : 0)) rows] ActQ8 activations of max(D, F, Fs) values
    float* hs;              // [T, Fs] shared experts
    float* ys;              // [T, D]
    float* sgate;           // [T] sigmoid(shared gate . x)
    int64_t* shared_offsets;// [2]
    int64_t* load;          // [E]  capacity
    float* totals;          // [T]
    uint8_t* moved;         // [T]
};

}  // namespace moe
