#include "moe/expert_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace moe {

const char* expert_io_name(ExpertIo io) { return io == ExpertIo::Uring ? "io_uring" : "pread"; }

struct ExpertReader::Ring {
    io_uring ring{};
};

ExpertReader::ExpertReader(const std::string& path, ExpertIo io, bool direct) : path_(path), io_(io) {
    if (direct) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd_ >= 0) direct_ = true;
        else if (errno == EINVAL) refused_ = true;  // tmpfs and others: buffered below
        else throw_error("experts", "cannot open ", path, " for expert reads: ", std::strerror(errno));
    }
    if (fd_ < 0) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) throw_error("experts", "cannot open ", path, " for expert reads: ", std::strerror(errno));
    }
    if (io_ == ExpertIo::Uring) {
        ring_ = std::make_unique<Ring>();
        const int r = io_uring_queue_init(kQueueDepth, &ring_->ring, 0);
        if (r < 0) {
            ::close(fd_);
            throw_error("experts", "io_uring setup failed (", std::strerror(-r),
                        "); use --expert-io pread on this system");
        }
    }
}

ExpertReader::~ExpertReader() {
    if (ring_) io_uring_queue_exit(&ring_->ring);
    if (fd_ >= 0) ::close(fd_);
}

std::string ExpertReader::describe() const {
    return std::string(expert_io_name(io_)) + ", " + (direct_ ? "O_DIRECT" : refused_ ? "buffered (O_DIRECT refused)" : "buffered");
}

void ExpertReader::fail(const ReadOp& op, const std::string& what) const {
    throw_error("experts", path_, ": loading layer ", op.layer, " expert ", op.expert, " (blk.", op.layer, ".",
                op.tensor, ", file bytes ", op.offset, "..", op.offset + op.need, "): ", what,
                "; the model file was truncated, replaced or became unreadable while running: check it and "
                "start again");
}

void ExpertReader::drop_cache(const ReadOp& op) const {
    // Buffered reads fill the page cache; give those pages back right away (the slot holds the data).
    if (!direct_) ::posix_fadvise(fd_, static_cast<off_t>(op.offset), static_cast<off_t>(op.len), POSIX_FADV_DONTNEED);
}

void ExpertReader::fall_back_to_buffered() {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_error("experts", "cannot open ", path_, " for expert reads: ", std::strerror(errno));
    ::close(fd_);
    fd_ = fd;
    direct_ = false;
    refused_ = true;
}

void ExpertReader::read(ReadOp* ops, int n) {
    for (int i = 0; i < n; ++i) ops[i].done = 0;
    if (io_ == ExpertIo::Pread) read_pread(ops, n);
    else read_uring(ops, n);
}

void ExpertReader::read_pread(ReadOp* ops, int n) {
    for (int i = 0; i < n; ++i) {
        ReadOp& op = ops[i];
        while (op.done < op.need) {
            const ssize_t r = ::pread(fd_, op.dst + op.done, op.len - op.done, static_cast<off_t>(op.offset + op.done));
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                if (errno == EINVAL && direct_ && op.done == 0) {
                    fall_back_to_buffered();
                    continue;
                }
                fail(op, std::string("read error: ") + std::strerror(errno));
            }
            if (r == 0) fail(op, "short read (" + std::to_string(op.done) + " of " + std::to_string(op.need) + " bytes)");
            op.done += static_cast<uint64_t>(r);
        }
        drop_cache(op);
    }
}

void ExpertReader::read_uring(ReadOp* ops, int n) {
    io_uring& ring = ring_->ring;
    std::vector<int> queue;  // ops to (re)submit
    queue.reserve(static_cast<size_t>(n));
    for (int i = n - 1; i >= 0; --i) queue.push_back(i);
    unsigned in_flight = 0;
    std::string error;
    int error_op = -1;
    bool reopen = false;  // O_DIRECT refused at read time: buffered once the ring is drained
    while ((!queue.empty() && error.empty()) || in_flight > 0) {
        unsigned added = 0;
        while (error.empty() && !reopen && !queue.empty() && in_flight + added < kQueueDepth) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            if (!sqe) break;
            const int i = queue.back();
            queue.pop_back();
            ReadOp& op = ops[i];
            io_uring_prep_read(sqe, fd_, op.dst + op.done, static_cast<unsigned>(op.len - op.done),
                               op.offset + op.done);
            io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(i));
            ++added;
        }
        if (added > 0) {
            int r;
            do r = io_uring_submit(&ring);
            while (r == -EINTR);
            if (r < 0) throw_error("experts", path_, ": io_uring submit failed: ", std::strerror(-r));
            in_flight += added;
        }
        if (in_flight == 0) continue;
        io_uring_cqe* cqe = nullptr;
        int w;
        do w = io_uring_wait_cqe(&ring, &cqe);
        while (w == -EINTR);
        if (w < 0) throw_error("experts", path_, ": io_uring wait failed: ", std::strerror(-w));
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            const int i = static_cast<int>(io_uring_cqe_get_data64(cqe));
            ReadOp& op = ops[i];
            const int res = cqe->res;
            if (res == -EINTR || res == -EAGAIN) {
                queue.push_back(i);
            } else if (res == -EINVAL && direct_ && op.done == 0) {
                    queue.push_back(i);
                reopen = true;
            } else if (res < 0) {
                if (error.empty()) error = std::string("read error: ") + std::strerror(-res), error_op = i;
            } else if (res == 0) {
                if (op.done < op.need && error.empty())
                    error = "short read (" + std::to_string(op.done) + " of " + std::to_string(op.need) + " bytes)",
                    error_op = i;
            } else {
                op.done += static_cast<uint64_t>(res);
                if (op.done < op.need) queue.push_back(i);
                else drop_cache(op);
            }
        }
        io_uring_cq_advance(&ring, seen);
        in_flight -= seen;
        if (reopen && in_flight == 0) {
            fall_back_to_buffered();
            reopen = false;
        }
    }
    if (!error.empty()) fail(ops[error_op], error);
}

}  // namespace moe
