#include "dist/thread_group.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"

namespace moe::dist {

ThreadHub::ThreadHub(int size) : size_(size), slots_(static_cast<size_t>(size)), bar_(size) {
    if (size < 1) throw_error("ep", "thread group of ", size, " ranks");
}

ThreadGroup::ThreadGroup(ThreadHub& hub, int rank, int simulate_nodes) : hub_(hub), rank_(rank), nodes_(simulate_nodes) {
    MOE_ASSERT(rank >= 0 && rank < hub.size(), "rank ", rank);
    if (simulate_nodes < 0 || simulate_nodes > hub.size())
        throw_error("ep", "cannot simulate ", simulate_nodes, " nodes with ", hub.size(), " ranks");
}

int ThreadGroup::node_of(int r) const { return nodes_ > 0 ? r * nodes_ / size() : 0; }

void ThreadGroup::all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                               const int64_t* recv_bytes, const int64_t* recv_displs) {
    Timer t;
    auto& me = hub_.slots_[static_cast<size_t>(rank_)];
    me.send = send;
    me.a = send_bytes;
    me.b = send_displs;
    hub_.bar_.arrive_and_wait();
    for (int s = 0; s < size(); ++s) {
        const auto& src = hub_.slots_[static_cast<size_t>(s)];
        MOE_ASSERT(src.a[rank_] == recv_bytes[s], "rank ", rank_, " expects ", recv_bytes[s], " bytes from rank ", s,
                   ", which sends ", src.a[rank_]);
        if (recv_bytes[s] > 0)
            std::memcpy(static_cast<char*>(recv) + recv_displs[s], static_cast<const char*>(src.send) + src.b[rank_],
                        static_cast<size_t>(recv_bytes[s]));
        if (s != rank_) counters_.bytes_sent += send_bytes[s];
    }
    hub_.bar_.arrive_and_wait();
    ++counters_.collectives;
    counters_.seconds += t.seconds();
}

void ThreadGroup::all_to_all_i64(const int64_t* send, int64_t* recv) {
    Timer t;
    hub_.slots_[static_cast<size_t>(rank_)].a = send;
    hub_.bar_.arrive_and_wait();
    for (int s = 0; s < size(); ++s) recv[s] = hub_.slots_[static_cast<size_t>(s)].a[rank_];
    hub_.bar_.arrive_and_wait();
    ++counters_.collectives;
    counters_.seconds += t.seconds();
}

void ThreadGroup::all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) {
    Timer t;
    hub_.slots_[static_cast<size_t>(rank_)].send = send;
    hub_.bar_.arrive_and_wait();
    for (int s = 0; s < size(); ++s) {
        const void* src = hub_.slots_[static_cast<size_t>(s)].send;
        char* dst = static_cast<char*>(recv) + displs[s];
        if (bytes[s] > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(bytes[s]));
        if (s != rank_) counters_.bytes_sent += bytes[rank_];
    }
    hub_.bar_.arrive_and_wait();
    ++counters_.collectives;
    counters_.seconds += t.seconds();
}

void ThreadGroup::reduce(double* v, int64_t n, bool max) {
    hub_.slots_[static_cast<size_t>(rank_)].v = v;
    hub_.bar_.arrive_and_wait();
    // Ranks in order 0..R-1 on every rank, so every rank gets bitwise the same sums.
    const double* first = hub_.slots_[0].v;
    std::vector<double> acc(first, first + n);
    for (int s = 1; s < size(); ++s) {
        const double* o = hub_.slots_[static_cast<size_t>(s)].v;
        for (int64_t i = 0; i < n; ++i) {
            double& a = acc[static_cast<size_t>(i)];
            a = max ? std::max(a, o[i]) : a + o[i];
        }
    }
    hub_.bar_.arrive_and_wait();
    std::copy(acc.begin(), acc.end(), v);
    ++counters_.collectives;
}

}  // namespace moe::dist
