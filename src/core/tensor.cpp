#include "core/tensor.h"

#include "core/checked.h"

namespace moe {

bool TensorView::contiguous() const {
    uint64_t expect = dtype_info(type).bytes;
    if (nb[0] != expect) return false;
    expect = row_bytes();
    for (int d = 1; d < kMaxDims; ++d) {
        if (ne[d] > 1 && nb[d] != expect) return false;
        expect *= static_cast<uint64_t>(ne[d]);
    }
    return true;
}

std::string TensorView::shape_string() const {
    std::string s = "[";
    for (int d = 0; d < n_dims; ++d) {
        if (d) s += ", ";
        s += std::to_string(ne[d]);
    }
    return s + "]";
}

TensorView make_view(std::string name, DType type, int n_dims, const int64_t* shape, void* data) {
    MOE_ASSERT(n_dims >= 1 && n_dims <= kMaxDims, "n_dims ", n_dims);
    TensorView v;
    v.name = std::move(name);
    v.type = type;
    v.n_dims = n_dims;
    for (int d = 0; d < n_dims; ++d) v.ne[d] = shape[d];
    v.nb[0] = dtype_info(type).bytes;
    v.nb[1] = moe::row_bytes(type, static_cast<uint64_t>(v.ne[0]), "tensor");
    for (int d = 2; d < kMaxDims; ++d) v.nb[d] = v.nb[d - 1] * static_cast<uint64_t>(v.ne[d - 1]);
    v.data = data;
    return v;
}

TensorView make_view(std::string name, DType type, std::initializer_list<int64_t> shape, void* data) {
    return make_view(std::move(name), type, static_cast<int>(shape.size()), shape.begin(), data);
}

}  // namespace moe
