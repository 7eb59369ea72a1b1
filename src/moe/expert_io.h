#pragma once
// Reads of expert slices from the model file into cache slots, not through the page cache:
// O_DIRECT (falls back to buffered reads + POSIX_FADV_DONTNEED where the file system refuses
// O_DIRECT), through io_uring with up to kQueueDepth reads in flight, or plain pread one by one.
// Written here rather than with a library because the engine needs exactly this: a batch of
// aligned reads into caller-owned memory with per-read error attribution (layer, expert).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moe {

enum class ExpertIo { Uring, Pread };
const char* expert_io_name(ExpertIo io);

// One aligned read: [offset, offset + len) into dst (offset, len, dst multiples of kIoAlign).
// `need` (<= len) is how many bytes must arrive: the aligned range may run past the end of the
// file, but the slice itself (ending at offset + need) may not.
struct ReadOp {
    uint64_t offset = 0, len = 0, need = 0;
    char* dst = nullptr;
    int layer = 0, expert = 0;
    const char* tensor = "";  // "ffn_gate_exps" etc., for errors
    uint64_t done = 0;        // bytes read so far (set by the reader)
    bool finished = false;    // set by the reader: done >= need, or error set
    std::string error;        // set by the reader when the read failed
};

class ExpertReader {
public:
    static constexpr uint64_t kIoAlign = 4096;
    static constexpr unsigned kQueueDepth = 32;
    // Opens `path` (throws moe::Error("[experts] ...") naming it). direct: try O_DIRECT.
    ExpertReader(const std::string& path, ExpertIo io, bool direct);
    ~ExpertReader();
    ExpertReader(const ExpertReader&) = delete;
    ExpertReader& operator=(const ExpertReader&) = delete;

    // Performs ops[0..n); returns when all are done. A failed, short or zero read is one
    // moe::Error naming the file, layer, expert and tensor. = submit + wait.
    void read(ReadOp* ops, int n);
    // Starts ops[0..n) (io_uring: queued, up to kQueueDepth in flight; pread: performed now).
    // The ops must stay at their address until finished. Errors are kept in the op.
    void submit(ReadOp* ops, int n);
    // Blocks until ops[0..n) are finished; throws (as read) for the first that failed.
    void wait(ReadOp* ops, int n);
    // Reaps finished reads without blocking (io_uring), moving queued ones into the ring.
    void poll();
    // Waits for every read in flight (before the destination memory goes away).
    void drain();
    // Blocks until at least one read in flight finishes (no-op when none is in flight).
    void wait_any();
    // Throws (as a failed read of `op`) when the file changed on disk since it was opened: another
    // inode at the path of a reopen, or a new size, mtime or ctime (replaced or rewritten in place).
    // One fstat; the cache calls it after reads land, before their bytes are used.
    void check_unchanged(const ReadOp& op) const;
    // Room for n queued reads, so submit() does not allocate on the decode path.
    void reserve(size_t n) { queue_.reserve(n); }

    ExpertIo io() const { return io_; }
    bool direct() const { return direct_; }
    std::string describe() const;  // "io_uring, O_DIRECT" / "pread, buffered (O_DIRECT refused)"

private:
    void read_pread(ReadOp& op);
    void pump(bool block);  // io_uring: submit queued ops, reap completions (wait for one if block)
    void complete(ReadOp& op, int res);
    [[noreturn]] void fail(const ReadOp& op, const std::string& what) const;
    void drop_cache(const ReadOp& op) const;
    void fall_back_to_buffered();

    std::string path_;
    ExpertIo io_;
    bool direct_ = false;
    bool refused_ = false;  // O_DIRECT asked for but refused
    int fd_ = -1;           // O_DIRECT when direct_
    struct Identity {
        uint64_t dev = 0, ino = 0, size = 0;
        int64_t mtime_ns = 0, ctime_ns = 0;
        bool operator==(const Identity&) const = default;
    };
    Identity identity() const;  // of fd_
    Identity opened_;           // at the first open
    struct Ring;
    std::unique_ptr<Ring> ring_;
    std::vector<ReadOp*> queue_;  // io_uring: waiting for a submission slot (back = next)
    unsigned in_flight_ = 0;
    bool reopen_ = false;         // O_DIRECT refused at read time: buffered once the ring drains
};

}  // namespace moe
