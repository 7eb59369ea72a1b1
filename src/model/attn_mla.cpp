// Multi-head latent attention (deepseek2; llama.cpp src/models/deepseek2.cpp), absorbed form for
// prefill and decode alike, so a token gives the same bits either way. Per row (r = kv_lora_rank,
// dq = nope + rope, H heads):
//   q      = Wq xn  or  Wq_b rmsnorm(Wq_a xn)                        [H, dq] = [H, (q_nope, q_pe)]
//   kv     = Wkv_a xn = (c, k_pe);  c = rmsnorm(c) [r];  k_pe = rope(k_pe) [rope], shared by heads
//   cache  row = (c, k_pe)  [r + rope]: the only per-token state (no per-head K or V)
//   q_abs  = (k_b_h q_nope_h, rope(q_pe_h))                          [H, r + rope]
//   o_lat  = MQA(q_abs, K = cache rows, V = the c part of the same rows)   [H, r]
//   out    = Wo (v_b_h o_lat_h)_h                                    [H * v] -> [D]
// q_nope . (W_k c) = (W_k^T q_nope) . c, so scores equal the decompressed form's; the scale is the
// decompressed head size's (mscale^2 / sqrt(dq), arch desc).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/head_rows.h"
#include "kernels/cpu/rmsnorm.h"
#include "model/forward.h"
#include "model/model.h"

namespace moe::model {

namespace {

// Rotates rows of `cache.spec().n_rot` dims at x + t * ld + h * hs (t < n, h < n_head) in place,
// pairs (2i, 2i+1) as kernels/ref/rope.h's Normal mode (deepseek2 uses no other).
void rope_strided(const RopeCache& cache, float* x, int64_t n, int64_t ld, int64_t n_head, int64_t hs,
                  const int32_t* pos) {
    const int64_t np = cache.n_pairs();
    for (int64_t t = 0; t < n; ++t) {
        const float* c = cache.cos(pos[t]);
        const float* s = cache.sin(pos[t]);
        for (int64_t h = 0; h < n_head; ++h) {
            float* a = x + t * ld + h * hs;
            for (int64_t i = 0; i < np; ++i) {
                const float x0 = a[2 * i], x1 = a[2 * i + 1];
                a[2 * i] = x0 * c[i] - x1 * s[i];
                a[2 * i + 1] = x0 * s[i] + x1 * c[i];
            }
        }
    }
}

}  // namespace

void Forward::attention_mla(ThreadPool& pool, int64_t il, const BatchRow* rows, int64_t n, KvStore& kv,
                            ForwardStats* stats) {
    const ModelConfig& c = m_.config();
    const LayerWeights& w = m_.weights().layers[static_cast<size_t>(il)];
    const LayerProj& P = proj_[static_cast<size_t>(il)];
    const kernels::Isa isa = m_.kernels().isa();
    const int64_t D = c.n_embd, H = c.n_head, r = c.kv_lora_rank, rope = c.qk_rope_head_dim,
                  nope = c.qk_nope_head_dim, dq = nope + rope, dv = c.v_head_dim, rr = r + rope;
    const float eps = c.rms_eps;

    rmsnorm_rows(pool, n, D, b_.x, w.attn_norm.as<float>(), b_.xn);
    // q (or q_a) and kv_a read the same normed rows: one prepared input, one dispatch when they can.
    const Proj& q_first = P.q.kernel ? P.q : P.q_a;
    float* q_first_out = P.q.kernel ? b_.q : b_.qa;
    const void* xq = prepare(pool, q_first, b_.xn, n);
    if (P.kv_a.kernel->act_q8 == q_first.kernel->act_q8) {
        const Proj* ps[2] = {&q_first, &P.kv_a};
        float* ys[2] = {q_first_out, b_.kva};
        project_many(pool, ps, ys, 2, b_.xn, xq, n);
    } else {
        project(pool, q_first, b_.xn, xq, n, q_first_out);
        project(pool, P.kv_a, b_.xn, prepare(pool, P.kv_a, b_.xn, n), n, b_.kva);
    }
    if (!P.q.kernel) {
        rmsnorm_rows(pool, n, c.q_lora_rank, b_.qa, w.q_a_norm.as<float>(), b_.qa);
        project(pool, P.q_b, b_.qa, prepare(pool, P.q_b, b_.qa, n), n, b_.q);
    }

    // Cache rows (c, k_pe): the latent normed in place, the rope key rotated in place.
    for (int64_t t = 0; t < n; ++t) {
        b_.pos[t] = rows[t].pos;
        cpu::rmsnorm({1, r, eps}, b_.kva + t * rr, w.kv_a_norm.as<float>(), b_.kva + t * rr, isa);
    }
    rope_strided(m_.rope(), b_.kva + r, n, rr, 1, 0, b_.pos);
    for (int64_t t = 0; t < n; ++t) kv.write(il, rows[t].seq, rows[t].pos, 1, b_.kva + t * rr, nullptr);

    AttentionSpec as;
    as.n_head = H;
    as.n_head_kv = 1;
    as.head_dim_k = rr;
    as.head_dim_v = r;
    as.v_row_stride = rr;  // V = the latent part of each cache row
    as.scale = m_.desc().layer.attn_scale;
    as.kv_type = kv.type();
    const cpu::HeadIo kb_io{b_.q, H * dq, dq, b_.qm, H * rr, rr}, vb_io{b_.lat, H * r, r, b_.att, H * dv, dv};
    auto q_rope = [&](int64_t t0, int64_t t1, int64_t h0, int64_t h1) {  // q_abs's rope part: q_pe, rotated
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t h = h0; h < h1; ++h)
                std::memcpy(b_.qm + (t * H + h) * rr + r, b_.q + (t * H + h) * dq + nope, sizeof(float) * rope);
        rope_strided(m_.rope(), b_.qm + t0 * H * rr + h0 * rr + r, t1 - t0, H * rr, h1 - h0, rr, b_.pos + t0);
    };

