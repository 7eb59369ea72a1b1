#include "dist/group.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace moe::dist {

void LocalGroup::all_to_all_v(const void* send, const int64_t* send_bytes, const int64_t* send_displs, void* recv,
                              const int64_t* recv_bytes, const int64_t* recv_displs) {
    MOE_ASSERT(send_bytes[0] == recv_bytes[0], "local all_to_all_v: ", send_bytes[0], " != ", recv_bytes[0]);
    if (send_bytes[0] > 0)
        std::memcpy(static_cast<char*>(recv) + recv_displs[0], static_cast<const char*>(send) + send_displs[0],
                    static_cast<size_t>(send_bytes[0]));
    ++counters_.collectives;
}

void LocalGroup::all_gather_v(const void* send, void* recv, const int64_t* bytes, const int64_t* displs) {
    if (bytes[0] > 0 && static_cast<char*>(recv) + displs[0] != send)
        std::memmove(static_cast<char*>(recv) + displs[0], send, static_cast<size_t>(bytes[0]));
    ++counters_.collectives;
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

void check_same(Group& g, uint64_t value, const char* what, const std::string& detail) {
    const int R = g.size();
    std::vector<uint64_t> all(static_cast<size_t>(R));
    std::vector<int64_t> bytes(static_cast<size_t>(R), 8), displs(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) displs[static_cast<size_t>(r)] = 8 * r;
    g.all_gather_v(&value, all.data(), bytes.data(), displs.data());
    std::string bad;
    for (int r = 1; r < R; ++r)
        if (all[static_cast<size_t>(r)] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
    if (!bad.empty())
        throw_error("ep", "rank ", g.rank(), ": the ", what, " differs between ranks (ranks ", bad,
                    " differ from rank 0; this rank has ", detail,
                    "); give every rank the same model file and the same flags");
}

}  // namespace moe::dist
