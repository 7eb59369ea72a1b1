#include "dist/mpi_group.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"

namespace moe::dist {
namespace {

MPI_Comm as_comm(void* c) { return reinterpret_cast<MPI_Comm>(c); }

void check(int rc, const char* what, int rank) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw_error("ep", "rank ", rank, ": MPI ", what, " failed: ", std::string(msg, static_cast<size_t>(len)),
                " (a peer rank probably died; see mpirun's messages)");
}

}  // namespace

MpiGroup::MpiGroup(const MpiGroupSpec& spec) : timeout_s_(spec.timeout_s) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw_error("ep", "MPI_Init failed");
        finalize_ = true;
    }
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    comm_ = reinterpret_cast<void*>(dup);
    MPI_Comm_rank(dup, &rank_);
    MPI_Comm_size(dup, &size_);
    node_.assign(static_cast<size_t>(size_), 0);
    if (spec.simulate_nodes > 0) {
        if (spec.simulate_nodes > size_)
            throw_error("ep", "--ep-nodes ", spec.simulate_nodes, " is more than the ", size_, " ranks");
        for (int r = 0; r < size_; ++r) node_[static_cast<size_t>(r)] = r * spec.simulate_nodes / size_;
    } else {
        // Nodes = shared-memory groups; node id = dense index of each group's lowest world rank.
        MPI_Comm local;
        MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
        int leader = rank_;
        MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, local);
        MPI_Comm_free(&local);
        std::vector<int> leaders(static_cast<size_t>(size_));
        MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, dup);
        std::vector<int> uniq = leaders;
        std::sort(uniq.begin(), uniq.end());
        uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
        for (int r = 0; r < size_; ++r)
            node_[static_cast<size_t>(r)] = static_cast<int>(
                std::lower_bound(uniq.begin(), uniq.end(), leaders[static_cast<size_t>(r)]) - uniq.begin());
    }
    a_.resize(static_cast<size_t>(size_));
    b_.resize(static_cast<size_t>(size_));
    c_.resize(static_cast<size_t>(size_));
    d_.resize(static_cast<size_t>(size_));
    if (timeout_s_ > 0) watchdog_ = std::thread([this] { watch(); });
}

MpiGroup::~MpiGroup() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    MPI_Comm c = as_comm(comm_);
    MPI_Comm_free(&c);
    if (finalize_) MPI_Finalize();
}

// Polls every 100 ms; a collective older than the timeout ends the process (exit code 3) with
// one message naming it: the other ranks see this rank exit and mpirun stops them.
void MpiGroup::watch() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
        cv_.wait_for(lk, std::chrono::milliseconds(100));
        const uint64_t t0 = entered_ns_.load();
        if (t0 == 0) continue;
        const double waited = static_cast<double>(Timer::now_ns() - t0) * 1e-9;
        if (waited > timeout_s_) {
            std::fprintf(stderr,
                         "moe: [ep] rank %d: MPI %s has waited %.1f s (limit --ep-timeout %.0f s): another rank "
                         "died or hangs; stopping\n",
                         rank_, what_.load(), waited, timeout_s_);
            std::fflush(stderr);
            ::_exit(3);
        }
    }
}

void MpiGroup::enter(const char* what) {
    what_.store(what);
    entered_ns_.store(Timer::now_ns());
}

void MpiGroup::leave() {
    counters_.seconds += static_cast<double>(Timer::now_ns() - entered_ns_.load()) * 1e-9;
    entered_ns_.store(0);
    ++counters_.collectives;
}

void MpiGroup::to_int(const int64_t* v, std::vector<int>& out, const char* what) const {
    for (int r = 0; r < size_; ++r) {
        if (v[r] < 0 || v[r] > INT_MAX)
            throw_error("ep", "rank ", rank_, ": ", what, " of ", v[r], " bytes does not fit one MPI message "
                        "(2 GiB); use a smaller --batch");
        out[static_cast<size_t>(r)] = static_cast<int>(v[r]);
    }
}

