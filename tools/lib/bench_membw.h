// The read-bandwidth ceiling of `moe bench`: a streaming read loop over a buffer on 2 MiB pages
// (the pages the weights sit on), measured in this process or in a spawned `moe bench --membw`
// child, and the buffer size a model's run samples.
#pragma once

#include <cstdint>
#include <string>

namespace moe::tools {

// Best-of-reps streaming read over `mib` MiB with `threads` threads (each its own slice), GB/s.
double measure_read_bw(int threads, int64_t mib, int reps);

// The same in a child process (`moe bench --membw`), so its buffer never counts in this process's
// peak RSS; falls back to this process when the spawn fails; a failed child is an Error.
double measure_read_bw_child(int threads, int64_t mib, int reps);

// MiB of the bandwidth samples for a run of `model`: its file's size within [256, half of what the
// process may still use], `resident` bytes held already.
int64_t footprint_mib(const std::string& model, double resident);

}  // namespace moe::tools
