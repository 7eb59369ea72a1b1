#pragma once
// Grouped expert FFN: for every active expert e and each of its rows p (grouped by a dispatch
// plan), out[p] = down_e( act(gate_e xp[p]) * up_e xp[p] ), all experts in one parallel pass.
//
// Work split: each expert's rows are cut into tiles of kRowTile rows x a block of output columns;
// the tiles of all experts are handed to the threads dynamically (an atomic tile counter), so a
// hot expert is spread over every core and decode (1..8 rows) splits the F / D columns across
// threads. Gate and up of a tile are computed together and the activation is applied right there
// (h = act(g) * u is the only intermediate written). Each output element is one kernel dot
// product (see kernels/cpu/cpu_kernels.h), so results are bitwise independent of the tiling, of
// the thread count and of the other rows.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "moe/moe_spec.h"

namespace moe {

// One matrix stack [K, N, E] (row length K, N rows per expert) and its kernel.
struct ExpertMatrix {
    const char* data = nullptr;
    size_t row_stride = 0;     // bytes between rows (nb[1])
    size_t expert_stride = 0;  // bytes between experts (nb[2])
    const kernels::MatmulKernel* kernel = nullptr;
    // Per-expert base pointers (expert cache slots, expert_store.h) instead of data + e * stride.
    const char* const* slots = nullptr;
    // Panel layout (repack_expert_panels, --repack-experts): every expert's N x K matrix also
    // repacked into 16-row panels (kernels/cpu/qmatmul_panel_layout.h), panel_bytes apart; calls of
    // m <= 2 rows read those instead of the blocks, and with panels_serve_all (the type has a panel
    // GEMM: qmatmul_panel_gemm.h) so do all others: the blocks are then never read. Null: not repacked.
    const uint8_t* panels = nullptr;
    size_t panel_bytes = 0;
    bool panels_serve_all = false;
    DType type = DType::F32;
    int64_t N = 0, K = 0;
    const char* expert(int e) const {
        return slots ? slots[e] : data + static_cast<size_t>(e) * expert_stride;
    }
};

struct ExpertFfn {
    ExpertMatrix gate, up, down;
    int64_t n_embd = 0;  // D
    int64_t n_ff = 0;    // F
    Activation act = Activation::SwiGLU;
    float clamp_limit = 7.0f;
    float glu_alpha = 1.702f;
    // Per-expert biases (f32, or null): gate/up [E, F] added before the activation, down [E, D]
    // added to the expert's output (indexed like the stack: expert e's row at e * F / e * D).
    const float* gate_bias = nullptr;
    const float* up_bias = nullptr;
    const float* down_bias = nullptr;
};

// Views a stacked (or single, E = 1) gate/up/down triple; looks up kernels by dtype (throws
// moe::Error naming the tensor if its dtype has no kernel).
ExpertFfn make_expert_ffn(const MoeSpec& spec, const TensorView& gate, const TensorView& up,
                          const TensorView& down, int64_t n_ff, const kernels::CpuKernels& k);
// The routed expert stack of `w` with its biases (spec.has_expert_bias).
ExpertFfn make_routed_ffn(const MoeSpec& spec, const MoeWeights& w, const kernels::CpuKernels& k);

// Load-time repack of f's stacks (n_expert experts each) whose type has a panel layout (Q2_K,
// Q3_K, Q4_K, Q6_K, Q8_0, Q4_0, Q5_K, Q5_0, MXFP4; K a multiple of panel_k_step: 256, Q5_0 and MXFP4 32) into the decode GEMV's panels, where this CPU runs the panel GEMV (AVX-512 VNNI + GFNI)
// and the stack's kernel is the AVX-512 one: decode calls then need no row reduction (the same
// bits: the super-block integer chain; Q8_0 the per-block one), and all other calls go to the panel GEMM
// (ExpertMatrix::panels_serve_all), so the blocks are never read again (Model releases their
// pages). The buffers are appended to `store` (owned by the caller), their bytes returned.
struct PanelBuffer {
    struct Free {
        void operator()(uint8_t* p) const;
    };
    std::unique_ptr<uint8_t[], Free> bytes;
};
size_t repack_expert_panels(ExpertFfn& f, int64_t n_expert, std::vector<PanelBuffer>& store);

// True where a matrix of type t with rows of K values, run by `kernel`, gets panels: this CPU runs
// the panel GEMV, t has a panel layout, K is whole super-blocks and the kernel is the AVX-512 one
// (whose bits the panel kernels reproduce). repack_expert_panels and --repack's dense projections.
bool panels_fit(DType t, int64_t K, const kernels::MatmulKernel& kernel);
// n_mat matrices of N rows x K values of type t (matrix i's rows at data + i * mat_stride,
// row_stride bytes apart) repacked into one buffer on 2 MiB pages (huge_alloc), matrix i's panels
// at i * panel_matrix_bytes(t, N, K); matrices (or, for few matrices, runs of panels) are spread
// over up to 16 threads. Returns the buffer's bytes; throws moe::Error ([moe]) when out of memory.
size_t repack_panels(DType t, const char* data, size_t mat_stride, size_t row_stride, int64_t n_mat, int64_t N,
                     int64_t K, PanelBuffer& out);
// The same into out (n_mat * panel_matrix_bytes(t, N, K) bytes, 64-byte aligned, owned by the
// caller): many small matrices share one buffer (a buffer each would round every one up to 2 MiB).
void repack_panels_into(DType t, const char* data, size_t mat_stride, size_t row_stride, int64_t n_mat, int64_t N,
                        int64_t K, uint8_t* out);

class GroupedFfn {
public:
    // 128 rows at most: the int8 kernels repack each 16-row weight panel once per call (the panel
    // GEMM: its scales, the first touch of its panels), so a taller tile amortises it over more
    // rows (64 measured ~12% less CPU time than 32 for the q4_K expert GEMM of OLMoE at T=512,
    // bench-moe); an expert's row tiles are evened out (row_tile_of); decode (1..8 rows per
    // expert) is unaffected.
    static constexpr int64_t kRowTile = 128;
    // Groups of fewer rows than this (decode) run both phases in one pool region (Auto; Fused
    // is honoured up to kFuseRows rows, larger groups run TwoPhase).
    static constexpr int64_t kFuseRows = 16;
    // TwoPhase: gate/up tiles, a barrier, then down tiles (two pool regions). Fused: one region,
    // an expert's down tiles start as soon as its own gate/up tiles are done (per-expert flags).
    // Same tiles and kernels either way, so the output is bitwise identical.
    enum class Schedule { Auto, TwoPhase, Fused };
    // Whether Auto runs n_rows rows (all parts together) fused on this pool.
    static bool auto_fuses(const ThreadPool& pool, int64_t n_rows) { return pool.size() > 1 && n_rows < kFuseRows; }
    // Scratch for up to n_experts groups with pool size n_threads.
    static size_t scratch_bytes(int n_experts, int n_threads);

