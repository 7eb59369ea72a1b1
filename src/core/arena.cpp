#include "core/arena.h"

#include <cstdlib>

#include "core/error.h"

namespace moe {

static size_t round_up(size_t x) { return (x + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

ArenaPlan& ArenaPlan::add(size_t bytes) {
    bytes_ += round_up(bytes);
    return *this;
}

void Arena::FreeDeleter::operator()(void* p) const { std::free(p); }

void Arena::reserve(size_t capacity) {
    capacity = round_up(capacity);
    if (capacity <= capacity_) {
        used_ = 0;
        return;
    }
    void* p = std::aligned_alloc(kScratchAlign, capacity);
    if (!p) throw_error("arena", "cannot allocate ", capacity, " bytes of scratch memory");
    buf_.reset(p);
    capacity_ = capacity;
    used_ = 0;
}

void* Arena::alloc(size_t bytes) {
    const size_t n = round_up(bytes);
    MOE_ASSERT(used_ + n <= capacity_, "scratch arena too small: need ", used_ + n, " of ", capacity_);
    void* p = static_cast<char*>(buf_.get()) + used_;
    used_ += n;
    return p;
}

}  // namespace moe
