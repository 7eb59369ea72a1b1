#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/huge_pages.h"
#include "kernels/cpu/kv_q8_quant.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/kv_q8.h"

namespace moe {

namespace {
constexpr const char* kComp = "kv_cache";
constexpr size_t kAlign = 64;

uint64_t elem_bytes(DType t) { return t == DType::F16 ? 2 : 4; }

void validate(const KvCacheSpec& s) {
    if (s.type != DType::F32 && s.type != DType::F16 && s.type != DType::Q8_0)
        throw_error(kComp, "cache type ", dtype_name(s.type), " is not supported (use f32, f16 or q8_0)");
    if (s.n_ctx <= 0) throw_error(kComp, "context of ", s.n_ctx, " tokens (must be > 0; use --ctx)");
    if (s.n_seq <= 0) throw_error(kComp, "n_seq is ", s.n_seq, " (must be > 0)");
    if (s.n_layer <= 0 || s.n_head_kv <= 0 || s.head_dim_k <= 0 || s.head_dim_v < 0)
        throw_error(kComp, "invalid shape: n_layer ", s.n_layer, ", n_head_kv ", s.n_head_kv, ", head_dim_k ",
                    s.head_dim_k, ", head_dim_v ", s.head_dim_v, " (must be > 0; head_dim_v >= 0)");
    if (!s.window.empty() && static_cast<int64_t>(s.window.size()) != s.n_layer)
        throw_error(kComp, "windows for ", s.window.size(), " layers, the cache has ", s.n_layer);
    for (int64_t w : s.window)
        if (w < 0 || w > (int64_t{1} << 40)) throw_error(kComp, "sliding window ", w, " (must be >= 0)");
    if (s.max_batch < 0 || s.max_batch > (int64_t{1} << 40)) throw_error(kComp, "max batch ", s.max_batch, " (must be >= 0)");
}

// One K (or V) buffer: rows * n_head_kv * head_dim elements (Q8_0: rows * n_head_kv vectors of
// kv_q8_vec_bytes(head_dim)), padded to kAlign bytes.
uint64_t buffer_bytes(const KvCacheSpec& s, int64_t rows, int64_t head_dim) {
    if (head_dim == 0) return 0;  // no V buffer (MLA)
    const bool q8 = s.type == DType::Q8_0;
    const int64_t dims[3] = {rows, s.n_head_kv, q8 ? (head_dim + kKvQ8Block - 1) / kKvQ8Block : head_dim};
    const uint64_t n = checked_product(dims, 3, kComp, "KV cache size");
    const uint64_t unit = q8 ? static_cast<uint64_t>(kKvQ8BlockBytes) : elem_bytes(s.type);
    return checked_align(checked_mul(n, unit, kComp, "KV cache size"), kAlign, kComp, "KV cache size");
}
}  // namespace

namespace {
int64_t window_of(const KvCacheSpec& s, int64_t layer) { return s.window.empty() ? 0 : s.window[static_cast<size_t>(layer)]; }
}  // namespace

int64_t KvCache::ring_rows(const KvCacheSpec& s, int64_t layer) {
    return swa_ring_rows(window_of(s, layer), s.max_batch, s.n_ctx);
}

int64_t KvCache::stored_rows(const KvCacheSpec& s, int64_t layer) {
    return swa_stored_rows(window_of(s, layer), s.max_batch, s.n_ctx);
}

uint64_t KvCache::bytes_for(const KvCacheSpec& s) {
    validate(s);
    uint64_t total = 0;
    for (int64_t l = 0; l < s.n_layer; ++l) {
        const int64_t rows = stored_rows(s, l);
        const uint64_t slot =
            checked_add(buffer_bytes(s, rows, s.head_dim_k), buffer_bytes(s, rows, s.head_dim_v), kComp, "KV cache size");
        total = checked_add(total, checked_mul(slot, static_cast<uint64_t>(s.n_seq), kComp, "KV cache size"), kComp,
                            "KV cache size");
    }
    return total;
}

void KvCache::Free::operator()(uint8_t* p) const { std::free(p); }

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec) {
    bytes_ = bytes_for(spec);
    uint64_t off = 0;
    for (int64_t l = 0; l < spec.n_layer; ++l) {
        Layer L;
        const int64_t rows = stored_rows(spec, l);
        L.offset = off;
        L.k_bytes = buffer_bytes(spec, rows, spec.head_dim_k);
        L.slot_bytes = L.k_bytes + buffer_bytes(spec, rows, spec.head_dim_v);
        L.ring = ring_rows(spec, l);
        L.window = L.ring > 0 ? spec.window[static_cast<size_t>(l)] : 0;
        off += L.slot_bytes * static_cast<uint64_t>(spec.n_seq);
        layers_.push_back(L);
    }
    const size_t n = checked_cast<size_t>(bytes_, kComp, "KV cache size");
    // Refuse sizes beyond the machine's RAM up front (a clear message instead of an allocator abort
    // or an overcommitted buffer that faults later).
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double gib = static_cast<double>(bytes_) / (1024.0 * 1024.0 * 1024.0);
    if (pages > 0 && page > 0 && bytes_ / static_cast<uint64_t>(page) > static_cast<uint64_t>(pages))
        throw_error(kComp, "the KV cache needs ", gib, " GiB (", spec.n_layer, " layers x ", spec.n_seq,
                    " sequences x ", spec.n_ctx, " tokens) but this machine has ",
                    static_cast<double>(pages) * static_cast<double>(page) / (1024.0 * 1024.0 * 1024.0),
                    " GiB of RAM; use a smaller --ctx or a smaller cache type (--kv-type f16 or q8_0)");
    // On 2 MiB pages from 2 MiB up (core/huge_pages.h), every page touched here by the zero fill, as
    // llama.cpp clears its cache buffer: left to fault lazily, decode's one new row per layer and
    // token faulted in a new 4 KiB page every few tokens mid-generation (this project's VMs: ~15 us
    // a fault, 126 ms of a 128-token OLMoE run's 32 MiB f32 cache), and attention's reads at depth
    // walked one TLB entry per 4 KiB. The resident memory is the plan's KV bytes from the start.
    auto* p = static_cast<uint8_t*>(n >= kHugePage ? huge_alloc(n) : std::aligned_alloc(kAlign, n));
    if (!p)
        throw_error(kComp, "cannot allocate ", gib,
                    " GiB for the KV cache (", spec.n_layer, " layers x ", spec.n_seq, " sequences x ", spec.n_ctx,
                    " tokens); use a smaller --ctx or a smaller cache type (--kv-type f16 or q8_0)");
    std::memset(p, 0, n);
    data_.reset(p);
    len_.assign(static_cast<size_t>(spec.n_seq), 0);
}

