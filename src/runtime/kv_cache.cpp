#include "runtime/kv_cache.h"

#include <cstring>
#include <new>

#include <unistd.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/kv_q8_quant.h"
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
}

// One K (or V) buffer: n_ctx * n_head_kv * head_dim elements (Q8_0: n_ctx * n_head_kv vectors of
// kv_q8_vec_bytes(head_dim)), padded to kAlign bytes.
uint64_t buffer_bytes(const KvCacheSpec& s, int64_t head_dim) {
    if (head_dim == 0) return 0;  // no V buffer (MLA)
    const bool q8 = s.type == DType::Q8_0;
    const int64_t dims[3] = {s.n_ctx, s.n_head_kv, q8 ? (head_dim + kKvQ8Block - 1) / kKvQ8Block : head_dim};
    const uint64_t n = checked_product(dims, 3, kComp, "KV cache size");
    const uint64_t unit = q8 ? static_cast<uint64_t>(kKvQ8BlockBytes) : elem_bytes(s.type);
    return checked_align(checked_mul(n, unit, kComp, "KV cache size"), kAlign, kComp, "KV cache size");
}
}  // namespace

uint64_t KvCache::bytes_for(const KvCacheSpec& s) {
    validate(s);
    const uint64_t slot = checked_add(buffer_bytes(s, s.head_dim_k), buffer_bytes(s, s.head_dim_v), kComp, "KV cache size");
    const int64_t dims[2] = {s.n_layer, s.n_seq};
    return checked_mul(slot, checked_product(dims, 2, kComp, "KV cache size"), kComp, "KV cache size");
}

void KvCache::Free::operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t(kAlign)); }

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec) {
    bytes_ = bytes_for(spec);
    k_bytes_ = buffer_bytes(spec, spec.head_dim_k);
    slot_bytes_ = k_bytes_ + buffer_bytes(spec, spec.head_dim_v);
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
    auto* p = static_cast<uint8_t*>(::operator new(n, std::align_val_t(kAlign), std::nothrow));
    if (!p)
        throw_error(kComp, "cannot allocate ", gib,
                    " GiB for the KV cache (", spec.n_layer, " layers x ", spec.n_seq, " sequences x ", spec.n_ctx,
                    " tokens); use a smaller --ctx or a smaller cache type (--kv-type f16 or q8_0)");
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
    return data_.get() + static_cast<uint64_t>(layer * spec_.n_seq + seq) * slot_bytes_;
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
    uint8_t* kb = base(layer, seq);
    uint8_t* vb = kb + k_bytes_;
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

void KvCache::truncate(int64_t seq, int64_t len) {
    MOE_ASSERT(len >= 0 && len <= length(seq), "kv cache truncate to ", len, " from ", length(seq));
    len_[static_cast<size_t>(seq)] = len;
}

void KvCache::clear_all() {
    for (auto& l : len_) l = 0;
}

}  // namespace moe
