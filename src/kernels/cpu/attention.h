#pragma once
// Fast causal GQA attention over a KV cache (definition in kernels/ref/attention.h).
// One work item per (token, kv head, up to kAttentionHeadsPerItem query heads of that kv head),
// spread over the thread pool. Each item streams the keys in tiles of kAttentionTile with an online
// softmax per head (running max and sum, accumulator rescaled per tile); the item's heads take turns
// on a tile, so GQA reads each K/V row from memory once per item instead of once per head. No
// scratch beyond stack tiles is needed. The order of every sum is fixed by (pos[t], head dims)
// alone: results do not depend on the batch size, the token's place in the batch or the thread
// count, so prefill and decode give bit-identical outputs for a token.
#include "kernels/cpu/dense_isa.h"
#include "kernels/ref/attention.h"

namespace moe {
class ThreadPool;
}

namespace moe::cpu {

constexpr int64_t kAttentionTile = 64;        // keys per tile
constexpr int64_t kAttentionMaxHeadDim = 512;  // head_dim_v bound (stack accumulator)
// Query heads sharing one pass over a kv head's rows: 4 cuts K/V traffic up to 4x for GQA while
// decode still has n_head_kv * ceil(group / 4) items to spread over threads.
constexpr int64_t kAttentionHeadsPerItem = 4;

// pool == nullptr: calling thread only.
void attention(const AttentionSpec& spec, const AttentionArgs& args, ThreadPool* pool,
               kernels::Isa isa = kernels::best_isa());

}  // namespace moe::cpu
