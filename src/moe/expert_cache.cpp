#include "moe/expert_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/timer.h"

namespace moe {

namespace {
constexpr uint64_t A = ExpertReader::kIoAlign;
constexpr const char* kTensor[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
}  // namespace

void ExpertCacheCounters::add(const ExpertCacheCounters& o) {
    hits += o.hits;
    misses += o.misses;
    evictions += o.evictions;
    bytes_read += o.bytes_read;
    stall_s += o.stall_s;
    prefetch_issued += o.prefetch_issued;
    prefetch_used += o.prefetch_used;
}

uint64_t ExpertCache::slot_bytes(const std::vector<ExpertLayerFile>& layers) {
    uint64_t total = 0;
    for (int c = 0; c < 3; ++c) {
        uint64_t m = 0;
        for (const auto& l : layers) m = std::max(m, l.stride[c]);
        total += round_up(m, A) + A;
    }
    return total;
}

ExpertCache::ExpertCache(ExpertCacheSpec spec)
    : spec_(std::move(spec)), reader_(spec_.path, spec_.io, spec_.direct) {
    if (spec_.n_slots < 1) throw_error("experts", "expert cache with ", spec_.n_slots, " slots");
    if (spec_.policy == "pinned" && !spec_.profile.empty()) {
        RoutingProfile& p = spec_.profile;
        if (p.n_expert > spec_.n_expert || p.n_layer > spec_.n_layer)
            throw_error("experts", "the routing profile has ", p.n_layer, " layers x ", p.n_expert,
                        " experts, more than the model's ", spec_.n_layer, " x ", spec_.n_expert,
                        "; use a profile recorded with this model");
        if (p.n_expert < spec_.n_expert || p.n_layer < spec_.n_layer) {
            // A trace only shows the experts it used: widen to the model's key space.
            std::vector<int64_t> c(static_cast<size_t>(spec_.n_layer) * static_cast<size_t>(spec_.n_expert), 0);
            for (int l = 0; l < p.n_layer; ++l)
                for (int e = 0; e < p.n_expert; ++e)
                    c[static_cast<size_t>(l) * spec_.n_expert + e] = p.counts[static_cast<size_t>(l) * p.n_expert + e];
            p = {spec_.n_layer, spec_.n_expert, std::move(c)};
        }
    }
    policy_ = make_cache_policy(spec_.policy, spec_.profile);
    by_layer_.assign(static_cast<size_t>(spec_.n_layer), nullptr);
    for (const auto& l : spec_.layers) {
        MOE_ASSERT(l.layer >= 0 && l.layer < spec_.n_layer, "layer ", l.layer);
        by_layer_[static_cast<size_t>(l.layer)] = &l;
    }
    for (int c = 0; c < 3; ++c) {
        uint64_t m = 0;
        for (const auto& l : spec_.layers) m = std::max(m, l.stride[c]);
        region_[c] = round_up(m, A) + A;
    }
    slot_bytes_ = region_[0] + region_[1] + region_[2];
    const size_t total = static_cast<size_t>(slot_bytes_) * static_cast<size_t>(spec_.n_slots);
    void* m = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        throw_error("experts", "cannot allocate the expert cache (", spec_.n_slots, " slots, ", total >> 20,
                    " MiB); lower --mem");
    advise_huge(m, total);  // slots hold weights the GEMVs stream: 2 MiB pages (core/huge_pages.h)
    mem_ = static_cast<char*>(m);
    policy_->reset(spec_.n_slots);
    slot_key_.assign(static_cast<size_t>(spec_.n_slots), -1);
    evictable_.assign(static_cast<size_t>(spec_.n_slots), 1);
    for (int s = spec_.n_slots - 1; s >= 0; --s) free_.push_back(s);
    policy_->reserve_keys(static_cast<int64_t>(spec_.n_layer) * spec_.n_expert);
    per_layer_.assign(static_cast<size_t>(spec_.n_layer), {});
    where_.assign(static_cast<size_t>(spec_.n_layer) * static_cast<size_t>(spec_.n_expert), -1);
    reader_.reserve(3 * static_cast<size_t>(spec_.n_slots));
    held_.reserve(static_cast<size_t>(spec_.n_slots));
    held_flag_.assign(static_cast<size_t>(spec_.n_slots), 0);
    loading_.assign(static_cast<size_t>(spec_.n_slots), 0);
    prefetched_.assign(static_cast<size_t>(spec_.n_slots), 0);
    fresh_.assign(static_cast<size_t>(spec_.n_slots), 0);
    slot_ops_.resize(3 * static_cast<size_t>(spec_.n_slots));
    loading_list_.reserve(static_cast<size_t>(spec_.n_slots));
    ready_all_.reserve(static_cast<size_t>(spec_.n_slots));
}

ExpertCache::~ExpertCache() {
    reader_.drain();  // nothing may land in the slots after they are unmapped
    if (mem_) ::munmap(mem_, static_cast<size_t>(slot_bytes_) * static_cast<size_t>(spec_.n_slots));
}

ExpertSlices ExpertCache::view(int slot, const ExpertLayerFile& lf, int expert) const {
    char* base = mem_ + static_cast<size_t>(slot) * slot_bytes_;
    const char* p[3];
    for (int c = 0; c < 3; ++c) {
        const uint64_t off = lf.offset[c] + static_cast<uint64_t>(expert) * lf.stride[c];
        p[c] = base + off % A;
        base += region_[c];
    }
    return {p[0], p[1], p[2]};
}

int ExpertCache::take_slot(ExpertCacheCounters& st) {
    int slot;
    if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
        return slot;
    }
    slot = policy_->victim(evictable_.data(), tick_);
    if (slot < 0) return -1;
    where(slot_key_[static_cast<size_t>(slot)]) = -1;
    prefetched_[static_cast<size_t>(slot)] = 0;
    ++st.evictions;
    return slot;
}

void ExpertCache::start_load(int slot, const ExpertLayerFile& lf, int expert) {
    char* base = mem_ + static_cast<size_t>(slot) * slot_bytes_;
    ReadOp* ops = &slot_ops_[3 * static_cast<size_t>(slot)];
    for (int c = 0; c < 3; ++c) {
        const uint64_t off = lf.offset[c] + static_cast<uint64_t>(expert) * lf.stride[c];
        ReadOp& op = ops[c];
        op.offset = off / A * A;
        op.len = round_up(off + lf.stride[c], A) - op.offset;
        op.need = off + lf.stride[c] - op.offset;
        op.dst = base;
        op.layer = lf.layer;
        op.expert = expert;
        op.tensor = kTensor[c];
        base += region_[c];
    }
    loading_[static_cast<size_t>(slot)] = 1;
    fresh_[static_cast<size_t>(slot)] = 1;
    evictable_[static_cast<size_t>(slot)] = 0;
    loading_list_.push_back(slot);
    reader_.submit(ops, 3);
}

void ExpertCache::forget(int slot) {
    const size_t s = static_cast<size_t>(slot);
    if (slot_key_[s] >= 0) where(slot_key_[s]) = -1;
    slot_key_[s] = -1;
    loading_[s] = prefetched_[s] = fresh_[s] = 0;
    evictable_[s] = !held_flag_[s];
    free_.push_back(slot);
}

void ExpertCache::reap() {
    size_t keep = 0;
    for (size_t i = 0; i < loading_list_.size(); ++i) {
        const int slot = loading_list_[i];
        const size_t s = static_cast<size_t>(slot);
        const ReadOp* ops = &slot_ops_[3 * s];
        if (!(ops[0].finished && ops[1].finished && ops[2].finished)) {
            loading_list_[keep++] = slot;
            continue;
        }
        if (!ops[0].error.empty() || !ops[1].error.empty() || !ops[2].error.empty()) {
            if (held_flag_[s]) {  // the acquire holding it reports the error (wait_ready)
                loading_list_[keep++] = slot;
                continue;
            }
            forget(slot);  // a later acquire loads it again and reports the error
            continue;
        }
        per_layer_[static_cast<size_t>(ops[0].layer)].bytes_read += ops[0].done + ops[1].done + ops[2].done;
        loading_[s] = 0;
        evictable_[s] = !held_flag_[s];
    }
    loading_list_.resize(keep);
}

void ExpertCache::acquire(int layer, const int32_t* ids, int n, ExpertSlices* out) {
    acquire_async(layer, ids, n, out);
    ready_all_.assign(static_cast<size_t>(n), 0);
    while (wait_ready(ready_all_.data(), n) > 0) {
    }
}

void ExpertCache::acquire_async(int layer, const int32_t* ids, int n, ExpertSlices* out) {
    MOE_ASSERT(layer >= 0 && layer < spec_.n_layer && by_layer_[static_cast<size_t>(layer)], "layer ", layer);
    MOE_ASSERT(held_.empty(), "acquire before release");
    MOE_ASSERT(n <= spec_.n_slots, n, " experts > ", spec_.n_slots, " slots");
    // The file changed under the cache once: no call may run, even on slots that are all resident
    // (the model's weights no longer match its file; the error says to start again).
    if (changed_) std::rethrow_exception(changed_);
    const ExpertLayerFile& lf = *by_layer_[static_cast<size_t>(layer)];
    ExpertCacheCounters& st = per_layer_[static_cast<size_t>(layer)];
    reader_.poll();
    reap();
    // Two passes: the requested experts already resident (or on their way) are held first, so a
    // miss earlier in ids can never evict one this same call asks for later (that would read it
    // again, and whether it happened depended on which prefetches had landed: a timing race).
    held_.assign(static_cast<size_t>(n), -1);  // within the reserved n_slots: no allocation
    auto hold = [&](int i, int slot) {
        evictable_[static_cast<size_t>(slot)] = 0;
        held_flag_[static_cast<size_t>(slot)] = 1;
        held_[static_cast<size_t>(i)] = slot;
        out[i] = view(slot, lf, ids[i]);
    };
    auto hit = [&](int i, int slot, int64_t key) {
        ++st.hits;
        policy_->on_hit(slot, key, tick_);
        if (prefetched_[static_cast<size_t>(slot)]) {
            ++st.prefetch_used;
            prefetched_[static_cast<size_t>(slot)] = 0;
        }
        hold(i, slot);
    };
    for (int i = 0; i < n; ++i) MOE_ASSERT(ids[i] >= 0 && ids[i] < spec_.n_expert, "expert ", ids[i]);
    for (int i = 0; i < n; ++i) {  // one tick per access: the hits here, the misses below
        const int64_t key = static_cast<int64_t>(layer) * spec_.n_expert + ids[i];
        if (const int slot = where(key); slot >= 0) {
            ++tick_;
            hit(i, slot, key);
        }
    }
    for (int i = 0; i < n; ++i) {
        if (held_[static_cast<size_t>(i)] >= 0) continue;
        const int64_t key = static_cast<int64_t>(layer) * spec_.n_expert + ids[i];
        ++tick_;
        int slot = where(key);
        if (slot >= 0) {  // a repeated id, inserted earlier in this pass
            hit(i, slot, key);
            continue;
        }
        ++st.misses;
        slot = take_slot(st);
        if (slot < 0) {
            // Every slot not held by this call has a prefetch in flight: let them land.
            Timer t;
            reader_.drain();
            reap();
            st.stall_s += t.seconds();
            slot = take_slot(st);
        }
        MOE_ASSERT(slot >= 0, "no evictable slot");
        slot_key_[static_cast<size_t>(slot)] = key;
        where(key) = slot;
        policy_->on_insert(slot, key, tick_);
        start_load(slot, lf, ids[i]);
        hold(i, slot);
    }
    held_layer_ = layer;
}

int ExpertCache::wait_ready(uint8_t* ready, int n) {
    MOE_ASSERT(n == static_cast<int>(held_.size()), "wait_ready for ", n, " experts, ", held_.size(), " held");
    reader_.poll();
    Timer t;
    bool waited = false;
    for (;;) {
        int got = 0, left = 0;
        for (int i = 0; i < n; ++i) {
            if (ready[i]) continue;
            const int slot = held_[static_cast<size_t>(i)];
            const size_t s = static_cast<size_t>(slot);
            if (loading_[s]) {
                const ReadOp* ops = &slot_ops_[3 * s];
                if (!(ops[0].finished && ops[1].finished && ops[2].finished)) {
                    ++left;
                    continue;
                }
                if (!ops[0].error.empty() || !ops[1].error.empty() || !ops[2].error.empty()) {
                    std::exception_ptr err;
                    try {
                        reader_.wait(&slot_ops_[3 * s], 3);  // throws the read's error
                    } catch (...) {
                        err = std::current_exception();
                    }
                    fail_held(held_layer_, err);
                }
            }
            // Landed (now or earlier, maybe by a prefetch): the bytes are the file's only if it
            // did not change under the read.
            if (fresh_[s]) {
                std::exception_ptr err;
                try {
                    reader_.check_unchanged(slot_ops_[3 * s]);
                } catch (...) {
                    err = std::current_exception();
                }
                if (err) {
                    changed_ = err;
                    fail_held(held_layer_, err);
                }
                fresh_[s] = 0;
            }
            ready[i] = 1;
            ++got;
        }
        if (got > 0 || left == 0) {
            if (waited) per_layer_[static_cast<size_t>(held_layer_)].stall_s += t.seconds();
            reap();
            return got;
        }
        reader_.wait_any();
        waited = true;
    }
}

void ExpertCache::fail_held(int layer, std::exception_ptr err) {
    // Let every read in flight land so nothing is written into a slot later, and forget the held
    // slots that did not load (or loaded from a changed file).
    reader_.drain();
    std::vector<int> bad;
    for (int s : held_)
        if (s >= 0 && (loading_[static_cast<size_t>(s)] || fresh_[static_cast<size_t>(s)])) bad.push_back(s);
    release(layer);
    reap();  // failed loads of the (now released) slots are forgotten here
    for (int s : bad)
        if (slot_key_[static_cast<size_t>(s)] >= 0) forget(s);  // landed but unusable (file changed)
    std::rethrow_exception(err);
}

void ExpertCache::prefetch(int layer, const int32_t* ids, int n) {
    // pread has no reads in flight: a prefetch would only move the stall, so it is off there.
    if (!spec_.prefetch || reader_.io() != ExpertIo::Uring || layer < 0 || layer >= spec_.n_layer || !by_layer_[static_cast<size_t>(layer)]) return;
    const ExpertLayerFile& lf = *by_layer_[static_cast<size_t>(layer)];
    ExpertCacheCounters& st = per_layer_[static_cast<size_t>(layer)];
    reader_.poll();
    reap();
    for (int i = 0; i < n; ++i) {
        const int64_t key = static_cast<int64_t>(layer) * spec_.n_expert + ids[i];
        if (where(key) >= 0) continue;  // resident or on its way
        const int slot = take_slot(st);
        if (slot < 0) break;  // every slot held or loading
        slot_key_[static_cast<size_t>(slot)] = key;
        where(key) = slot;
        policy_->on_insert(slot, key, tick_);
        prefetched_[static_cast<size_t>(slot)] = 1;
        ++st.prefetch_issued;
        start_load(slot, lf, ids[i]);
    }
}

bool ExpertCache::load_all() {
    if (static_cast<int64_t>(spec_.n_slots) < static_cast<int64_t>(spec_.layers.size()) * spec_.n_expert) return false;
    MOE_ASSERT(held_.empty(), "load_all during an acquire");
    reader_.poll();
    reap();
    for (const auto& lf : spec_.layers)
        for (int e = 0; e < spec_.n_expert; ++e) {
            const int64_t key = static_cast<int64_t>(lf.layer) * spec_.n_expert + e;
            if (where(key) >= 0) continue;
            ExpertCacheCounters& st = per_layer_[static_cast<size_t>(lf.layer)];
            const int slot = take_slot(st);
            MOE_ASSERT(slot >= 0, "no free slot although every expert fits");
            ++st.misses;
            slot_key_[static_cast<size_t>(slot)] = key;
            where(key) = slot;
            policy_->on_insert(slot, key, ++tick_);
            start_load(slot, lf, e);
        }
    reader_.drain();
    std::exception_ptr err;
    for (int s : loading_list_) {
        ReadOp* ops = &slot_ops_[3 * static_cast<size_t>(s)];
        if (!err && (!ops[0].error.empty() || !ops[1].error.empty() || !ops[2].error.empty())) try {
                reader_.wait(ops, 3);  // throws the read's error
            } catch (...) {
                err = std::current_exception();
            }
    }
    reap();  // failed loads are forgotten here
    if (err) std::rethrow_exception(err);
    return true;
}

void ExpertCache::release(int) {
    for (int s : held_) {
        if (s < 0) continue;  // an acquire that threw before this id got its slot
        held_flag_[static_cast<size_t>(s)] = 0;
        evictable_[static_cast<size_t>(s)] = !loading_[static_cast<size_t>(s)];
    }
    held_.clear();
}

ExpertCacheCounters ExpertCache::total() const {
    ExpertCacheCounters t;
    for (const auto& c : per_layer_) t.add(c);
    return t;
}

void ExpertCache::reset_counters() {
    per_layer_.assign(per_layer_.size(), {});
    // Prefetches issued before the reset are not counted as issued after it: not as used either.
    std::fill(prefetched_.begin(), prefetched_.end(), 0);
}

std::string ExpertCache::summary() const {
    const ExpertCacheCounters t = total();
    char pf[160] = "off";
    if (spec_.prefetch)
        std::snprintf(pf, sizeof pf, "%lld issued, precision %.1f%%, recall %.1f%%",
                      static_cast<long long>(t.prefetch_issued), 100.0 * t.prefetch_precision(),
                      100.0 * t.prefetch_recall());
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "expert cache: %d slots x %.2f MiB = %.1f MiB, policy %s, %s: hit rate %.1f%% (%lld hits, %lld "
                  "misses), read %.1f MiB, I/O stall %.3f s, %lld evictions, prefetch %s",
                  spec_.n_slots, static_cast<double>(slot_bytes_) / (1 << 20),
                  static_cast<double>(bytes()) / (1 << 20), policy(), io_describe().c_str(), 100.0 * t.hit_rate(),
                  static_cast<long long>(t.hits), static_cast<long long>(t.misses),
                  static_cast<double>(t.bytes_read) / (1 << 20), t.stall_s, static_cast<long long>(t.evictions),
                  pf);
    return buf;
}

