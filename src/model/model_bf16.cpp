// MOE_AMX_BF16=1 (CpuKernels::amx_bf16): the bf16 panels of the dense F16 / BF16 projections and
// lm head for the AMX-BF16 prefill GEMM (kernels/cpu/matmul_bf16_amx.h). Opt-in: the GEMM rounds
// the activations to bf16 (and F16 weights: BF16 ones are used as stored), so prefill logits differ
// from the default path's by a bounded amount. The rows stay: decode (m < kMinRows) reads them.
#include <string>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "kernels/cpu/matmul_bf16_amx.h"
#include "model/model.h"

namespace moe::model {

void Model::repack_bf16() {
    namespace bf = kernels::bf16amx;
    struct Job {
        const TensorView* t;
        size_t at;  // offset of its panels in the shared buffer
    };
    std::vector<Job> jobs;
    size_t total = 0;
    auto want = [&](const TensorView& t) {
        if (!t.data || t.nrows() != t.ne[1] || (t.type != DType::F16 && t.type != DType::BF16) || t.ne[0] % 32 != 0) return;
        for (const Job& j : jobs)
            if (j.t->data == t.data) return;
        jobs.push_back({&t, total});
        total += (bf::bf16_panel_bytes(t.ne[1], t.ne[0]) + 63) / 64 * 64;
    };
    for (const LayerWeights& w : weights_.layers)
        for (const TensorView* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_gate, &w.ffn_up, &w.ffn_down, &w.wq_a, &w.wq_b, &w.wkv_a})
            want(*t);
    want(weights_.output);
    amx_bf16_note_ = "MOE_AMX_BF16=1: prefill of " + std::to_string(jobs.size()) +
                     " dense F16 / BF16 matrices on AMX-BF16 tiles (activations rounded to bf16: the output differs from the default path)";
    if (jobs.empty()) return;
    bf16_store_.bytes.reset(static_cast<uint8_t*>(huge_alloc(total)));
    if (!bf16_store_.bytes) throw_error("model", "out of memory making ", total, " bytes of bf16 panels (MOE_AMX_BF16=1)");
    bf16_panel_bytes_ = total;
    for (const Job& j : jobs) {
        const TensorView& t = *j.t;
        uint16_t* p = reinterpret_cast<uint16_t*>(bf16_store_.bytes.get() + j.at);
        bf::bf16_panels_repack(t.type, t.data, t.nb[1], t.ne[1], t.ne[0], p);
        bf16_.emplace_back(t.data, p);
    }
}

const uint16_t* Model::bf16_panels(const void* w) const {
    for (const auto& [rows, panels] : bf16_)
        if (rows == w) return panels;
    return nullptr;
}

}  // namespace moe::model