void MpiGroup::all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                            const int64_t* recv_bytes, const int64_t* recv_displs) {
    to_int(send_bytes, a_, "all-to-all send");
    to_int(send_displs, b_, "all-to-all send offset");
    to_int(recv_bytes, c_, "all-to-all receive");
    to_int(recv_displs, d_, "all-to-all receive offset");
    for (int r = 0; r < size_; ++r)
        if (r != rank_) counters_.bytes_sent += send_bytes[r];
    enter("all_to_all_v");
    const int rc = MPI_Alltoallv(send, a_.data(), b_.data(), MPI_BYTE, recv, c_.data(), d_.data(), MPI_BYTE,
                                 as_comm(comm_));
    leave();
    check(rc, "Alltoallv", rank_);
}

int MpiGroup::start_all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                                 const int64_t* recv_bytes, const int64_t* recv_displs) {
    int h = 0;
    while (h < kMaxPending && pending_[h].busy) ++h;
    MOE_ASSERT(h < kMaxPending, "more than ", kMaxPending, " outstanding all-to-alls");
    Pending& p = pending_[h];
    for (auto* v : {&p.a, &p.b, &p.c, &p.d}) v->resize(static_cast<size_t>(size_));
    to_int(send_bytes, p.a, "all-to-all send");
    to_int(send_displs, p.b, "all-to-all send offset");
    to_int(recv_bytes, p.c, "all-to-all receive");
    to_int(recv_displs, p.d, "all-to-all receive offset");
    for (int r = 0; r < size_; ++r)
        if (r != rank_) counters_.bytes_sent += send_bytes[r];
    MPI_Request req;
    enter("Ialltoallv (start)");
    const int rc = MPI_Ialltoallv(send, p.a.data(), p.b.data(), MPI_BYTE, recv, p.c.data(), p.d.data(), MPI_BYTE,
                                  as_comm(comm_), &req);
    leave();
    check(rc, "Ialltoallv", rank_);
    static_assert(sizeof(MPI_Request) <= sizeof(void*), "MPI_Request must fit a pointer");
    std::memcpy(&p.request, &req, sizeof req);
    p.busy = true;
    return h;
}

void MpiGroup::wait(int h) {
    if (h < 0) return;
    MOE_ASSERT(h < kMaxPending && pending_[h].busy, "wait on a handle that is not pending: ", h);
    Pending& p = pending_[h];
    MPI_Request req;
    std::memcpy(&req, &p.request, sizeof req);
    enter("Wait (all-to-all)");
    const int rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    leave();
    p.busy = false;
    check(rc, "Wait", rank_);
}

void MpiGroup::all_to_all_i64(const int64_t* send, int64_t* recv) {
    enter("all_to_all (counts)");
    const int rc = MPI_Alltoall(send, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, as_comm(comm_));
    leave();
    check(rc, "Alltoall", rank_);
}

void MpiGroup::all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) {
    to_int(bytes, a_, "all-gather");
    to_int(displs, b_, "all-gather offset");
    counters_.bytes_sent += bytes[rank_] * (size_ - 1);
    const bool in_place = static_cast<const char*>(recv) + displs[rank_] == send;
    enter("all_gather_v");
    const int rc = MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, a_[static_cast<size_t>(rank_)], MPI_BYTE, recv,
                                  a_.data(), b_.data(), MPI_BYTE, as_comm(comm_));
    leave();
    check(rc, "Allgatherv", rank_);
}

void MpiGroup::all_reduce_sum(double* v, int64_t n) {
    enter("all_reduce");
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, as_comm(comm_));
    leave();
    check(rc, "Allreduce", rank_);
}

void MpiGroup::all_reduce_max(double* v, int64_t n) {
    enter("all_reduce");
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, as_comm(comm_));
    leave();
    check(rc, "Allreduce", rank_);
}

void MpiGroup::barrier() {
    enter("barrier");
    const int rc = MPI_Barrier(as_comm(comm_));
    leave();
    check(rc, "Barrier", rank_);
}

}  // namespace moe::dist