KvCache::~KvCache() = default;

void KvCache::check_seq(int64_t seq) const {
    MOE_ASSERT(seq >= 0 && seq < spec_.n_seq, "kv cache sequence ", seq, " of ", spec_.n_seq);
}

uint8_t* KvCache::base(int64_t layer, int64_t seq) const {
    check_seq(seq);
    MOE_ASSERT(layer >= 0 && layer < spec_.n_layer, "kv cache layer ", layer, " of ", spec_.n_layer);
    const Layer& L = layers_[static_cast<size_t>(layer)];
    return data_.get() + L.offset + static_cast<uint64_t>(seq) * L.slot_bytes;
}

int64_t KvCache::ring(int64_t layer) const {
    MOE_ASSERT(layer >= 0 && layer < spec_.n_layer, "kv cache layer ", layer, " of ", spec_.n_layer);
    return layers_[static_cast<size_t>(layer)].ring;
}

int64_t KvCache::length(int64_t seq) const {
    check_seq(seq);
    return len_[static_cast<size_t>(seq)];
}

int64_t KvCache::begin_append(int64_t seq, int64_t n_new) const {
    const int64_t len = length(seq);
    MOE_ASSERT(n_new >= 0, "kv cache append of ", n_new, " rows");
    if (n_new > spec_.n_ctx - len) {
        if (len == 0)
            throw_error(kComp, "prompt of ", n_new, " tokens exceeds the context of ", spec_.n_ctx,
                        "; use --ctx to raise it (or shorten the prompt)");
        throw_error(kComp, "prompt of ", len + n_new, " tokens (", len, " cached + ", n_new,
                    " new) exceeds the context of ", spec_.n_ctx, "; use --ctx to raise it (or shorten the prompt)");
    }
    return len;
}

