// MoeBlock's expert-parallel path (ep.h): route own slice -> layout -> dispatch -> local grouped
// FFN -> combine -> weighted sum -> all-gather.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/timer.h"
#include "moe/combine.h"
#include "moe/moe_block.h"
#include "moe/moe_block_buffers.h"

namespace moe {

const char* ep_compress_name(EpCompress c) {
    switch (c) {
        case EpCompress::None: return "none";
        case EpCompress::BF16: return "bf16";
        case EpCompress::Int8: return "int8";
    }
    return "?";
}

EpCompress parse_ep_compress(const std::string& s) {
    if (s == "none" || s == "f32") return EpCompress::None;
    if (s == "bf16") return EpCompress::BF16;
    if (s == "int8") return EpCompress::Int8;
    throw_error("ep", "--ep-compress '", s, "' is not supported (supported: none, bf16, int8)");
}

size_t ep_record_bytes(int64_t D, EpCompress c) {
    const size_t d = static_cast<size_t>(D);
    switch (c) {
        case EpCompress::None: return 4 + 4 * d;
        case EpCompress::BF16: return 4 + (2 * d + 3) / 4 * 4;
        case EpCompress::Int8: return 8 + (d + 3) / 4 * 4;  // expert id, scale, D int8
    }
    return 0;
}

void ep_encode_row(const float* x, int64_t D, EpCompress c, void* out) {
    if (c == EpCompress::None) {
        std::memcpy(out, x, sizeof(float) * static_cast<size_t>(D));
    } else if (c == EpCompress::BF16) {
        uint16_t* o = static_cast<uint16_t*>(out);
        for (int64_t i = 0; i < D; ++i) o[i] = fp32_to_bf16(x[i]);
    } else {
        // Symmetric int8 with one f32 scale per row: q = round(x / s), s = max|x| / 127.
        float amax = 0;
        for (int64_t i = 0; i < D; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
        std::memcpy(out, &scale, 4);
        int8_t* q = static_cast<int8_t*>(out) + 4;
        for (int64_t i = 0; i < D; ++i) q[i] = static_cast<int8_t>(std::lround(x[i] * inv));
    }
}

void ep_decode_row(const void* in, int64_t D, EpCompress c, float* x) {
    if (c == EpCompress::None) {
        std::memcpy(x, in, sizeof(float) * static_cast<size_t>(D));
    } else if (c == EpCompress::BF16) {
        const uint16_t* h = static_cast<const uint16_t*>(in);
        for (int64_t i = 0; i < D; ++i) x[i] = bf16_to_fp32(h[i]);
    } else {
        float scale;
        std::memcpy(&scale, in, 4);
        const int8_t* q = static_cast<const int8_t*>(in) + 4;
        for (int64_t i = 0; i < D; ++i) x[i] = scale * static_cast<float>(q[i]);
    }
}

void MoeBlock::use_ep(const EpConfig& cfg) {
    const int L = weights_.layer;
    if (!cfg.group || !cfg.placement) throw_error("moe", "layer ", L, ": expert parallelism needs a group and a placement");
    if (approx_.any())
        throw_error("moe", "layer ", L, ": --ep does not support the routing approximations (temperature, dynamic "
                    "top-k, pruning, capacity); run without them");
    const dist::Placement& p = *cfg.placement;
    if (L < 0 || L >= p.n_layers || p.n_experts != spec_.n_expert || p.n_ranks != cfg.group->size())
        throw_error("moe", "layer ", L, ": the placement (", p.n_layers, " layers x ", p.n_experts, " experts on ",
                    p.n_ranks, " ranks) does not match this block (", spec_.n_expert, " experts, ",
                    cfg.group->size(), " ranks)");
    auto st = std::make_unique<EpState>();
    st->cfg = cfg;
    st->layer = L;
    const size_t R = static_cast<size_t>(cfg.group->size());
    const size_t rows = static_cast<size_t>(max_tokens_) * static_cast<size_t>(spec_.top_k);
    const size_t D = static_cast<size_t>(spec_.n_embd);
    st->rec_bytes = ep_record_bytes(spec_.n_embd, cfg.compress);
    for (auto* v : {&st->send_rows, &st->recv_rows, &st->sb, &st->sd, &st->rb, &st->rd, &st->cb, &st->cd, &st->qb,
                    &st->qd, &st->cursor})
        v->assign(2 * R, 0);
    st->dest.assign(rows, -1);
    st->slot_send.assign(rows, -1);
    st->send_buf.assign(rows * st->rec_bytes, 0);
    st->recv_buf.assign(rows * st->rec_bytes, 0);
    st->recv_pos.assign(rows, 0);
    st->ret_send.assign(rows * D, 0.0f);
    st->ret_recv.assign(rows * D, 0.0f);
    ep_ = std::move(st);
}

void MoeBlock::forward_ep(ThreadPool& pool, const float* x, int64_t T, float* y, const MoeObserve& obs,
                          const Buffers& b) {
    EpState& st = *ep_;
    dist::Group& g = *st.cfg.group;
    const dist::Placement& pl = *st.cfg.placement;
    const int R = g.size(), me = g.rank();
    const int64_t D = spec_.n_embd;
    const int E = spec_.n_expert, k = spec_.top_k;
    const int L = st.layer;
    const EpCompress cz = st.cfg.compress;
    const int64_t rec = static_cast<int64_t>(st.rec_bytes), row_f32 = D * static_cast<int64_t>(sizeof(float));
    const int M = st.cfg.overlap ? 2 : 1;  // micro-batches (the same on every rank; some may be empty)
    const bool dp = st.cfg.dp;  // data-parallel: all T rows are this rank's own
    auto lo = [&](int r) { return T * r / R; };  // replicated: own slice of rank r is [lo(r), lo(r + 1))
    const int64_t t0 = dp ? 0 : lo(me), Tn = dp ? T : lo(me + 1) - t0;
    // Rows one rank may send (its own tokens x k), and rows the scratch b holds per grouped FFN
    // call (b is carved for max_tokens_ under dp, where a rank may receive up to R max_tokens_ k).
    const int64_t per_src = (dp ? max_tokens_ : T) * k, cap = per_src;
    auto mb_lo = [&](int m) { return Tn * m / M; };  // micro-batch m: own tokens [mb_lo(m), mb_lo(m + 1))
    auto at = [&](std::vector<int64_t>& v, int m, int r) -> int64_t& { return v[static_cast<size_t>(m * R + r)]; };
    EpStageTimes& et = st.times;
    const EpStageTimes before = et;
    Timer timer;
    auto lap = [&](double& slot) {
        slot += timer.seconds();
        timer.reset();
    };

    // ---- route (own slice)
    if (Tn > 0) route_tokens(pool, x + t0 * D, Tn, b, obs, obs.trace_token_base + t0);
    else routing_ = Routing{0, k, E, b.ids, b.weights, b.scores, b.select};
    plan_ = DispatchPlan{};
    lap(et.route);

    // ---- layout: destination of each (token, slot); records grouped by micro-batch, then by
    // destination, in (token, slot) order. slot_send = record index.
    std::fill(st.send_rows.begin(), st.send_rows.end(), 0);
    for (int64_t i = 0; i < Tn * k; ++i) {
        const int32_t e = routing_.ids[i];
        const int d = e < 0 ? -1 : pl.pick(L, e, static_cast<uint64_t>((t0 + i / k) * k + i % k));
        st.dest[static_cast<size_t>(i)] = d;
        const int m = M == 1 || i / k < mb_lo(1) ? 0 : 1;
        if (d >= 0) ++at(st.send_rows, m, d);
    }
    int64_t ns = 0;
    for (int m = 0; m < M; ++m)
        for (int r = 0; r < R; ++r) {
            at(st.cursor, m, r) = ns;
            at(st.sd, m, r) = ns * rec;
            at(st.sb, m, r) = at(st.send_rows, m, r) * rec;
            ns += at(st.send_rows, m, r);
        }
    for (int64_t i = 0; i < Tn * k; ++i) {
        const int d = st.dest[static_cast<size_t>(i)];
        if (d < 0) {
            st.slot_send[static_cast<size_t>(i)] = -1;
            continue;
        }
        const int m = M == 1 || i / k < mb_lo(1) ? 0 : 1;
        const int64_t idx = at(st.cursor, m, d)++;
        st.slot_send[static_cast<size_t>(i)] = static_cast<int32_t>(idx);
        char* r = st.send_buf.data() + idx * rec;
        const int32_t e = routing_.ids[i];
        std::memcpy(r, &e, 4);
        ep_encode_row(x + (t0 + i / k) * D, D, cz, r + 4);
    }
    lap(et.layout);

    // ---- counts first: the first point where ranks meet, so its time is mostly waiting
    for (int m = 0; m < M; ++m) g.all_to_all_i64(&at(st.send_rows, m, 0), &at(st.recv_rows, m, 0));
    lap(et.wait);
    int64_t nr = 0;
    int64_t nr_mb[3] = {0, 0, 0};  // first received record of each micro-batch
    for (int m = 0; m < M; ++m) {
        for (int r = 0; r < R; ++r) {
            const int64_t n = at(st.recv_rows, m, r);
            if (n < 0 || n > per_src)
                throw_error("ep", "rank ", me, " layer ", L, ": rank ", r, " announces ", n, " rows, more than ",
                            per_src, " (ranks disagree about the batch)");
            at(st.rd, m, r) = nr * rec;
            at(st.rb, m, r) = n * rec;
            nr += n;
        }
        nr_mb[m + 1] = nr;
        if (!dp && nr > T * k)
            throw_error("ep", "rank ", me, " layer ", L, ": ", nr, " rows received for a batch of ", T, " tokens x ", k,
                        " slots (ranks disagree about the batch)");
    }
    if (static_cast<size_t>(nr) > st.recv_pos.size()) {  // dp only: grows to the largest step seen
        st.recv_buf.resize(static_cast<size_t>(nr * rec));
        st.recv_pos.resize(static_cast<size_t>(nr));
        st.ret_send.resize(static_cast<size_t>(nr * D));
    }
    et.max_rows_recv = std::max(et.max_rows_recv, nr);
    int hd[2] = {-1, -1}, hc[2] = {-1, -1};
    for (int m = 0; m < M; ++m)
        hd[m] = g.start_all_to_all_v(st.send_buf.data(), &at(st.sb, m, 0), &at(st.sd, m, 0), st.recv_buf.data(),
                                     &at(st.rb, m, 0), &at(st.rd, m, 0));
    lap(et.dispatch);

    for (int m = 0; m < M; ++m) {
        g.wait(hd[m]);
        lap(et.dispatch);
        // ---- group this micro-batch's records by expert (counting sort), decode, grouped FFN; in
        // chunks of at most cap rows (one chunk unless dp). Each output row is independent of the
        // other rows of its group, so the chunking does not change any bit.
        const int64_t base = nr_mb[m], n = nr_mb[m + 1] - base;
        for (int64_t c0 = base; c0 < base + n; c0 += cap) {
            const int64_t c1 = std::min(base + n, c0 + cap);
            std::fill(b.counts, b.counts + E, 0);
            for (int64_t i = c0; i < c1; ++i) {
                int32_t e;
                std::memcpy(&e, st.recv_buf.data() + i * rec, 4);
                if (e < 0 || e >= E || !pl.holds(L, e, me))
                    throw_error("ep", "rank ", me, " layer ", L, ": received a row for expert ", e,
                                ", which this rank does not hold (ranks use different placements)");
                ++b.counts[e];
            }
            b.offsets[0] = 0;
            for (int e = 0; e < E; ++e) b.offsets[e + 1] = b.offsets[e] + b.counts[e];
            std::fill(b.counts, b.counts + E, 0);
            for (int64_t i = c0; i < c1; ++i) {
                const char* r = st.recv_buf.data() + i * rec;
                int32_t e;
                std::memcpy(&e, r, 4);
                const int64_t pos = b.offsets[e] + b.counts[e]++;
                st.recv_pos[static_cast<size_t>(i)] = static_cast<int32_t>(pos);
                ep_decode_row(r + 4, D, cz, b.xp + pos * D);
            }
            GroupedFfn::run(pool, ffn_, E, b.offsets, b.xp, b.h, b.yp, b.ffn_scratch, b.act_scratch);
            for (int64_t i = c0; i < c1; ++i)
                std::memcpy(st.ret_send.data() + i * D, b.yp + st.recv_pos[static_cast<size_t>(i)] * D,
                            static_cast<size_t>(row_f32));
        }
        lap(et.experts);
        // ---- combine: expert outputs back to their source ranks (f32), in the order received
        for (int r = 0; r < R; ++r) {
            at(st.cb, m, r) = at(st.recv_rows, m, r) * row_f32;
            at(st.cd, m, r) = at(st.rd, m, r) / rec * row_f32;
            at(st.qb, m, r) = at(st.send_rows, m, r) * row_f32;
            at(st.qd, m, r) = at(st.sd, m, r) / rec * row_f32;
        }
        hc[m] = g.start_all_to_all_v(st.ret_send.data(), &at(st.cb, m, 0), &at(st.cd, m, 0), st.ret_recv.data(),
                                     &at(st.qb, m, 0), &at(st.qd, m, 0));
        lap(et.combine);
    }

    // ---- shared experts of the own slice (while the combine is in flight)
    if (spec_.n_shared > 0 && Tn > 0) shared_experts(pool, x + t0 * D, Tn, b);
    lap(et.shared);
    for (int m = 0; m < M; ++m) g.wait(hc[m]);
    // ---- weighted sum of the own slice, in slot order
    DispatchPlan back;
    back.slot_row = st.slot_send.data();
    if (Tn > 0)
        combine(pool, routing_, back, st.ret_recv.data(), D, spec_.n_shared > 0 ? b.ys : nullptr,
                spec_.shared_gate_sigmoid ? b.sgate : nullptr, y + t0 * D);
    lap(et.combine);

    // ---- replicated: every rank gets the whole y (dp: y is this rank's rows only, nothing to do)
    if (!dp) {
        for (int r = 0; r < R; ++r) {
            st.sb[static_cast<size_t>(r)] = (lo(r + 1) - lo(r)) * row_f32;
            st.sd[static_cast<size_t>(r)] = lo(r) * row_f32;
        }
        g.all_gather_v(y + t0 * D, y, st.sb.data(), st.sd.data());
    }
    lap(et.gather);

    int64_t rows_out = 0, sent_back = 0;
    for (int m = 0; m < M; ++m)
        for (int r = 0; r < R; ++r)
            if (r != me) {
                rows_out += at(st.send_rows, m, r);
                sent_back += at(st.recv_rows, m, r) * row_f32;
                if (g.node_of(r) != g.node_of(me))
                    et.inter_node_bytes += at(st.send_rows, m, r) * rec + at(st.recv_rows, m, r) * row_f32;
            }
    if (!dp)
        for (int r = 0; r < R; ++r)
            if (g.node_of(r) != g.node_of(me)) et.inter_node_bytes += Tn * row_f32;
    et.rows_sent += rows_out;
    et.bytes_sent += rows_out * rec + sent_back;
    if (!dp) et.gather_bytes += Tn * row_f32 * (R - 1);
    et.tokens += T;
    ++et.calls;
    if (StageTimes* t = obs.times) {  // the single-process stage names, for the existing reports
        t->route += et.route - before.route;
        t->dispatch += et.layout - before.layout + et.wait - before.wait + et.dispatch - before.dispatch;
        t->experts += et.experts - before.experts;
        t->shared += et.shared - before.shared;
        t->combine += et.combine - before.combine + et.gather - before.gather;
        ++t->calls;
    }
}

}  // namespace moe
