#include "moe/experts.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "kernels/cpu/glu.h"
#include "kernels/cpu/qmatmul.h"
#include "kernels/cpu/qmatmul_panel_gemm.h"
#include "kernels/cpu/qmatmul_panel_layout.h"
#include "kernels/ref/quantize_act.h"

namespace moe {

namespace {
constexpr int64_t kMaxColTile = 512;
// One per-thread tile buffer (a tile's up outputs, or its gate outputs): kRowTile x kMaxColTile
// floats at most (pick_col_tile), + 64 bytes to keep the next buffer 64-aligned.
constexpr size_t kTileFloats = (sizeof(float) * GroupedFfn::kRowTile * kMaxColTile + 64) / sizeof(float);
// Fewest output columns of a guided down chunk at the end of a fused layer (run_fused; never more
// than the column tile): 64 rows of OLMoE's 2048 x 1024 Q4_K down matrix are 37 KB of panels, about
// a microsecond of streaming.
constexpr int64_t kTailCols = 64;

struct TileGrid {
    int n_parts;
    int first[GroupedFfn::kMaxParts + 1];  // global index of each part's first expert; [n_parts]: all experts
    int64_t col_tile[GroupedFfn::kMaxParts];   // columns per tile
    int64_t col_tiles[GroupedFfn::kMaxParts];  // tiles across the part's N output columns
    int64_t N[GroupedFfn::kMaxParts];
    const int64_t* offsets[GroupedFfn::kMaxParts];
    const int64_t* prefix;  // [all experts + 1] first tile of each global expert
    int64_t total;
};

// Column tile: as wide as the per-thread up buffer allows for the tallest tile (kRowTile x
// kMaxColTile floats: 512 columns at 128 rows, up to 65536 at one row) while leaving >= 4 tiles per
// thread, so small batches still spread over every core; never narrower than 16 columns. Prefill
// tiles of 512 columns instead of 64 (256 KiB of up buffer per thread instead of 32): the panel
// GEMM requests each next panel pair while the current one computes, but a call's first pair
// comes cold, and a 64-column call has two pairs (OLMoE pp512 0.94x the time with the spread
// prefetch, pp64 / pp128 0.87x; docs/PERFORMANCE.md session 38). Decode
// (one row per expert) thus gets long contiguous column ranges: each tile streams its weight rows
// in order and the kernels' prefetch runs ahead within the tile instead of stopping every 64 rows
// (OLMoE Q4_K_M decode, moe bench tg64: 17.4 t/s with 64-column tiles, 18.9-20.5 with these).
int64_t pick_col_tile(int64_t row_tiles, int64_t max_rows, int64_t N, int n_threads) {
    const int64_t cap = GroupedFfn::kRowTile * kMaxColTile / std::max<int64_t>(1, max_rows);
    int64_t ct = kMaxColTile;
    while (ct * 2 <= cap && ct < N) ct *= 2;
    while (ct > 16 && row_tiles * ((N + ct - 1) / ct) < 4 * n_threads) ct /= 2;
    return ct;
}

// The tiles of a run's parts in one list, part after part, expert after expert (global expert
// index = the part's first + its local index): each part keeps the column tile it would get alone.
TileGrid make_grid(const GroupedFfn::Part* parts, int n_parts, bool down, int n_threads, int64_t* prefix) {
    TileGrid g;
    g.n_parts = n_parts;
    g.first[0] = 0;
    prefix[0] = 0;
    for (int q = 0; q < n_parts; ++q) {
        const GroupedFfn::Part& pt = parts[q];
        const int E = pt.n_experts;
        const int64_t* offsets = pt.offsets;
        const int64_t N = down ? pt.f->n_embd : pt.f->n_ff;
        int64_t row_tiles = 0, max_rows = 0;
        for (int e = 0; e < E; ++e) {
            const int64_t rows = offsets[e + 1] - offsets[e];
            row_tiles += (rows + GroupedFfn::kRowTile - 1) / GroupedFfn::kRowTile;
            max_rows = std::max(max_rows, std::min(rows, GroupedFfn::kRowTile));
        }
        g.N[q] = N;
        g.offsets[q] = offsets;
        g.col_tile[q] = pick_col_tile(row_tiles, max_rows, N, n_threads);
        g.col_tiles[q] = (N + g.col_tile[q] - 1) / g.col_tile[q];
        const int f0 = g.first[q];
        g.first[q + 1] = f0 + E;
        for (int e = 0; e < E; ++e) {
            const int64_t rt = (offsets[e + 1] - offsets[e] + GroupedFfn::kRowTile - 1) / GroupedFfn::kRowTile;
            prefix[f0 + e + 1] = prefix[f0 + e] + rt * g.col_tiles[q];
        }
    }
    g.prefix = prefix;
    g.total = prefix[g.first[n_parts]];
    return g;
}

struct Tile {
    int part, e, ge;  // part, expert within it, global expert index
    int64_t row0, rows, col0, col1;
};

// Rows per row tile of an expert with `rows` rows: its ceil(rows / kRowTile) tiles evened out and
// rounded up to a multiple of 4 (the GEMM's register block), so 130 rows become 68 + 62, not
// 128 + 2 (a 2-row tile runs the GEMV; a short tile amortises its panel setup over few rows).
int64_t row_tile_of(int64_t rows) {
    const int64_t n = (rows + GroupedFfn::kRowTile - 1) / GroupedFfn::kRowTile;
    if (n <= 1) return GroupedFfn::kRowTile;
    const int64_t even = (rows + n - 1) / n, r4 = (even + 3) / 4 * 4;
    return (n - 1) * r4 < rows ? r4 : even;  // never an empty last tile
}

Tile tile_at(const TileGrid& g, int64_t id) {
    const int n_ge = g.first[g.n_parts];
    const int ge = static_cast<int>(std::upper_bound(g.prefix, g.prefix + n_ge + 1, id) - g.prefix) - 1;
    int q = 0;
    while (ge >= g.first[q + 1]) ++q;
    const int e = ge - g.first[q];
    const int64_t* offsets = g.offsets[q];
    const int64_t local = id - g.prefix[ge];
    const int64_t rt = local / g.col_tiles[q], ct = local % g.col_tiles[q];
    const int64_t step = row_tile_of(offsets[e + 1] - offsets[e]);
    Tile t;
    t.part = q;
    t.e = e;
    t.ge = ge;
    t.row0 = offsets[e] + rt * step;
    t.rows = std::min(step, offsets[e + 1] - t.row0);
    t.col0 = ct * g.col_tile[q];
    t.col1 = std::min(g.N[q], t.col0 + g.col_tile[q]);
    return t;
}

// Hands out tiles [0, total) dynamically to every thread of the pool.
template <typename Fn>
void for_each_tile(ThreadPool& pool, int64_t total, Fn&& fn) {
    if (total == 0) return;
    std::atomic<int64_t> next{0};
    pool.run([&](int tid, int) {
        for (;;) {
            const int64_t id = next.fetch_add(1, std::memory_order_relaxed);
            if (id >= total) break;
            fn(id, tid);
        }
    });
}

ExpertMatrix make_matrix(const TensorView& t, const kernels::CpuKernels& k) {
    ExpertMatrix m;
    m.data = static_cast<const char*>(t.data);
    m.row_stride = t.nb[1];
    m.expert_stride = t.nb[2];
    m.kernel = &k.matmul(t.type, t.name);
    m.type = t.type;
    m.K = t.ne[0];
    m.N = t.ne[1];
    return m;
}

// One matrix call of expert e where the stack was repacked (16-aligned columns): the panel GEMV
// for decode-sized calls with prepared activations (the type's: Q8_K, Q8_0's per 32), the panel GEMM for the others where the
// type has one (then the blocks are never read: Model drops their pages); else the block kernel.
void run_matrix(const ExpertMatrix& m, int e, const kernels::MatmulArgs& a) {
    if (m.panels && a.n0 % 16 == 0) {
        const kernels::panel::PanelMatrix pm{m.type, m.panels + static_cast<size_t>(e) * m.panel_bytes, m.N, m.K};
        if (kernels::panel::panel_matmul(pm, a, m.panels_serve_all, m.kernel->amx)) return;
    }
    (*m.kernel)(a);
}

// Two matrix calls (expert ea of ma, eb of mb) at once where both stacks were repacked and the
// calls are decode rows panel_matmul_pair serves (two long streams: an expert's gate and up, two
// experts' down); else one by one. The same bits either way.
void run_matrix_pair(const ExpertMatrix& ma, int ea, const kernels::MatmulArgs& a, const ExpertMatrix& mb, int eb,
                     const kernels::MatmulArgs& b) {
    if (ma.panels && mb.panels && a.n0 % 16 == 0) {
        const kernels::panel::PanelMatrix pm[2] = {{ma.type, ma.panels + static_cast<size_t>(ea) * ma.panel_bytes, ma.N, ma.K},
                                                   {mb.type, mb.panels + static_cast<size_t>(eb) * mb.panel_bytes, mb.N, mb.K}};
        const kernels::MatmulArgs ab[2] = {a, b};
        if (kernels::panel::panel_matmul_pair(pm, ab)) return;
    }
    run_matrix(ma, ea, a);
    run_matrix(mb, eb, b);
}
}  // namespace

ExpertFfn make_expert_ffn(const MoeSpec& spec, const TensorView& gate, const TensorView& up, const TensorView& down,
                          int64_t n_ff, const kernels::CpuKernels& k) {
    ExpertFfn f;
    f.gate = make_matrix(gate, k);
    f.up = make_matrix(up, k);
    f.down = make_matrix(down, k);
    f.n_embd = spec.n_embd;
    f.n_ff = n_ff;
    f.act = spec.act;
    f.clamp_limit = spec.clamp_limit;
    f.glu_alpha = spec.glu_alpha;
    return f;
}

ExpertFfn make_routed_ffn(const MoeSpec& spec, const MoeWeights& w, const kernels::CpuKernels& k) {
    ExpertFfn f = make_expert_ffn(spec, w.gate_exps, w.up_exps, w.down_exps, spec.n_ff, k);
    if (spec.has_expert_bias) {
        f.gate_bias = w.gate_exps_b.as<const float>();
        f.up_bias = w.up_exps_b.as<const float>();
        f.down_bias = w.down_exps_b.as<const float>();
    }
    return f;
}

namespace {
cpu::GluSpec glu_spec(const ExpertFfn& f) {
    cpu::GluSpec s;
    s.clamped = f.act != Activation::SwiGLU;
    s.limit = f.clamp_limit;
    s.alpha = f.glu_alpha;
    return s;
}
}  // namespace


namespace {
// Bytes before the per-thread buffers, 64-aligned: two tile prefixes [E + 1] and, for the fused
// schedule, per-expert counters [E] x 4 (left, ready, claimed, cols).
size_t counters_bytes(int n_experts) {
    return (sizeof(int64_t) * (6 * static_cast<size_t>(n_experts) + 2) + 63) / 64 * 64;
}
}  // namespace

size_t GroupedFfn::scratch_bytes(int n_experts, int n_threads) {
    return counters_bytes(n_experts) + static_cast<size_t>(n_threads) * 2 * sizeof(float) * kTileFloats;
}

size_t GroupedFfn::act_scratch_bytes(int64_t max_rows, int64_t max_len, int64_t max_tokens) {
    // + kFuseRows rows: the fused schedule keeps the int8 h rows behind the xp rows (both live);
    // + max_tokens rows: the token rows of a Part with row_token, behind both.
    return static_cast<size_t>(max_rows + kFuseRows + max_tokens) * ref::act_q8_row_bytes(max_len);
}

bool GroupedFfn::int8_inputs(const ExpertFfn& f) {
    return f.gate.kernel->act_q8 && f.up.kernel->act_q8 == f.gate.kernel->act_q8 && f.gate.kernel->isa == f.up.kernel->isa;
}

namespace {
// rows(a, b, tid) over [0, n): on the calling thread below min_pool rows (a pool dispatch costs
// more), else about two chunks per thread.
template <class F>
void for_rows(ThreadPool& pool, int64_t n, int64_t min_pool, F&& rows) {
    if (n <= 0) return;
    if (n < min_pool || pool.size() == 1) rows(int64_t{0}, n, 0);
    else pool.parallel_for(n, (n + 2 * pool.size() - 1) / (2 * pool.size()), rows);
}

// ActQ8 rows [r0, r1) of x (ld floats apart) into out (row r0's, stride bytes apart); across the
// pool when there are enough rows to pay for a dispatch.
void prepare_rows(ThreadPool& pool, kernels::Isa isa, ref::ActQuant kind, const float* x, int64_t ld, int64_t r0, int64_t r1, int64_t K,
                  char* out, size_t stride) {
    for_rows(pool, r1 - r0, 16, [&](int64_t a, int64_t b, int) {
        kernels::quantize_act_rows(isa, kind, x + (r0 + a) * ld, ld, b - a, K, out + static_cast<size_t>(a) * stride,
                                   stride);
    });
}

// The int8 rows [r0, r1) of a part with token rows: row p is token row_token[p]'s int8 row
// (tok, stride bytes apart) -> out (row r0's), as prepare_rows over the gathered float rows gives.
void gather_int8_rows(ThreadPool& pool, const int32_t* row_token, int64_t r0, int64_t r1, const char* tok, char* out,
                      size_t stride) {
    for_rows(pool, r1 - r0, 64, [&](int64_t a, int64_t b, int) {
        for (int64_t i = a; i < b; ++i)
            std::memcpy(out + static_cast<size_t>(i) * stride, tok + static_cast<size_t>(row_token[r0 + i]) * stride, stride);
    });
}

// Everything one tile of either phase needs (one part of a GroupedFfn run).
struct FfnCtx {
    const ExpertFfn* f;
    const int64_t* offsets;
    const float* xp;
    float* h;
    float* out;
    float* ubuf_all;  // per thread (ubuf_stride floats apart): a tile's up outputs, then its gate
    size_t ubuf_stride;  // outputs behind them (the tile's h values, with q2_tile)
    char* act;   // int8 xp rows (row p at (p - offsets[0]) * s1)
    char* act2;  // int8 h rows (row p at (p - offsets[0]) * s2)
    bool q1, q2;
    // The two-phase schedule's int8 h rows made in the gate / up tiles: each tile's gate outputs go
    // to the thread's buffer (not h), the activation runs there and the tile quantizes its columns
    // of those rows (kernels::quantize_act_cols) while they are in cache, instead of a pass over all
    // the h rows after the barrier (prefill: 16 MB of f32 h per OLMoE layer at 512 tokens, written
    // and read back). Then act2 lies in h's bytes (h's floats are never made; s2 <= 4 F).
    bool q2_tile;
    size_t s1, s2;
    cpu::GluSpec glu;
};

// The activation side of a tile's matmul: rows [row0, row0 + rows) of x ([rows, K] floats), or
// their prepared int8 rows xq (stride bytes apart) when given, against columns [col0, col1).
kernels::MatmulArgs tile_args(const Tile& t, const float* x, int64_t K, const char* xq, size_t stride) {
    kernels::MatmulArgs a;
    a.x = x ? x + t.row0 * K : nullptr;  // null: a part whose int8 rows come from its token rows
    a.ldx = K;
    a.m = t.rows;
    a.K = K;
    a.n0 = t.col0;
    a.n1 = t.col1;
    if (xq) {
        a.xq = xq;
        a.xq_stride = stride;
    }
    return a;
}

// Phase 1 tile: h[p, n] = act(gate_e[n] . xp[p], up_e[n] . xp[p]) over the tile's rows x F columns.
void gate_up_tile(const FfnCtx& c, const Tile& t, int tid) {
    const ExpertFfn& f = *c.f;
    const int64_t D = f.n_embd, F = f.n_ff;
    float* ubuf = c.ubuf_all + static_cast<size_t>(tid) * c.ubuf_stride;
    float* gbuf = ubuf + kTileFloats;
    const int64_t nc = t.col1 - t.col0;
    kernels::MatmulArgs a =
        tile_args(t, c.xp, D, c.q1 ? c.act + static_cast<size_t>(t.row0 - c.offsets[0]) * c.s1 : nullptr, c.s1);
    a.w = f.gate.expert(t.e);
    a.w_row_stride = f.gate.row_stride;
    a.y = c.q2_tile ? gbuf : c.h + t.row0 * F + t.col0;
    a.ldy = c.q2_tile ? nc : F;
    kernels::MatmulArgs u = a;
    u.w = f.up.expert(t.e);
    u.w_row_stride = f.up.row_stride;
    u.y = ubuf;
    u.ldy = nc;
    run_matrix_pair(f.gate, t.e, a, f.up, t.e, u);
    // gpt-oss: biases before the activation
    const float* gb = f.gate_bias ? f.gate_bias + t.e * F + t.col0 : nullptr;
    const float* ub = f.up_bias ? f.up_bias + t.e * F + t.col0 : nullptr;
    for (int64_t r = 0; r < t.rows; ++r) {
        float* hr = c.q2_tile ? gbuf + r * nc : c.h + (t.row0 + r) * F + t.col0;
        cpu::glu(c.glu, nc, hr, ubuf + r * nc, gb, ub, f.gate.kernel->isa);
        if (c.q2_tile)
            kernels::quantize_act_cols(f.down.kernel->isa, f.down.kernel->act_q8, hr, F, t.col0, t.col1,
                                       c.act2 + static_cast<size_t>(t.row0 + r - c.offsets[0]) * c.s2);
    }
}

// Phase 2 tile: out[p, d] = down_e[d] . h[p] over the tile's rows x D columns.
kernels::MatmulArgs down_args(const FfnCtx& c, const Tile& t) {
    const ExpertFfn& f = *c.f;
    const int64_t D = f.n_embd, F = f.n_ff;
    kernels::MatmulArgs a = tile_args(t, c.q2_tile ? nullptr : c.h, F,
                                      c.q2 ? c.act2 + static_cast<size_t>(t.row0 - c.offsets[0]) * c.s2 : nullptr, c.s2);
    a.w = f.down.expert(t.e);
    a.w_row_stride = f.down.row_stride;
    a.y = c.out + t.row0 * D + t.col0;
    a.ldy = D;
    return a;
}
void add_down_bias(const FfnCtx& c, const Tile& t) {
    const ExpertFfn& f = *c.f;
    if (!f.down_bias) return;
    const int64_t D = f.n_embd;
    const float* db = f.down_bias + t.e * D;
    for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t n = t.col0; n < t.col1; ++n) c.out[(t.row0 + r) * D + n] += db[n];
}
void down_tile(const FfnCtx& c, const Tile& t) {
    run_matrix(c.f->down, t.e, down_args(c, t));
    add_down_bias(c, t);
}
// Two experts' tiles of one part over the same columns (run_fused's down pairs).
void down_tile_pair(const FfnCtx& c, const Tile& t, const Tile& u) {
    run_matrix_pair(c.f->down, t.e, down_args(c, t), c.f->down, u.e, down_args(c, u));
    add_down_bias(c, t);
    add_down_bias(c, u);
}

// Both phases in one pool region (decode-sized groups). One tile counter hands out every gate/up
// tile (of every part) before any down tile. The thread that finishes the last gate/up tile of
// expert e prepares e's int8 h rows and publishes ready[e]. Down work is then claimed per expert
// (claimed[e], in columns; the layer's last columns in guided chunks, below), from the lowest
// expert whose h rows are ready: a thread waits (spinning) only while no unclaimed down column is
// ready, i.e. for gate/up tiles already handed out to threads that never wait, so this cannot
// deadlock. This saves one pool barrier per MoE layer and lets a thread that
// finishes its gate/up share early start on down rows instead of idling at the barrier (decode
// gives each phase only ~4 tiles per thread, so the barrier's tail was a large part of the phase);
// claiming a ready expert instead of the next in order keeps a thread busy while the other (slowed
// or descheduled by a neighbour) still holds an earlier expert's gate/up tile. Experts are global
// (the parts' experts in order: DeepSeek's shared expert after the routed ones, so its smaller
// tiles come last). Which thread runs a tile, and where a down chunk's columns start and end (at
// multiples of 16), never changes the output bits.
void run_fused(ThreadPool& pool, const GroupedFfn::Part* parts, int n_parts, const FfnCtx* c, int64_t* prefix) {
    const TileGrid g1 = make_grid(parts, n_parts, false, pool.size(), prefix);
    const int E = g1.first[n_parts];
    const TileGrid g2 = make_grid(parts, n_parts, true, pool.size(), prefix + (E + 1));
    int64_t* left = prefix + 2 * (E + 1);  // [E] gate/up tiles not yet finished
    int64_t* ready = left + E;              // [E] 1 once expert e's h rows (and int8 copy) are complete
    int64_t* claimed = ready + E;           // [E] down columns of expert e handed out so far
    int64_t* cols = claimed + E;            // [E] down columns of expert e (0: no rows)
    std::atomic<int64_t> open{0};           // down columns not yet handed out, all experts
    for (int e = 0; e < E; ++e) {
        left[e] = g1.prefix[e + 1] - g1.prefix[e];
        ready[e] = 0;
        claimed[e] = 0;
        const int64_t n2 = g2.prefix[e + 1] - g2.prefix[e];
        cols[e] = 0;
        if (n2 > 0) {
            const Tile t = tile_at(g2, g2.prefix[e]);
            MOE_ASSERT(n2 == g2.col_tiles[t.part], "fused group with more than one row tile per expert");
            cols[e] = g2.N[t.part];
        }
        open.fetch_add(cols[e], std::memory_order_relaxed);
    }
    if (g1.total + g2.total == 0) return;
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    // Down pairs (decode): claims columns [c0, c1) of a ready expert after tile t's, of t's part,
    // whose claim stands at c0, to run beside t (-1: none). Only where panel_matmul_pair serves them
    // (one row each, repacked Q4_K / Q6_K down: else the pair would only serialise two tiles), and
    // while at least (threads + 1) whole tiles stay open after both, so the other threads still
    // find whole experts and the layer ends in its guided chunks.
    const auto one_row = [&](const Tile& t) { return c[t.part].offsets[t.e + 1] - c[t.part].offsets[t.e] == 1; };
    const auto pair_partner = [&](const Tile& t, int64_t c0, int64_t c1, int64_t open_now) {
        const FfnCtx& cp = c[t.part];
        const int64_t w = c1 - c0;
        if (!cp.q2 || !cp.f->down.panels || !kernels::panel::panel_gemv_pair_supported(cp.f->down.type) || !one_row(t) ||
            open_now - w < (pool.size() + 1) * w)
            return -1;
        for (int e2 = t.ge + 1; e2 < g2.first[t.part + 1]; ++e2) {
            if (cols[e2] < c1 || std::atomic_ref<int64_t>(ready[e2]).load(std::memory_order_acquire) == 0 ||
                !one_row(tile_at(g2, g2.prefix[e2])))
                continue;
            int64_t expect = c0;
            if (std::atomic_ref<int64_t>(claimed[e2]).compare_exchange_strong(expect, c1, std::memory_order_relaxed)) return e2;
        }
        return -1;
    };
    pool.run([&](int tid, int) {
        try {
            for (int64_t id; (id = next.fetch_add(1, std::memory_order_relaxed)) < g1.total;) {
                const Tile t = tile_at(g1, id);
                const FfnCtx& cp = c[t.part];
                gate_up_tile(cp, t, tid);
                if (std::atomic_ref<int64_t>(left[t.ge]).fetch_sub(1, std::memory_order_acq_rel) == 1) {
                    const int64_t r0 = cp.offsets[t.e], r1 = cp.offsets[t.e + 1], F = cp.f->n_ff;
                    if (cp.q2)
                        kernels::quantize_act_rows(cp.f->down.kernel->isa, cp.f->down.kernel->act_q8, cp.h + r0 * F, F,
                                                   r1 - r0, F, cp.act2 + static_cast<size_t>(r0 - cp.offsets[0]) * cp.s2,
                                                   cp.s2);
                    std::atomic_ref<int64_t>(ready[t.ge]).store(1, std::memory_order_release);
                }
            }
            // Down work is claimed by columns (claimed[e]: expert e's columns handed out; fused groups
            // have one row tile per expert): a column tile at a time, but once one expert holds all
            // the unclaimed columns, guided chunks of what is left / threads (kTailCols .. a tile), so
            // the threads finish the layer together instead of one waiting out the other's last
            // whole tile (decode: one ~1-2 MB tile per expert).
            int lo = 0;  // experts below lo have every down column handed out (claims only grow)
            for (;;) {
                bool left_any = false, ran = false;
                for (int e = lo; e < E && !ran; ++e) {
                    std::atomic_ref<int64_t> cl(claimed[e]);
                    int64_t c0 = cl.load(std::memory_order_relaxed);
                    if (c0 >= cols[e]) {  // also experts with no rows (cols 0)
                        if (e == lo) ++lo;  // every expert before e is fully claimed too
                        continue;
                    }
                    left_any = true;
                    if (std::atomic_ref<int64_t>(ready[e]).load(std::memory_order_acquire) == 0) continue;
                    const Tile t0 = tile_at(g2, g2.prefix[e]);
                    const int64_t ct = g2.col_tile[t0.part], rest = cols[e] - c0;
                    const int64_t guided = std::min(ct, std::max(std::min(kTailCols, ct), rest / pool.size() / 16 * 16));
                    const int64_t c1 = std::min(cols[e], c0 + (open.load(std::memory_order_relaxed) > rest ? ct : guided));
                    if (!cl.compare_exchange_strong(c0, c1, std::memory_order_relaxed)) {
                        ran = true;  // lost the race: look again from lo
                        continue;
                    }
                    open.fetch_sub(c1 - c0, std::memory_order_relaxed);
                    Tile t = t0;
                    t.col0 = c0;
                    t.col1 = c1;
                    // A whole column tile while enough is open for the other threads: take the same
                    // columns of the next ready expert of the part too, if nobody has, and run both
                    // as one pair (two long weight streams; panel_matmul_pair says why).
                    const int pe = c1 - c0 == ct ? pair_partner(t, c0, c1, open.load(std::memory_order_relaxed)) : -1;
                    if (pe >= 0) {
                        open.fetch_sub(c1 - c0, std::memory_order_relaxed);
                        Tile u = tile_at(g2, g2.prefix[pe]);
                        u.col0 = c0;
                        u.col1 = c1;
                        down_tile_pair(c[t.part], t, u);
                    } else {
                        down_tile(c[t.part], t);
                    }
                    ran = true;
                }
                if (!left_any) break;
                if (!ran) {
                    if (failed.load(std::memory_order_relaxed)) return;  // the pool rethrows the error
                    ThreadPool::relax();
                }
            }
        } catch (...) {
            failed.store(true, std::memory_order_relaxed);
            throw;
        }
    });
}
}  // namespace