void KvCache::write(int64_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k, const float* v) {
    MOE_ASSERT(pos0 >= 0 && n >= 0 && pos0 + n <= spec_.n_ctx, "kv cache write rows ", pos0, "..", pos0 + n, " of ",
               spec_.n_ctx);
    const Layer& L = layers_[static_cast<size_t>(layer)];
    if (L.ring == 0) {
        store(layer, seq, pos0, n, k, v);
        return;
    }
    // Ring: position p in row p % ring, rows below window - 1 mirrored after the ring.
    const int64_t kd = spec_.n_head_kv * spec_.head_dim_k, vd = spec_.n_head_kv * spec_.head_dim_v;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t r = (pos0 + i) % L.ring;
        const float* vi = v ? v + i * vd : nullptr;
        store(layer, seq, r, 1, k + i * kd, vi);
        if (r < L.window - 1) store(layer, seq, L.ring + r, 1, k + i * kd, vi);
    }
}

void KvCache::store(int64_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k, const float* v) {
    const Layer& L = layers_[static_cast<size_t>(layer)];
    uint8_t* kb = base(layer, seq);
    uint8_t* vb = kb + L.k_bytes;
    const int64_t nk = n * spec_.n_head_kv * spec_.head_dim_k, nv = n * spec_.n_head_kv * spec_.head_dim_v;
    const int64_t ok = pos0 * spec_.n_head_kv * spec_.head_dim_k, ov = pos0 * spec_.n_head_kv * spec_.head_dim_v;
    if (spec_.type == DType::Q8_0) {
        // One kv_q8 vector per (row, kv head); rows are contiguous, so row r head g is vector
        // (pos0 + r) * n_head_kv + g of the buffer.
        // (cpu::kv_q8_quantize_rows: the reference quantizer's bits, AVX-512 where the CPU has it)
        const int64_t nrow = n * spec_.n_head_kv, kvb = kv_q8_vec_bytes(spec_.head_dim_k);
        cpu::kv_q8_quantize_rows(k, nrow, spec_.head_dim_k, kb + pos0 * spec_.n_head_kv * kvb, kvb);
        if (nv > 0) {
            const int64_t vvb = kv_q8_vec_bytes(spec_.head_dim_v);
            cpu::kv_q8_quantize_rows(v, nrow, spec_.head_dim_v, vb + pos0 * spec_.n_head_kv * vvb, vvb);
        }
    } else if (spec_.type == DType::F32) {
        std::memcpy(reinterpret_cast<float*>(kb) + ok, k, static_cast<size_t>(nk) * sizeof(float));
        if (nv > 0) std::memcpy(reinterpret_cast<float*>(vb) + ov, v, static_cast<size_t>(nv) * sizeof(float));
    } else {
        uint16_t* kd = reinterpret_cast<uint16_t*>(kb) + ok;
        uint16_t* vd = reinterpret_cast<uint16_t*>(vb) + ov;
        for (int64_t i = 0; i < nk; ++i) kd[i] = fp32_to_fp16(k[i]);
        for (int64_t i = 0; i < nv; ++i) vd[i] = fp32_to_fp16(v[i]);
    }
}

void KvCache::commit(int64_t seq, int64_t n) {
    const int64_t len = length(seq);
    MOE_ASSERT(n >= 0 && n <= spec_.n_ctx - len, "kv cache commit of ", n, " rows at length ", len);
    len_[static_cast<size_t>(seq)] = len + n;
}

int64_t KvCache::truncate(int64_t seq, int64_t len) {
    const int64_t have = length(seq);
    MOE_ASSERT(len >= 0 && len <= have, "kv cache truncate to ", len, " from ", have);
    // A ring layer holds positions have - ring .. have - 1; queries from len on read keys from
    // len - window + 1 on.
    for (const Layer& L : layers_)
        if (L.ring > 0 && len < have && std::max<int64_t>(0, len - L.window + 1) < have - L.ring) len = 0;
    len_[static_cast<size_t>(seq)] = len;
    return len;
}

void KvCache::clear_all() {
    for (auto& l : len_) l = 0;
}

}  // namespace moe