std::string ExpertCache::json() const {
    auto obj = [](const ExpertCacheCounters& c) {
        std::ostringstream o;
        o << "{\"hits\":" << c.hits << ",\"misses\":" << c.misses << ",\"hit_rate\":" << c.hit_rate()
          << ",\"bytes_read\":" << c.bytes_read << ",\"stall_s\":" << c.stall_s << ",\"evictions\":" << c.evictions
          << ",\"prefetch_issued\":" << c.prefetch_issued << ",\"prefetch_used\":" << c.prefetch_used
          << ",\"prefetch_precision\":" << c.prefetch_precision() << ",\"prefetch_recall\":" << c.prefetch_recall()
          << "}";
        return o.str();
    };
    std::ostringstream o;
    o << "{\"slots\":" << spec_.n_slots << ",\"slot_bytes\":" << slot_bytes_ << ",\"policy\":\"" << policy()
      << "\",\"io\":\"" << io_describe() << "\",\"total\":" << obj(total()) << ",\"layers\":[";
    bool first = true;
    for (const auto& l : spec_.layers) {
        o << (first ? "" : ",") << "{\"layer\":" << l.layer << ",\"counters\":"
          << obj(per_layer_[static_cast<size_t>(l.layer)]) << "}";
        first = false;
    }
    o << "]}";
    return o.str();
}

}  // namespace moe