void GroupedFfn::run(ThreadPool& pool, const ExpertFfn& f, int E, const int64_t* offsets, const float* xp, float* h,
                     float* out, void* scratch, void* act_scratch, Schedule schedule) {
    const Part part{&f, E, offsets, xp, h, out};
    run(pool, &part, 1, scratch, act_scratch, schedule);
}

void GroupedFfn::run(ThreadPool& pool, const Part* parts, int n_parts, void* scratch, void* act_scratch,
                     Schedule schedule) {
    if (n_parts < 1 || n_parts > kMaxParts) throw_error("moe", "grouped FFN run of ", n_parts, " parts (1..", kMaxParts, ")");
    int n_experts = 0;
    int64_t n_rows = 0;
    for (int q = 0; q < n_parts; ++q) {
        n_experts += parts[q].n_experts;
        n_rows += parts[q].rows();
    }
    int64_t* prefix = static_cast<int64_t*>(scratch);
    float* ubuf_all = reinterpret_cast<float*>(static_cast<char*>(scratch) + counters_bytes(n_experts));
    const size_t ubuf_stride = 2 * kTileFloats;
    const bool fused = (schedule == Schedule::Fused && n_rows <= kFuseRows) ||
                       (schedule == Schedule::Auto && auto_fuses(pool, n_rows));

    // int8 rows in act_scratch: every part's xp rows, part after part; then the h rows, behind
    // them when fused (the h rows are quantized while other experts' gate/up tiles still read the
    // xp rows; act_scratch_bytes reserves kFuseRows rows for them), else over them (after the
    // gate/up barrier).
    char* act = static_cast<char*>(act_scratch);
    FfnCtx c[kMaxParts];
    size_t at1 = 0;
    for (int q = 0; q < n_parts; ++q) {
        const ExpertFfn& fq = *parts[q].f;
        c[q] = FfnCtx{&fq, parts[q].offsets, parts[q].xp, parts[q].h, parts[q].out, ubuf_all, ubuf_stride,
                      nullptr, nullptr, false, false, false, ref::act_q8_row_bytes(fq.n_embd), ref::act_q8_row_bytes(fq.n_ff),
                      glu_spec(fq)};
        c[q].q1 = act && int8_inputs(fq);
        c[q].q2 = act && fq.down.kernel->act_q8;
        c[q].act = act ? act + at1 : nullptr;
        at1 += static_cast<size_t>(parts[q].rows()) * c[q].s1;
    }
    // Two-phase: which parts quantize their h rows in the gate / up tiles (FfnCtx::q2_tile): every
    // tile's columns must start and end on the ActQ8 blocks, and an int8 row fit in an f32 h row.
    TileGrid g1{};
    if (!fused) {
        g1 = make_grid(parts, n_parts, false, pool.size(), prefix);
        for (int q = 0; q < n_parts; ++q) {
            const int64_t F = c[q].f->n_ff, ct = g1.col_tile[q];
            c[q].q2_tile = c[q].q2 && c[q].s2 <= sizeof(float) * static_cast<size_t>(F) &&
                           (ct >= F || ref::act_q8_cols_ok(c[q].f->down.kernel->act_q8, F, 0, ct));
        }
    }
    size_t at2 = fused ? at1 : 0;
    for (int q = 0; q < n_parts; ++q) {
        if (c[q].q2_tile) {
            c[q].act2 = reinterpret_cast<char*>(c[q].h + c[q].offsets[0] * c[q].f->n_ff);
            continue;
        }
        c[q].act2 = act ? act + at2 : nullptr;
        at2 += static_cast<size_t>(parts[q].rows()) * c[q].s2;
    }
    size_t at_tok = std::max(at1, at2);  // token rows (parts with row_token) behind the xp and h rows
    for (int q = 0; q < n_parts; ++q) {
        const Part& pq = parts[q];
        const int64_t r0 = c[q].offsets[0], r1 = c[q].offsets[pq.n_experts], D = c[q].f->n_embd;
        if (c[q].q1 && pq.row_token) {
            char* tok = act + at_tok;
            at_tok += static_cast<size_t>(pq.n_tokens) * c[q].s1;
            prepare_rows(pool, c[q].f->gate.kernel->isa, c[q].f->gate.kernel->act_q8, pq.x, D, 0, pq.n_tokens, D, tok, c[q].s1);
            gather_int8_rows(pool, pq.row_token, r0, r1, tok, c[q].act, c[q].s1);
        } else {
            if (!c[q].xp) throw_error("moe", "grouped FFN part ", q, " has no xp rows and no int8 rows to read instead (its gate / up kernels read f32 rows, or no act scratch was given)");
            if (c[q].q1) prepare_rows(pool, c[q].f->gate.kernel->isa, c[q].f->gate.kernel->act_q8, c[q].xp, D, r0, r1, D, c[q].act, c[q].s1);
        }
    }
    if (fused) {
        run_fused(pool, parts, n_parts, c, prefix);
        return;
    }
    for_each_tile(pool, g1.total, [&](int64_t id, int tid) {
        const Tile t = tile_at(g1, id);
        gate_up_tile(c[t.part], t, tid);
    });
    for (int q = 0; q < n_parts; ++q)
        if (c[q].q2 && !c[q].q2_tile)
            prepare_rows(pool, c[q].f->down.kernel->isa, c[q].f->down.kernel->act_q8, c[q].h, c[q].f->n_ff,
                         c[q].offsets[0], c[q].offsets[parts[q].n_experts], c[q].f->n_ff, c[q].act2, c[q].s2);
    {
        const TileGrid g = make_grid(parts, n_parts, true, pool.size(), prefix);
        for_each_tile(pool, g.total, [&](int64_t id, int) {
            const Tile t = tile_at(g, id);
            down_tile(c[t.part], t);
        });
    }
}

}  // namespace moe
