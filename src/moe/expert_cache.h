#pragma once
// The tiered expert store: routed experts live in a fixed number of slots of anonymous memory
// (one slot = one expert of one layer: its gate, up and down slices, each a contiguous byte range
// of the GGUF ffn_*_exps tensor), filled on a miss by ExpertReader (O_DIRECT / io_uring,
// expert_io.h) and evicted by a CachePolicy (cache_policy.h). Everything else of the model stays
// in the mapping. Slot layout (A = 4096, the O_DIRECT alignment):
//
//   [gate region | up region | down region], region c = round_up(max slice bytes of c, A) + A
//
// a slice at file offset o is read as the aligned range [floor(o, A), ceil(o + n, A)) and its
// view starts o % A bytes into the region, so the kernels see exactly the file's bytes.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "moe/cache_policy.h"
#include "moe/expert_io.h"
#include "moe/expert_store.h"

namespace moe {

// Where one MoE layer's expert stacks are in the file.
struct ExpertLayerFile {
    int layer = -1;
    uint64_t offset[3] = {0, 0, 0};  // file offset of expert 0 (gate, up, down)
    uint64_t stride[3] = {0, 0, 0};  // bytes per expert (= bytes of one slice)
};

struct ExpertCacheSpec {
    std::string path;                  // the model file
    int n_layer = 0, n_expert = 0;     // key space: layer * n_expert + expert
    std::vector<ExpertLayerFile> layers;  // MoE layers only
    int n_slots = 0;
    std::string policy = "lru";
    RoutingProfile profile;            // for "pinned"
    ExpertIo io = ExpertIo::Uring;
    bool direct = true;
    bool prefetch = true;              // act on prefetch() hints
};

// Counters of one layer (or the total).
struct ExpertCacheCounters {
    int64_t hits = 0, misses = 0, evictions = 0;
    uint64_t bytes_read = 0;  // from the file, alignment padding included
    double stall_s = 0;       // wall time acquire() waited for reads
    int64_t prefetch_issued = 0;  // loads started by prefetch()
    int64_t prefetch_used = 0;    // of those, acquired before eviction (counted as hits)
    double prefetch_precision() const {
        return prefetch_issued ? static_cast<double>(prefetch_used) / static_cast<double>(prefetch_issued) : 0.0;
    }
    // Share of the loads acquire() needed that a prefetch had started.
    double prefetch_recall() const {
        const int64_t need = prefetch_used + misses;
        return need ? static_cast<double>(prefetch_used) / static_cast<double>(need) : 0.0;
    }
    double hit_rate() const {
        const int64_t a = hits + misses;
        return a ? static_cast<double>(hits) / static_cast<double>(a) : 0.0;
    }
    void add(const ExpertCacheCounters& o);
};

class ExpertCache final : public ExpertStore {
public:
    // Bytes of one slot for these layers (the largest slices of each kind, aligned, see above).
    static uint64_t slot_bytes(const std::vector<ExpertLayerFile>& layers);

    explicit ExpertCache(ExpertCacheSpec spec);
    ~ExpertCache() override;

    void acquire(int layer, const int32_t* ids, int n, ExpertSlices* out) override;
    void acquire_async(int layer, const int32_t* ids, int n, ExpertSlices* out) override;
    int wait_ready(uint8_t* ready, int n) override;
    void release(int layer) override;
    // Starts loads of the experts not resident (evicting by the policy; never held or loading
    // slots); acquire() later waits for them. A failed prefetch is reported by that acquire.
    void prefetch(int layer, const int32_t* ids, int n) override;
    int capacity() const override { return spec_.n_slots; }
    // When every expert of every MoE layer has a slot: loads all that are not resident and waits
    // (a benchmark's warm-up, so timed runs see the steady state); returns false, loading nothing,
    // when they do not all fit. Counted like demand loads (reset_counters afterwards).
    bool load_all();

    uint64_t slot_bytes() const { return slot_bytes_; }
    uint64_t bytes() const { return slot_bytes_ * static_cast<uint64_t>(spec_.n_slots); }
    const char* policy() const { return policy_->name(); }
    std::string io_describe() const { return reader_.describe(); }
    const std::vector<ExpertCacheCounters>& layer_counters() const { return per_layer_; }  // [n_layer]
    ExpertCacheCounters total() const;
    void reset_counters();
    // One line: slots, policy, I/O, hit rate, bytes read, stall, evictions.
    std::string summary() const;
    // {"slots":..,"slot_bytes":..,"policy":..,"io":..,"total":{..},"layers":[{..}, ..]}
    std::string json() const;

private:
    ExpertSlices view(int slot, const ExpertLayerFile& lf, int expert) const;
    int take_slot(ExpertCacheCounters& st);  // a free slot, else the policy's victim (or -1)
    void start_load(int slot, const ExpertLayerFile& lf, int expert);
    void reap();              // finished loads: count bytes, make evictable; failed: forget
    void forget(int slot);    // back to the free list
    // A held load failed (err): lets every read land, forgets the held slots that did not load,
    // releases, and rethrows err.
    [[noreturn]] void fail_held(int layer, std::exception_ptr err);
    int& where(int64_t key) { return where_[static_cast<size_t>(key)]; }

    ExpertCacheSpec spec_;
    std::vector<const ExpertLayerFile*> by_layer_;  // [n_layer] or null (dense layer)
    uint64_t region_[3] = {0, 0, 0};
    uint64_t slot_bytes_ = 0;
    char* mem_ = nullptr;                       // n_slots * slot_bytes_, anonymous mapping
    std::unique_ptr<CachePolicy> policy_;
    ExpertReader reader_;
    std::vector<int> where_;                    // [n_layer * n_expert] key -> slot or -1 (no allocation on a miss)
    std::vector<int64_t> slot_key_;             // [n_slots] key or -1
    std::vector<uint8_t> evictable_;            // [n_slots] !held && !loading
    std::vector<uint8_t> held_flag_, loading_, prefetched_;  // [n_slots]
    std::vector<uint8_t> fresh_;                // [n_slots] loaded since the file was last checked unchanged
    std::vector<ReadOp> slot_ops_;              // [n_slots * 3] the slot's gate/up/down reads
    std::vector<int> free_;                     // slots never filled (or freed by a failed load)
    std::vector<int> held_;                     // slots of the current acquire, in ids order
    std::vector<int> loading_list_;             // slots with reads in flight
    std::vector<uint8_t> ready_all_;            // acquire(): wait_ready over all
    int held_layer_ = -1;                       // layer of the current acquire
    std::exception_ptr changed_;                // set when the file changed on disk: every later acquire throws it
    int64_t tick_ = 0;
    std::vector<ExpertCacheCounters> per_layer_;
};

}  // namespace moe
