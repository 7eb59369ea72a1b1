// Tensor descriptions of a GGUF file (kept apart from param_count.cpp so that counting from a
// config.json does not pull in the GGUF reader).
#include "format/gguf.h"
#include "model/param_count.h"

namespace moe::model {

std::vector<TensorDesc> describe_gguf(const gguf::File& file) {
    std::vector<TensorDesc> out;
    out.reserve(file.tensors().size());
    for (const auto& t : file.tensors()) {
        TensorDesc d;
        d.name = t.name;
        d.shape.assign(t.ne, t.ne + t.n_dims);
        d.type = t.type;
        d.role = classify_tensor(t.name);
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace moe::model