    // Bytes of prepared int8 activations (ActQ8 rows) for up to max_rows rows of up to max_len
    // values, plus kFuseRows rows for the fused schedule's h rows, plus max_tokens rows for the
    // token rows of a Part with row_token (each token quantized once, below).
    static size_t act_scratch_bytes(int64_t max_rows, int64_t max_len, int64_t max_tokens = 0);
    // Whether f's gate and up kernels take prepared int8 rows (one activation quantization and
    // ISA for both): then a run with act_scratch quantizes each xp row once and the gate / up
    // tiles read only those int8 rows.
    static bool int8_inputs(const ExpertFfn& f);

    // offsets[E + 1]: rows [offsets[e], offsets[e+1]) of xp belong to expert e.
    // xp [n_rows, D] in, h [n_rows, F] scratch, out [n_rows, D] out.
    // act_scratch (act_scratch_bytes(n_rows, max(D, F)) bytes, or null): where the int8 kernels'
    // activations are prepared once per row (xp before gate/up, h before down) instead of every
    // tile quantizing its rows again (same bytes either way, so the results are identical).
    static void run(ThreadPool& pool, const ExpertFfn& f, int n_experts, const int64_t* offsets, const float* xp,
                    float* h, float* out, void* scratch, void* act_scratch = nullptr,
                    Schedule schedule = Schedule::Auto);

    // One FFN of a multi-part run: f's n_experts experts over rows [offsets[0], offsets[n_experts])
    // of xp [.., D] -> out [.., D], h [.., F] scratch (the arguments of the run above).
    // row_token (optional, with x [n_tokens, D]): xp row p is row row_token[p] of x (p from
    // offsets[0]). With act_scratch and int8_inputs(*f) each of the n_tokens rows is quantized once
    // and its int8 row copied to every expert row that takes it (prefill: top-k times fewer
    // quantizations; the same bytes as quantizing xp, so the same output), and xp is not read (it
    // may be null: the caller need not gather the float rows). Otherwise xp must hold the rows.
    struct Part {
        const ExpertFfn* f;
        int n_experts;
        const int64_t* offsets;
        const float* xp;
        float* h;
        float* out;
        const float* x = nullptr;
        const int32_t* row_token = nullptr;
        int64_t n_tokens = 0;
        int64_t rows() const { return offsets[n_experts] - offsets[0]; }
    };
    static constexpr int kMaxParts = 2;
    // Several FFNs of the same D (the routed experts and the shared expert of a DeepSeek / Qwen2-MoE
    // layer) in the same pool regions: their tiles in one list, part after part, so decode runs
    // both in one region instead of one each. Each part's output is bitwise what its own run gives
    // (same tiles, same kernels). Scratch as above for the parts' experts and rows summed (the
    // fused schedule takes the parts' rows together: fewer than kFuseRows); act_scratch's max_len
    // the largest D or F. 1 <= n_parts <= kMaxParts.
    static void run(ThreadPool& pool, const Part* parts, int n_parts, void* scratch, void* act_scratch,
                    Schedule schedule = Schedule::Auto);
};

}  // namespace moe
