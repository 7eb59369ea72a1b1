#pragma once
// KV cache for several sequences. For every (layer, sequence slot) there is one K buffer
// [rows, n_head_kv, head_dim_k] and one V buffer [rows, n_head_kv, head_dim_v] in f32, f16 or q8_0
// (q8_0: one kernels/ref/kv_q8.h vector per row and kv head; the layout kernels/ref/attention.h reads), all carved out of one allocation made at creation; the hot
// path never allocates. rows = n_ctx, except for a sliding-window layer (window W, gpt-oss) when
// the spec gives max_batch B: then the layer is a ring of R = W + B - 1 rows (position p in row
// p % R; a batch of up to B new rows never overwrites a key its first query still needs) plus
// W - 1 mirror rows (rows 0 .. W-2 written again at R .., so every query's keys are contiguous:
// AttentionSpec::ring), used when R + W - 1 < n_ctx. Such a layer holds only the last R positions,
// which is all its queries read; truncate() says when a rewind needs positions it no longer has.
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
    // Sliding windows per layer (empty, or n_layer entries; > 0 = the layer's queries read only the
    // last `window` positions) and the most rows one forward call appends to a sequence (0 = no
    // ring: every layer keeps n_ctx rows, as llama.cpp's --swa-full).
    std::vector<int64_t> window;
    int64_t max_batch = 0;
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
    // Ring size R of a layer (0: the layer keeps every position) and its stored rows (n_ctx, or R + W - 1).
    static int64_t ring_rows(const KvCacheSpec& spec, int64_t layer);
    static int64_t stored_rows(const KvCacheSpec& spec, int64_t layer);
    int64_t ring(int64_t layer) const;
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
    // Drop rows len .. length-1 of seq (e.g. rewind); len <= length. Returns the length kept: len,
    // or 0 (the sequence is cleared) when a ring layer has already overwritten positions that
    // queries from len on would read (a rewind by more than max_batch - 1 rows past the window).
    int64_t truncate(int64_t seq, int64_t len);
    void clear(int64_t seq) { (void)truncate(seq, 0); }
    void clear_all();

    // Base of the K / V buffer of (layer, seq): row r, kv head g at element (r * n_head_kv + g) * head_dim
    // (q8_0: at byte (r * n_head_kv + g) * kv_q8_vec_bytes(head_dim)); row r = position p, or in a ring
    // layer p % ring(layer) (and its mirror).
    const void* k(int64_t layer, int64_t seq) const { return base(layer, seq); }
    const void* v(int64_t layer, int64_t seq) const { return base(layer, seq) + layers_[static_cast<size_t>(layer)].k_bytes; }

private:
    uint8_t* base(int64_t layer, int64_t seq) const;
    void check_seq(int64_t seq) const;
    // Stores n positions' rows from row r on (contiguous; no ring mapping).
    void store(int64_t layer, int64_t seq, int64_t r, int64_t n, const float* k, const float* v);

    struct Layer {
        uint64_t offset = 0;   // of (layer, seq 0)
        uint64_t k_bytes = 0;  // one K buffer
        uint64_t slot_bytes = 0;  // K + V of one sequence
        int64_t ring = 0, window = 0;
    };

    struct Free {
        void operator()(uint8_t* p) const;
    };
    KvCacheSpec spec_;
    std::vector<Layer> layers_;
    uint64_t bytes_ = 0;
    std::unique_ptr<uint8_t, Free> data_;
    std::vector<int64_t> len_;
};

}  // namespace moe
