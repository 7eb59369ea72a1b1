#pragma once
// MPI_COMM_WORLD as an ep::Group (Open MPI). The constructor calls MPI_Init (once per process) and
// the destructor MPI_Finalize, so the single-process path never needs mpirun. Collectives return
// errors (MPI_ERRORS_RETURN) and become moe::Error. A watchdog thread stops the process with one
// clear message when a collective waits longer than timeout_s (a peer died or hangs), so no rank
// hangs forever; mpirun then stops the others.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/group.h"

namespace moe::dist {

struct MpiGroupSpec {
    double timeout_s = 120;  // longest wait in one collective before the process stops
    int simulate_nodes = 0;  // > 0: pretend the ranks are spread over this many nodes
};

class MpiGroup final : public Group {
public:
    explicit MpiGroup(const MpiGroupSpec& spec = {});
    ~MpiGroup() override;
    MpiGroup(const MpiGroup&) = delete;
    MpiGroup& operator=(const MpiGroup&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                      const int64_t* recv_bytes, const int64_t* recv_displs) override;
    int start_all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                           const int64_t* recv_bytes, const int64_t* recv_displs) override;
    void wait(int handle) override;
    void all_to_all_i64(const int64_t* send, int64_t* recv) override;
    void all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) override;
    void all_reduce_sum(double* v, int64_t n) override;
    void all_reduce_max(double* v, int64_t n) override;
    void barrier() override;
    int node_of(int rank) const override { return node_[static_cast<size_t>(rank)]; }
    std::string name() const override { return "mpi"; }

private:
    void enter(const char* what);
    void leave();
    void watch();
    void to_int(const int64_t* v, std::vector<int>& out, const char* what) const;

    int rank_ = 0, size_ = 1;
    void* comm_ = nullptr;  // MPI_Comm (kept opaque so mpi.h stays out of the headers)
    bool finalize_ = false;
    std::vector<int> node_;
    std::vector<int> a_, b_, c_, d_;  // int counts/displacements for MPI
    // Outstanding MPI_Ialltoallv: request + its count arrays (MPI reads them until completion).
    struct Pending {
        bool busy = false;
        void* request = nullptr;  // MPI_Request (opaque here)
        std::vector<int> a, b, c, d;
    };
    static constexpr int kMaxPending = 4;
    Pending pending_[kMaxPending];
    double timeout_s_;
    std::atomic<uint64_t> entered_ns_{0};
    std::atomic<const char*> what_{nullptr};
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread watchdog_;
};

}  // namespace moe::dist