    if (n == 1 && cpu::head_rows_decode_supported(w.k_b, isa) && cpu::head_rows_decode_supported(w.v_b, isa)) {
        // Decode: k_b, the rope part, the attention over the latent cache and v_b all work per head,
        // so one pool wave over chunks of kAttentionHeadsPerItem heads (attention's own decode item:
        // the chunk shares each pass over the cache rows) instead of three waves (V2-Lite: 4 chunks of
        // 4 heads). Every head's operations are those of the separate calls (same bits).
        const int64_t hc = cpu::kAttentionHeadsPerItem, n_chunks = (H + hc - 1) / hc;
        AttentionArgs a;
        a.k = kv.k(il, rows[0].seq);
        a.v = m_.desc().kv.head_dim_v == 0 ? a.k : kv.v(il, rows[0].seq);  // MLA: V inside the K rows
        a.pos = b_.pos;
        a.n_tokens = 1;
        a.n_kv = int64_t{rows[0].pos} + 1;
        auto task = [&](int64_t c0, int64_t c1, int) {
            for (int64_t c = c0; c < c1; ++c) {
                const int64_t h0 = c * hc, h1 = std::min(H, h0 + hc);
                cpu::head_rows_decode(w.k_b, kb_io, h0, h1);
                q_rope(0, 1, h0, h1);
                AttentionSpec cs = as;
                cs.n_head = h1 - h0;
                AttentionArgs ca = a;
                ca.q = b_.qm + h0 * rr;
                ca.out = b_.lat + h0 * r;
                cpu::attention(cs, ca, nullptr, isa);
                cpu::head_rows_decode(w.v_b, vb_io, h0, h1);
            }
        };
        Timer att_timer;  // the whole wave (k_b and v_b included) counts as attention here
        pool.parallel_for(n_chunks, 1, task);  // inline on a 1-thread pool
        if (stats) stats->attention += att_timer.seconds();
    } else {
        // Absorbed queries: latent part k_b_h q_nope_h, then the rotated rope part.
        const kernels::MatmulKernel& f32 = m_.kernels().matmul(DType::F32, "attn_k_b");
        cpu::head_rows_product(pool, f32, w.k_b, kb_io, n, isa);
        q_rope(0, n, 0, H);
        Timer att_timer;
        attend_sequences(pool, il, rows, n, kv, as, b_.qm, b_.qms, b_.lat, b_.lats);
        if (stats) stats->attention += att_timer.seconds();
        // Per-head values from the latent outputs.
        cpu::head_rows_product(pool, f32, w.v_b, vb_io, n, isa);
    }
    project(pool, P.o, b_.att, prepare(pool, P.o, b_.att, n), n, b_.y);
}

}  // namespace moe::model
