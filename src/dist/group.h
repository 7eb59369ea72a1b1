#pragma once
// Communication group for expert parallelism (docs/EP.md). The MoE block only talks to this
// interface, so the single-process path (LocalGroup: one rank, every collective the identity) and
// the distributed paths (MpiGroup over MPI_COMM_WORLD, ThreadGroup for in-process tests) run the
// same code.
//
// All collectives are blocking and must be called by every rank in the same order. Sizes are in
// bytes; displacements index the byte buffers. Every group counts the bytes it sends to other
// ranks (bytes to itself are a local copy and not counted), for the bytes-per-token reports.
#include <cstdint>
#include <string>

namespace moe::dist {

struct CommCounters {
    int64_t bytes_sent = 0;   // to other ranks, by all_to_all_v / all_gather_v
    int64_t collectives = 0;  // collective calls
    double seconds = 0;       // wall time inside collectives (includes waiting for slower ranks)
};

class Group {
public:
    virtual ~Group() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // Rank r sends send_bytes[d] bytes from send + send_displs[d] to every rank d and receives
    // recv_bytes[s] bytes at recv + recv_displs[s] from every rank s (recv_bytes[s] must equal what
    // s sends to r; exchange counts first with all_to_all_i64).
    virtual void all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                              const int64_t* recv_bytes, const int64_t* recv_displs) = 0;
    // Non-blocking all_to_all_v: starts the exchange and returns a handle for wait(); the buffers
    // and counts must stay untouched until then. This default runs it to completion at once.
    virtual int start_all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs,
                                   void* recv, const int64_t* recv_bytes, const int64_t* recv_displs) {
        all_to_all_v(send, send_bytes, send_displs, recv, recv_bytes, recv_displs);
        return -1;
    }
    virtual void wait(int handle) {}
    // send[d] goes to rank d; recv[s] comes from rank s (one int64 per rank each way).
    virtual void all_to_all_i64(const int64_t* send, int64_t* recv) = 0;
    // Every rank contributes bytes[rank] bytes (from send); recv gets rank s's part at displs[s].
    virtual void all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) = 0;
    // Element-wise sum / max over ranks, in place, n values.
    virtual void all_reduce_sum(double* v, int64_t n) = 0;
    virtual void all_reduce_max(double* v, int64_t n) = 0;
    virtual void barrier() = 0;
    // Node of each rank (ranks sharing memory); simulate_nodes > 0 overrides it (rank -> rank *
    // nodes / size), for placement experiments on one machine.
    virtual int node_of(int rank) const { return 0; }
    virtual std::string name() const = 0;

    const CommCounters& counters() const { return counters_; }
    void reset_counters() { counters_ = {}; }

protected:
    CommCounters counters_;
};

// One rank: every collective copies send to recv.
class LocalGroup final : public Group {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                      const int64_t* recv_bytes, const int64_t* recv_displs) override;
    void all_to_all_i64(const int64_t* send, int64_t* recv) override { recv[0] = send[0]; }
    void all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) override;
    void all_reduce_sum(double*, int64_t) override {}
    void all_reduce_max(double*, int64_t) override {}
    void barrier() override {}
    std::string name() const override { return "local"; }
};

// FNV-1a 64 of bytes, chained from h (used to compare model files and flags across ranks).
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull);

// Throws moe::Error("[ep] ...") unless every rank passed the same value; `what` names it
// ("model file", "flags") and the message lists the ranks that differ from rank 0.
void check_same(Group& g, uint64_t value, const char* what, const std::string& detail);

}  // namespace moe::dist
