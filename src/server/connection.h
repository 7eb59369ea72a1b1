#pragma once
// Noticing that the client of a non-streaming request went away. cpp-httplib 0.11 hands a
// handler neither the socket nor a "connection closed" hook, and its DataSink::is_writable() is a
// select() for writing, which a half-closed peer still passes. The handler does know the
// connection's two endpoints (Request::local_addr/port, remote_addr/port), which name exactly one
// TCP socket of this process: ClientConnection finds its descriptor once (a walk of /proc/self/fd,
// a few dozen entries) and then asks the kernel whether the peer has closed (poll POLLRDHUP, no
// data is consumed).
#include <string>

namespace moe::server {

class ClientConnection {
public:
    // Not found (not TCP, /proc unavailable): gone() is always false (the request runs to its end).
    ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
    bool found() const { return fd_ >= 0; }
    // True once the client closed its side (or the connection failed). Never blocks.
    bool gone() const;

private:
    int fd_ = -1;  // borrowed: httplib owns and closes it after the handler returns
};

}  // namespace moe::server
