#pragma once
// Non-owning tensor view: ggml dimension order (ne[0] is the fastest-varying, contiguous row),
// byte strides nb[], a stable name (e.g. "blk.3.ffn_gate_exps.weight") and a data pointer.
#include <array>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace moe {

constexpr int kMaxDims = 4;

struct TensorView {
    std::string name;
    DType type = DType::F32;
    int n_dims = 0;
    std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // elements per dim, unused dims = 1
    std::array<uint64_t, kMaxDims> nb{0, 0, 0, 0};  // byte stride per dim
    void* data = nullptr;

    int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
    uint64_t row_bytes() const { return moe::row_bytes(type, static_cast<uint64_t>(ne[0])); }
    uint64_t nbytes() const { return row_bytes() * static_cast<uint64_t>(nrows()); }
    bool contiguous() const;
    std::string shape_string() const;  // "[4096, 14336, 8]"
    template <typename T>
    T* as() const { return static_cast<T*>(data); }
    // Pointer to row i1 of matrix (i2, i3).
    void* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
        return static_cast<char*>(data) + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
    }
};

// Contiguous view over `data` with the given shape (ne0 first).
TensorView make_view(std::string name, DType type, std::initializer_list<int64_t> shape, void* data);
TensorView make_view(std::string name, DType type, int n_dims, const int64_t* shape, void* data);

}  // namespace moe
