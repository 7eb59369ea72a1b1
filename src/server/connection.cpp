// ClientConnection (connection.h).
#include "server/connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace moe::server {

namespace {
// Numeric host and port of a socket address, as httplib reports them (getnameinfo NUMERICHOST).
bool host_port(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
    char h[NI_MAXHOST], s[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, s, sizeof s, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return false;
    host = h;
    port = std::atoi(s);
    return true;
}
}  // namespace

ClientConnection::ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                   int remote_port) {
    if (local_port <= 0 || remote_port <= 0) return;
    DIR* d = opendir("/proc/self/fd");
    if (!d) return;
    const int self = dirfd(d);
    while (const dirent* e = readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == self) continue;
        struct stat st;
        if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage la{}, ra{};
        socklen_t ll = sizeof la, rl = sizeof ra;
        if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&la), &ll) != 0 ||
            getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ra), &rl) != 0)
            continue;  // not connected (the listening socket) or closed meanwhile
        if (la.ss_family != AF_INET && la.ss_family != AF_INET6) continue;
        std::string lh, rh;
        int lp = 0, rp = 0;
        if (!host_port(la, ll, lh, lp) || !host_port(ra, rl, rh, rp)) continue;
        if (lp == local_port && rp == remote_port && lh == local_addr && rh == remote_addr) {
            fd_ = static_cast<int>(fd);
            break;
        }
    }
    closedir(d);
}

bool ClientConnection::gone() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace moe::server
