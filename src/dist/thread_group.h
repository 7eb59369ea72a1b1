#pragma once
// R ranks as R threads of one process (for tests and experiments without mpirun): each thread
// owns one ThreadGroup view of a shared ThreadHub; collectives meet at a std::barrier and copy
// straight out of the peers' buffers.
//
//   dist::ThreadHub hub(4);
//   std::thread([&] { dist::ThreadGroup g(hub, 2); ... });
#include <barrier>
#include <vector>

#include "dist/group.h"

namespace moe::dist {

class ThreadHub {
public:
    explicit ThreadHub(int size);
    int size() const { return size_; }

private:
    friend class ThreadGroup;
    struct Slot {
        const void* send = nullptr;
        const int64_t* a = nullptr;  // send_bytes / bytes
        const int64_t* b = nullptr;  // send_displs / displs
        double* v = nullptr;
    };
    int size_;
    std::vector<Slot> slots_;
    std::barrier<> bar_;
};

class ThreadGroup final : public Group {
public:
    ThreadGroup(ThreadHub& hub, int rank, int simulate_nodes = 0);
    int rank() const override { return rank_; }
    int size() const override { return hub_.size(); }
    void all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                      const int64_t* recv_bytes, const int64_t* recv_displs) override;
    void all_to_all_i64(const int64_t* send, int64_t* recv) override;
    void all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) override;
    void all_reduce_sum(double* v, int64_t n) override { reduce(v, n, false); }
    void all_reduce_max(double* v, int64_t n) override { reduce(v, n, true); }
    void barrier() override { hub_.bar_.arrive_and_wait(); }
    int node_of(int rank) const override;
    std::string name() const override { return "threads"; }

private:
    void reduce(double* v, int64_t n, bool max);
    ThreadHub& hub_;
    int rank_;
    int nodes_;
};

}  // namespace moe::dist
