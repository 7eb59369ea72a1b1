#pragma once
// The memory this process may use, for `--mem auto`: the cgroup limit (v2 memory.max, else v1
// memory.limit_in_bytes, of the process's own cgroup) when one is set, else MemAvailable.
#include <cstdint>
#include <string>

namespace moe {

struct MemLimit {
    uint64_t bytes = 0;
    std::string source;  // "cgroup v2 /sys/fs/cgroup/x/memory.max", "MemAvailable", ...
};

// Throws moe::Error("[mem] ...") when nothing can be read.
MemLimit process_memory_limit();

// The budget `--mem auto` uses: the limit minus a margin of max(256 MiB, 10%) for what the
// budget does not count (page cache of the file's header, allocator slack, other threads).
uint64_t auto_memory_budget(const MemLimit& limit);

}  // namespace moe
