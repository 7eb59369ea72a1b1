#include "dist/file_digest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/timer.h"

namespace moe::dist {

DigestMode parse_digest_mode(const std::string& s) {
    if (s == "full") return DigestMode::Full;
    if (s == "quick") return DigestMode::Quick;
    throw_error("ep", "--ep-hash '", s, "' is not supported (supported: full, quick)");
}

FileDigest file_digest(const std::string& path, DigestMode mode) {
    Timer t;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_error("ep", "cannot open ", path, ": ", std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_error("ep", "cannot stat ", path, ": ", std::strerror(errno));
    FileDigest d;
    d.size = static_cast<uint64_t>(st.st_size);
    const uint64_t want = mode == DigestMode::Full ? d.size : std::min<uint64_t>(d.size, 8u << 20);
    (void)::posix_fadvise(fd, 0, static_cast<off_t>(want), POSIX_FADV_SEQUENTIAL);
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
    if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) throw_error("ep", "xxhash: cannot create a hash state");
    XXH3_64bits_update(state.get(), &d.size, sizeof d.size);
    std::vector<char> buf(4u << 20);
    while (d.hashed < want) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), want - d.hashed));
        const ssize_t got = ::pread(fd, buf.data(), n, static_cast<off_t>(d.hashed));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            throw_error("ep", "cannot read ", path, " at byte ", d.hashed, ": ",
                        got < 0 ? std::strerror(errno) : "unexpected end of file");
        XXH3_64bits_update(state.get(), buf.data(), static_cast<size_t>(got));
        d.hashed += static_cast<uint64_t>(got);
    }
    d.hash = XXH3_64bits_digest(state.get());
    d.seconds = t.seconds();
    return d;
}

}  // namespace moe::dist
