#include "moe/expert_io.h"

#include <fcntl.h>
#include <sys/stat.h>
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
    opened_ = identity();
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
    if (ring_) {
        try {
            drain();
        } catch (...) {
        }
        io_uring_queue_exit(&ring_->ring);
    }
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

ExpertReader::Identity ExpertReader::identity() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return {};
    return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
            static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
            static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

void ExpertReader::check_unchanged(const ReadOp& op) const {
    const Identity now = identity();
    if (now == opened_) return;
    std::string what = "the file changed on disk since it was opened (";
    if (now.dev != opened_.dev || now.ino != opened_.ino) what += "another file at the path";
    else if (now.size != opened_.size)
        what += "size " + std::to_string(opened_.size) + " -> " + std::to_string(now.size) + " bytes";
    else what += "same size, new modification time: rewritten in place";
    fail(op, what + ")");
}

void ExpertReader::wait_any() {
    if (io_ == ExpertIo::Uring && (in_flight_ > 0 || !queue_.empty())) pump(true);
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
    submit(ops, n);
    wait(ops, n);
}

void ExpertReader::submit(ReadOp* ops, int n) {
    for (int i = 0; i < n; ++i) {
        ops[i].done = 0;
        ops[i].finished = false;
        ops[i].error.clear();
    }
    if (io_ == ExpertIo::Pread) {
        for (int i = 0; i < n; ++i) read_pread(ops[i]);
        return;
    }
    for (int i = n - 1; i >= 0; --i) queue_.push_back(&ops[i]);
    pump(false);
}

void ExpertReader::wait(ReadOp* ops, int n) {
    for (int i = 0; i < n; ++i)
        while (!ops[i].finished) {
            MOE_ASSERT(io_ == ExpertIo::Uring && (in_flight_ > 0 || !queue_.empty()), "wait for a read never submitted");
            pump(true);
        }
    for (int i = 0; i < n; ++i)
        if (!ops[i].error.empty()) fail(ops[i], ops[i].error);
}

void ExpertReader::poll() {
    if (io_ == ExpertIo::Uring) pump(false);
}

void ExpertReader::drain() {
    if (io_ != ExpertIo::Uring) return;
    while (in_flight_ > 0) pump(true);
}

void ExpertReader::read_pread(ReadOp& op) {
    while (op.done < op.need) {
        const ssize_t r = ::pread(fd_, op.dst + op.done, op.len - op.done, static_cast<off_t>(op.offset + op.done));
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            if (errno == EINVAL && direct_ && op.done == 0) {
                fall_back_to_buffered();
                continue;
            }
            op.error = std::string("read error: ") + std::strerror(errno);
            break;
        }
        if (r == 0) {
            op.error = "short read (" + std::to_string(op.done) + " of " + std::to_string(op.need) + " bytes)";
            break;
        }
        op.done += static_cast<uint64_t>(r);
    }
    if (op.error.empty()) drop_cache(op);
    op.finished = true;
}

void ExpertReader::complete(ReadOp& op, int res) {
    if (res == -EINTR || res == -EAGAIN) {
        queue_.push_back(&op);
    } else if (res == -EINVAL && direct_ && op.done == 0) {
        queue_.push_back(&op);
        reopen_ = true;
    } else if (res < 0) {
        op.error = std::string("read error: ") + std::strerror(-res);
        op.finished = true;
    } else if (res == 0) {
        op.error = "short read (" + std::to_string(op.done) + " of " + std::to_string(op.need) + " bytes)";
        op.finished = true;
    } else {
        op.done += static_cast<uint64_t>(res);
        if (op.done < op.need) {
            queue_.push_back(&op);
        } else {
            drop_cache(op);
            op.finished = true;
        }
    }
}

void ExpertReader::pump(bool block) {
    io_uring& ring = ring_->ring;
    if (reopen_ && in_flight_ == 0) {
        fall_back_to_buffered();
        reopen_ = false;
    }
    unsigned added = 0;
    while (!reopen_ && !queue_.empty() && in_flight_ + added < kQueueDepth) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) break;
        ReadOp* op = queue_.back();
        queue_.pop_back();
        io_uring_prep_read(sqe, fd_, op->dst + op->done, static_cast<unsigned>(op->len - op->done),
                           op->offset + op->done);
        io_uring_sqe_set_data(sqe, op);
        ++added;
    }
    if (added > 0) {
        int r;
        do r = io_uring_submit(&ring);
        while (r == -EINTR);
        if (r < 0) throw_error("experts", path_, ": io_uring submit failed: ", std::strerror(-r));
        in_flight_ += added;
    }
    if (in_flight_ == 0) return;
    io_uring_cqe* cqe = nullptr;
    if (block) {
        int w;
        do w = io_uring_wait_cqe(&ring, &cqe);
        while (w == -EINTR);
        if (w < 0) throw_error("experts", path_, ": io_uring wait failed: ", std::strerror(-w));
    }
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
        ++seen;
        complete(*static_cast<ReadOp*>(io_uring_cqe_get_data(cqe)), cqe->res);
    }
    io_uring_cq_advance(&ring, seen);
    in_flight_ -= seen;
    if (reopen_ && in_flight_ == 0) {
        fall_back_to_buffered();
        reopen_ = false;
    }
}

}  // namespace moe
