#include "core/mem_limit.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace moe {

namespace {
// A limit file's value; false for "max", absent files and v1's "unlimited" (~2^63).
bool read_limit(const std::string& path, uint64_t& out) {
    std::ifstream f(path);
    std::string s;
    if (!f || !(f >> s) || s == "max") return false;
    try {
        const unsigned long long v = std::stoull(s);
        if (v == 0 || v >= (1ull << 60)) return false;
        out = v;
        return true;
    } catch (...) {
        return false;
    }
}
}  // namespace

MemLimit process_memory_limit() {
    // /proc/self/cgroup: "0::/path" (v2) and "N:memory:/path" (v1).
    std::ifstream cg("/proc/self/cgroup");
    std::string line, v2, v1;
    while (std::getline(cg, line)) {
        if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a != std::string::npos && b != std::string::npos) {
            std::stringstream ctrls(line.substr(a + 1, b - a - 1));
            std::string c;
            while (std::getline(ctrls, c, ','))
                if (c == "memory") v1 = line.substr(b + 1);
        }
    }
    MemLimit m;
    uint64_t v = 0;
    if (!v2.empty()) {
        // Walk up from the process's cgroup: a parent's limit applies too (the smallest wins).
        std::string p = v2;
        for (;;) {
            const std::string f = "/sys/fs/cgroup" + (p == "/" ? std::string() : p) + "/memory.max";
            if (read_limit(f, v) && (m.bytes == 0 || v < m.bytes)) m = {v, "cgroup v2 " + f};
            if (p == "/" || p.empty()) break;
            const size_t s = p.rfind('/');
            p = s == 0 ? "/" : p.substr(0, s);
        }
    }
    if (m.bytes == 0 && !v1.empty()) {
        const std::string f = "/sys/fs/cgroup/memory" + (v1 == "/" ? std::string() : v1) + "/memory.limit_in_bytes";
        if (read_limit(f, v)) m = {v, "cgroup v1 " + f};
    }
    if (m.bytes != 0) return m;
    std::ifstream mi("/proc/meminfo");
    while (std::getline(mi, line))
        if (line.rfind("MemAvailable:", 0) == 0) {
            std::istringstream is(line.substr(13));
            uint64_t kb = 0;
            if (is >> kb && kb > 0) return {kb * 1024, "MemAvailable (/proc/meminfo)"};
        }
    throw_error("mem", "--mem auto: found no cgroup memory limit and no MemAvailable in /proc/meminfo; give --mem SIZE");
}

uint64_t auto_memory_budget(const MemLimit& limit) {
    const uint64_t margin = std::max<uint64_t>(256ull << 20, limit.bytes / 10);
    return limit.bytes > margin ? limit.bytes - margin : 0;
}

}  // namespace moe
