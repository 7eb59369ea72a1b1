#pragma once
// Identity of a model file, compared across ranks at EP start-up (docs/EP.md): every rank must map
// the same bytes, or its experts would compute different numbers without any error.
//
//   Full  (default): XXH3-64 (Debian libxxhash) of the size and every byte, read sequentially in
//                    4 MiB blocks with read() (not through the model's mapping, so the rank's
//                    resident memory does not grow; the pages land in the shared page cache).
//   Quick (--ep-hash quick): size + the first 8 MiB (header, metadata, tensor table, first
//                    tensors); a changed expert further in is not seen.
#include <cstdint>
#include <string>

namespace moe::dist {

enum class DigestMode { Full, Quick };
// "full" | "quick" (throws moe::Error naming the flag).
DigestMode parse_digest_mode(const std::string& s);

struct FileDigest {
    uint64_t hash = 0;
    uint64_t size = 0;      // bytes of the file
    uint64_t hashed = 0;    // bytes read and hashed
    double seconds = 0;     // wall time of hashing
};

// Throws moe::Error("[ep] ...") when the file cannot be opened or read.
FileDigest file_digest(const std::string& path, DigestMode mode);

}  // namespace moe::dist
