#pragma once
// Scratch arena: sized once up front (from a plan of the largest batch), then handed out by bump
// allocation and reset per step, so hot paths never call malloc.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace moe {

constexpr size_t kScratchAlign = 64;  // cache line / AVX-512 register

// Accumulates buffer sizes (each rounded up to kScratchAlign) to size an Arena.
class ArenaPlan {
public:
    ArenaPlan& add(size_t bytes);
    template <typename T>
    ArenaPlan& add_array(size_t count) { return add(count * sizeof(T)); }
    size_t bytes() const { return bytes_; }

private:
    size_t bytes_ = 0;
};

class Arena {
public:
    Arena() = default;
    explicit Arena(size_t capacity) { reserve(capacity); }
    void reserve(size_t capacity);  // reallocates only when growing; invalidates prior allocations
    void* alloc(size_t bytes);      // aborts (internal error) if the plan was too small
    template <typename T>
    T* alloc_array(size_t count) { return static_cast<T*>(alloc(count * sizeof(T))); }
    void reset() { used_ = 0; }
    size_t capacity() const { return capacity_; }
    size_t used() const { return used_; }

private:
    struct FreeDeleter { void operator()(void* p) const; };
    std::unique_ptr<void, FreeDeleter> buf_;
    size_t capacity_ = 0;
    size_t used_ = 0;
};

}  // namespace moe
