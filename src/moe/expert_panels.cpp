// The panel copies of expert stacks (experts.h: --repack-experts / --repack): made once at load,
// on 2 MiB pages, in parallel over matrices (or runs of panels of few matrices); the kernels that
// read them are kernels/cpu/qmatmul_panel_*.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "moe/experts.h"

namespace moe {

void PanelBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

bool panels_fit(DType t, int64_t K, const kernels::MatmulKernel& kernel) {
    return kernels::panel::panel_gemv_usable() && kernels::panel::panel_supported(t) && K % kernels::panel::panel_k_step(t) == 0 &&
           kernel.isa == kernels::Isa::Avx512;
}

size_t repack_panels(DType t, const char* data, size_t mat_stride, size_t row_stride, int64_t n_mat, int64_t N,
                     int64_t K, PanelBuffer& out) {
    const size_t per = kernels::panel::panel_matrix_bytes(t, N, K);
    const size_t bytes = (per * static_cast<size_t>(n_mat) + 63) / 64 * 64;
    out.bytes.reset(static_cast<uint8_t*>(huge_alloc(bytes)));  // decode streams them: 2 MiB pages
    if (!out.bytes) throw_error("moe", "out of memory repacking ", bytes, " bytes of panels");
    repack_panels_into(t, data, mat_stride, row_stride, n_mat, N, K, out.bytes.get());
    return bytes;
}

void repack_panels_into(DType t, const char* data, size_t mat_stride, size_t row_stride, int64_t n_mat, int64_t N,
                        int64_t K, uint8_t* out) {
    const size_t per = kernels::panel::panel_matrix_bytes(t, N, K);
    // Scalar repack, ~0.9 GB/s per core: the load-time cost, so every core takes a share. Work item
    // = a run of panels of one matrix: whole matrices when there are many (experts), a matrix cut
    // in ~4 runs per thread when there are few (a dense projection).
    const int64_t hw = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
    const int64_t panels = (N + 15) / 16;
    const int64_t runs = std::clamp<int64_t>((4 * hw + n_mat - 1) / n_mat, 1, panels);
    const int64_t run_panels = (panels + runs - 1) / runs;
    const int64_t items = n_mat * runs;
    const int64_t nt = std::min(hw, items);
    std::atomic<int64_t> next{0};
    std::vector<std::exception_ptr> err(static_cast<size_t>(nt));
    std::vector<std::thread> th;
    for (int64_t i = 0; i < nt; ++i)
        th.emplace_back([&, i] {
            try {
                for (int64_t id; (id = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
                    const int64_t e = id / runs, p0 = id % runs * run_panels, p1 = std::min(panels, p0 + run_panels);
                    if (p0 >= p1) continue;
                    kernels::panel::repack_matrix_panels(t, reinterpret_cast<const uint8_t*>(data + static_cast<size_t>(e) * mat_stride),
                                                         row_stride, N, K, p0, p1, out + static_cast<size_t>(e) * per);
                }
            } catch (...) {
                err[static_cast<size_t>(i)] = std::current_exception();
            }
        });
    for (auto& x : th) x.join();
    for (auto& x : err)
        if (x) std::rethrow_exception(x);
}

size_t repack_expert_panels(ExpertFfn& f, int64_t n_expert, std::vector<PanelBuffer>& store) {
    size_t total = 0;
    for (ExpertMatrix* m : {&f.gate, &f.up, &f.down}) {
        if (m->slots || !panels_fit(m->type, m->K, *m->kernel)) continue;
        PanelBuffer b;
        total += repack_panels(m->type, m->data, m->expert_stride, m->row_stride, n_expert, m->N, m->K, b);
        m->panels = b.bytes.get();
        m->panel_bytes = kernels::panel::panel_matrix_bytes(m->type, m->N, m->K);
        m->panels_serve_all = kernels::panel::panel_gemm_supported(m->type);
        store.push_back(std::move(b));
    }
    return total;
}

}  // namespace moe
