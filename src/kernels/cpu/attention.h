#pragma once
// Fast causal GQA attention over a KV cache (definition in kernels/ref/attention.h).
// Scalar path: one work item per (token, kv head, up to kAttentionHeadsPerItem query heads of that
// kv head); the keys stream in tiles of kAttentionTile with an online softmax per head (running max
// and sum, accumulator rescaled per tile); the item's heads take turns on a tile, so GQA reads each
// K/V row once per item. AVX-512 path (attention.cpp "blocked kernel"): one work item per (block of
// tokens, kv head, head chunk), up to 128 query rows (decode: one token and up to 8 kv heads per
// item); per tile, groups of 4 rows x 4 keys of register-tiled dot products (16-lane partials + a
// fixed halving tree), a vector exp, and P.V with 4 rows x 64 dims in registers, so each K/V tile
// is read once for up to 128 queries. f32 / f16 / q8_0 caches share the kernel (decode reads the
// cache in place, q8_0 converted in registers; prefill blocks stage each tile into per-thread
// contiguous f32 scratch). On either path the order of every operation for a (token, head)
// is fixed by (pos[t], head dims) alone: results do not depend on the batch size, the token's
// place in the batch, the rows it shares a block with or the thread count, so prefill and decode
// give bit-identical outputs for a token (tested).
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
