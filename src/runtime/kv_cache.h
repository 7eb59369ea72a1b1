#pragma once
// KV cache for several sequences. For every (layer, sequence slot) there is one K buffer
// [n_ctx, n_head_kv, head_dim_k] and one V buffer [n_ctx, n_head_kv, head_dim_v] in f32, f16 or q8_0
// (q8_0: one kernels/ref/kv_q8.h vector per row and kv head; the layout kernels/ref/attention.h reads), all carved out of one allocation made at creation; the hot
// path never allocates.
//
// Use per forward step of sequence s with n new tokens:
//   const int64_t p0 = cache.begin_append(s, n);   // throws if p0 + n > n_ctx
//   for each layer: cache.write(layer, s, p0, n, k_rows, v_rows); attention over rows 0 .. p0+n-1
//   cache.commit(s, n);                            // length(s) = p0 + n
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"

namespace moe {

struct KvCacheSpec {
    int64_t n_layer = 0;
    int64_t n_ctx = 0;      // positions per sequence
    int64_t n_seq = 1;      // sequence slots
    int64_t n_head_kv = 0;
    int64_t head_dim_k = 0;
    int64_t head_dim_v = 0;   // 0: no V buffer (MLA: V is part of each K row; write() ignores v)
    DType type = DType::F32;  // F32, F16 or Q8_0
};

class KvCache {
public:
    // Throws moe::Error("kv_cache") for an invalid spec or when the memory cannot be allocated.
    explicit KvCache(const KvCacheSpec& spec);
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    // Bytes a cache of this spec holds (checked arithmetic; for planning before creating one).
    static uint64_t bytes_for(const KvCacheSpec& spec);
    uint64_t bytes() const { return bytes_; }
    const KvCacheSpec& spec() const { return spec_; }

    int64_t length(int64_t seq) const;
    // Position of the first of n_new rows to append to `seq`; throws moe::Error("kv_cache"):
    // "prompt of N tokens exceeds the context of M; use --ctx ..." when length + n_new > n_ctx.
    int64_t begin_append(int64_t seq, int64_t n_new) const;
    // Stores rows pos0 .. pos0+n-1 of one layer from f32 k: [n, n_head_kv, head_dim_k] and
    // v: [n, n_head_kv, head_dim_v] (converted to the cache type, f16 rounds to nearest even, q8_0 per 32-element block).
    // pos0 + n must fit in n_ctx (internal invariant: callers go through begin_append).
    void write(int64_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k, const float* v);
    // The n rows appended by begin_append are now valid: length(seq) += n.
    void commit(int64_t seq, int64_t n);
    // Drop rows len .. length-1 of seq (e.g. rewind); len <= length.
    void truncate(int64_t seq, int64_t len);
    void clear(int64_t seq) { truncate(seq, 0); }
    void clear_all();

    // Base of the K / V buffer of (layer, seq): row p, kv head g at element (p * n_head_kv + g) * head_dim
    // (q8_0: at byte (p * n_head_kv + g) * kv_q8_vec_bytes(head_dim)).
    const void* k(int64_t layer, int64_t seq) const { return base(layer, seq); }
    const void* v(int64_t layer, int64_t seq) const { return base(layer, seq) + k_bytes_; }

private:
    uint8_t* base(int64_t layer, int64_t seq) const;
    void check_seq(int64_t seq) const;

    struct Free {
        void operator()(uint8_t* p) const;
    };
    KvCacheSpec spec_;
    uint64_t k_bytes_ = 0;     // one K buffer (n_ctx rows)
    uint64_t slot_bytes_ = 0;  // K + V of one (layer, seq)
    uint64_t bytes_ = 0;
    std::unique_ptr<uint8_t, Free> data_;
    std::vector<int64_t> len_;
};

}  // namespace moe
