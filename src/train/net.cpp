// The trainable network (see net.h).
#include "train/net.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"
#include "train/attention.h"
#include "train/gemm.h"
#include "train/ops.h"

namespace moe::train {

void NetConfig::validate() const {
    auto pos = [](int64_t v, const char* f) {
        if (v < 1) throw_error("train", f, " must be >= 1 (got ", v, ")");
    };
    pos(n_vocab, "vocabulary size");
    pos(n_embd, "--embd");
    pos(n_layer, "--layers");
    pos(n_head, "--heads");
    pos(n_head_kv, "--kv-heads");
    pos(head_dim, "--head-dim");
    pos(n_ff, "--ff");
    pos(n_expert, "--experts");
    pos(n_ctx, "--ctx");
    if (n_head % n_head_kv != 0)
        throw_error("train", "--heads ", n_head, " must be a multiple of --kv-heads ", n_head_kv);
    if (head_dim % 2 != 0) throw_error("train", "--head-dim ", head_dim, " must be even (RoPE rotates pairs)");
    if (n_expert_used < 1 || n_expert_used > n_expert)
        throw_error("train", "--top-k ", n_expert_used, " must be in [1, --experts ", n_expert, "]");
    if (n_ff_shexp < 0) throw_error("train", "--shared-ff must be >= 0 (got ", n_ff_shexp, ")");
    if (n_ff_shexp > 0 && n_expert < 2)
        throw_error("train", "--shared-ff needs a routed MoE (--experts >= 2, got ", n_expert, ")");
    if (n_ff_shexp > 0 && n_head * head_dim != n_embd)
        throw_error("train", "--shared-ff trains a qwen2moe model, whose attention is n_embd wide: --heads ", n_head,
                    " x --head-dim ", head_dim, " must equal --embd ", n_embd);
    if (n_expert > 1 && n_expert_used == n_expert)
        throw_error("train", "--top-k ", n_expert_used, " equals --experts: that is a dense model; use --experts 1");
}

std::vector<ParamInfo> param_layout(const NetConfig& c) {
    std::vector<ParamInfo> v;
    size_t off = 0;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, bool decay) {
        ParamInfo p;
        p.name = name;
        p.shape = std::move(shape);
        p.size = 1;
        for (int64_t d : p.shape) p.size *= static_cast<size_t>(d);
        p.offset = off;
        p.decay = decay;
        off += p.size;
        v.push_back(std::move(p));
    };
    const int64_t D = c.n_embd, E = c.n_expert, F = c.n_ff;
    add("token_embd.weight", {D, c.n_vocab}, true);
    add("output_norm.weight", {D}, false);
    add("output.weight", {D, c.n_vocab}, true);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add(b + "attn_norm.weight", {D}, false);
        add(b + "attn_q.weight", {D, c.qd()}, true);
        add(b + "attn_k.weight", {D, c.kd()}, true);
        add(b + "attn_v.weight", {D, c.kd()}, true);
        add(b + "attn_output.weight", {c.qd(), D}, true);
        if (!c.qwen2moe()) {
            add(b + "attn_k_norm.weight", {c.head_dim}, false);
            add(b + "attn_q_norm.weight", {c.head_dim}, false);
        }
        add(b + "ffn_norm.weight", {D}, false);
        if (E > 1) add(b + "ffn_gate_inp.weight", {D, E}, true);
        add(b + "ffn_gate_exps.weight", {D, F, E}, true);
        add(b + "ffn_down_exps.weight", {F, D, E}, true);
        add(b + "ffn_up_exps.weight", {D, F, E}, true);
        if (c.qwen2moe()) {
            add(b + "ffn_gate_inp_shexp.weight", {D}, false);
            add(b + "ffn_gate_shexp.weight", {D, c.n_ff_shexp}, true);
            add(b + "ffn_down_shexp.weight", {c.n_ff_shexp, D}, true);
            add(b + "ffn_up_shexp.weight", {D, c.n_ff_shexp}, true);
        }
    }
    return v;
}

size_t param_count(const std::vector<ParamInfo>& layout) {
    size_t n = 0;
    for (const auto& p : layout) n += p.size;
    return n;
}

int64_t active_params(const NetConfig& c) {
    const int64_t D = c.n_embd;
    const int64_t attn = D * c.qd() + 2 * D * c.kd() + c.qd() * D;
    const int64_t ffn = (c.n_expert > 1 ? D * c.n_expert : 0) + 3 * D * c.n_ff * c.n_expert_used +
                        (c.qwen2moe() ? D + 3 * D * c.n_ff_shexp : 0);
    return c.n_layer * (attn + ffn) + D * c.n_vocab;
}

namespace {
RopeSpec rope_spec(const NetConfig& c) {
    RopeSpec s;
    s.mode = RopeMode::Neox;
    s.head_dim = c.head_dim;
    s.n_rot = c.head_dim;
    s.freq_base = c.rope_base;
    return s;
}
uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
    return h;
}
template <typename R>
void mm(ThreadPool* pool, int64_t M, int64_t N, int64_t K, const R* A, int64_t lda, bool ta, const R* B,
        int64_t ldb, bool tb, R* C, bool acc) {
    Gemm<R> g;
    g.M = M, g.N = N, g.K = K, g.A = A, g.lda = lda, g.trans_a = ta, g.B = B, g.ldb = ldb, g.trans_b = tb;
    g.C = C, g.ldc = N, g.accumulate = acc;
    gemm(pool, g);
}
}  // namespace

template <typename R>
struct Net<R>::Saved {
    struct L {
        std::vector<R> x_in, xn1, r1, qp, kp, rq, rk, q, k, v, P, att, x_mid, xn2, r2;
        MoeSaved<R> moe;
    };
    std::vector<L> layers;
    std::vector<R> x_out, xnf, rf;
    std::vector<int32_t> pos;
};

template <typename R>
Net<R>::Net(const NetConfig& c)
    : c_(c), layout_((c.validate(), param_layout(c))), rope_(rope_spec(c), c.n_ctx),
      sv_(std::make_shared<Saved>()) {
    params.assign(param_count(layout_), R(0));
    grads.assign(params.size(), R(0));
}

template <typename R>
const ParamInfo& Net<R>::info(const std::string& name) const {
    for (const auto& p : layout_)
        if (p.name == name) return p;
    throw_error("train", "no parameter named ", name);
}

template <typename R>
typename Net<R>::Layer Net<R>::layer_ptrs(std::vector<R>& v, int64_t il) const {
    const std::string b = "blk." + std::to_string(il) + ".";
    auto p = [&](const char* n) { return v.data() + info(b + n).offset; };
    Layer L{};
    L.attn_norm = p("attn_norm.weight");
    L.wq = p("attn_q.weight");
    L.wk = p("attn_k.weight");
    L.wv = p("attn_v.weight");
    L.wo = p("attn_output.weight");
    const bool q2 = c_.qwen2moe();
    L.q_norm = q2 ? nullptr : p("attn_q_norm.weight");
    L.k_norm = q2 ? nullptr : p("attn_k_norm.weight");
    L.sh_gate_inp = q2 ? p("ffn_gate_inp_shexp.weight") : nullptr;
    L.sh_gate = q2 ? p("ffn_gate_shexp.weight") : nullptr;
    L.sh_up = q2 ? p("ffn_up_shexp.weight") : nullptr;
    L.sh_down = q2 ? p("ffn_down_shexp.weight") : nullptr;
    L.ffn_norm = p("ffn_norm.weight");
    L.router = c_.n_expert > 1 ? p("ffn_gate_inp.weight") : nullptr;
    L.gate = p("ffn_gate_exps.weight");
    L.up = p("ffn_up_exps.weight");
    L.down = p("ffn_down_exps.weight");
    return L;
}

template <typename R>
void Net<R>::init(const InitSpec& s) {
    const double resid = s.std / std::sqrt(2.0 * static_cast<double>(c_.n_layer));
    for (const auto& p : layout_) {
        Rng rng(s.seed * 0x9e3779b97f4a7c15ull ^ fnv1a(p.name));
        R* d = params.data() + p.offset;
        if (p.shape.size() == 1 && p.name.find("ffn_gate_inp_shexp") == std::string::npos) {  // norm weights
            for (size_t i = 0; i < p.size; ++i) d[i] = R(1);
            continue;
        }
        double sd = s.std;
        if (p.name.find("ffn_gate_inp") != std::string::npos) sd = s.router_std;
        else if (p.name.find("attn_output") != std::string::npos || p.name.find("ffn_down") != std::string::npos)
            sd = resid;
        for (size_t i = 0; i < p.size; ++i) d[i] = static_cast<R>(sd * rng.normal());
    }
}

template <typename R>
LossParts Net<R>::step(ThreadPool* pool, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                       const MoeLossSpec& ls, const std::vector<std::vector<float>>* sel_bias, bool backward,
                       std::vector<std::vector<int64_t>>* counts) {
    MOE_ASSERT(T >= 1 && T <= c_.n_ctx && B >= 1, "batch ", B, "x", T);
    const int64_t N = B * T, D = c_.n_embd, V = c_.n_vocab, qd = c_.qd(), kd = c_.kd();
    const int64_t Hq = c_.n_head, Hkv = c_.n_head_kv, hd = c_.head_dim;
    Saved& S = *sv_;
    S.layers.resize(static_cast<size_t>(c_.n_layer));
    S.pos.resize(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) S.pos[static_cast<size_t>(i)] = static_cast<int32_t>(i % T);
    const AttnShape as{B, T, Hq, Hkv, hd, 1.0 / std::sqrt(static_cast<double>(hd))};
    const MoeShape ms{N, D, c_.n_ff, c_.n_expert, c_.n_expert_used, c_.n_ff_shexp, !c_.qwen2moe()};
    auto sz = [](int64_t n) { return static_cast<size_t>(n); };

    std::vector<R> x(sz(N * D));
    const R* embd = params.data() + info("token_embd.weight").offset;
    for (int64_t i = 0; i < N; ++i) {
        MOE_ASSERT(tokens[i] >= 0 && tokens[i] < V, "token ", tokens[i]);
        std::memcpy(x.data() + i * D, embd + static_cast<int64_t>(tokens[i]) * D, sizeof(R) * D);
    }
    LossParts loss;
    if (counts) counts->assign(sz(c_.n_layer), {});
    for (int64_t il = 0; il < c_.n_layer; ++il) {
        const Layer P = layer_ptrs(params, il);
        auto& L = S.layers[sz(il)];
        L.x_in = x;
        L.xn1.resize(sz(N * D)), L.r1.resize(sz(N));
        rmsnorm_fwd<R>(pool, N, D, c_.rms_eps, x.data(), P.attn_norm, L.xn1.data(), L.r1.data());
        L.qp.resize(sz(N * qd)), L.kp.resize(sz(N * kd)), L.v.resize(sz(N * kd));
        mm<R>(pool, N, qd, D, L.xn1.data(), D, false, P.wq, D, true, L.qp.data(), false);
        mm<R>(pool, N, kd, D, L.xn1.data(), D, false, P.wk, D, true, L.kp.data(), false);
        mm<R>(pool, N, kd, D, L.xn1.data(), D, false, P.wv, D, true, L.v.data(), false);
        L.q.resize(sz(N * qd)), L.k.resize(sz(N * kd)), L.rq.resize(sz(N * Hq)), L.rk.resize(sz(N * Hkv));
        if (P.q_norm) {
            rmsnorm_fwd<R>(pool, N * Hq, hd, c_.rms_eps, L.qp.data(), P.q_norm, L.q.data(), L.rq.data());
            rmsnorm_fwd<R>(pool, N * Hkv, hd, c_.rms_eps, L.kp.data(), P.k_norm, L.k.data(), L.rk.data());
        } else {  // qwen2moe: no q/k norm
            L.q = L.qp;
            L.k = L.kp;
        }
        rope<R>(pool, rope_, L.q.data(), N, Hq, S.pos.data(), false);
        rope<R>(pool, rope_, L.k.data(), N, Hkv, S.pos.data(), false);
        L.P.resize(sz(B * Hq * T * T)), L.att.resize(sz(N * qd));
        attention_fwd<R>(pool, as, L.q.data(), L.k.data(), L.v.data(), L.P.data(), L.att.data());
        mm<R>(pool, N, D, qd, L.att.data(), qd, false, P.wo, qd, true, x.data(), true);  // x += att Wo^T
        L.x_mid = x;
        L.xn2.resize(sz(N * D)), L.r2.resize(sz(N));
        rmsnorm_fwd<R>(pool, N, D, c_.rms_eps, x.data(), P.ffn_norm, L.xn2.data(), L.r2.data());
        MoeWeightsT<R> mw{P.router, P.gate, P.up, P.down,
                          sel_bias && !(*sel_bias)[sz(il)].empty() ? (*sel_bias)[sz(il)].data() : nullptr,
                          P.sh_gate_inp, P.sh_gate, P.sh_up, P.sh_down};
        std::vector<R> y(sz(N * D));
        moe_fwd<R>(pool, ms, ls, mw, L.xn2.data(), y.data(), L.moe);
        for (int64_t i = 0; i < N * D; ++i) x[sz(i)] += y[sz(i)];
        loss.aux += L.moe.aux;
        loss.z += L.moe.z;
        if (counts) (*counts)[sz(il)] = L.moe.counts;
    }
    S.x_out = x;
    S.xnf.resize(sz(N * D)), S.rf.resize(sz(N));
    rmsnorm_fwd<R>(pool, N, D, c_.rms_eps, x.data(), params.data() + info("output_norm.weight").offset, S.xnf.data(),
                   S.rf.data());
    const R* wout = params.data() + info("output.weight").offset;
    logits_.resize(sz(N * V));
    mm<R>(pool, N, V, D, S.xnf.data(), D, false, wout, D, true, logits_.data(), false);
    if (!targets) return loss;
    loss.ce = cross_entropy<R>(pool, N, V, logits_.data(), targets, backward, 1.0) / static_cast<double>(N);
    if (!backward) return loss;

    // ---- backward ----
    std::vector<R> dx(sz(N * D)), dtmp(sz(N * D));
    mm<R>(pool, N, D, V, logits_.data(), V, false, wout, D, false, dtmp.data(), false);  // dxnf = dlogits Wout
    mm<R>(pool, V, D, N, logits_.data(), V, true, S.xnf.data(), D, false,
          grads.data() + info("output.weight").offset, true);  // dWout += dlogits^T xnf
    rmsnorm_bwd<R>(pool, N, D, S.x_out.data(), params.data() + info("output_norm.weight").offset, S.rf.data(),
                   dtmp.data(), dx.data(), grads.data() + info("output_norm.weight").offset);
    std::vector<R> dxn(sz(N * D)), dq(sz(N * qd)), dk(sz(N * kd)), dv(sz(N * kd)), datt(sz(N * qd)),
        dqp(sz(N * qd)), dkp(sz(N * kd));
    for (int64_t il = c_.n_layer - 1; il >= 0; --il) {
        const Layer P = layer_ptrs(params, il);
        const Layer G = layer_ptrs(grads, il);
        auto& L = S.layers[sz(il)];
        MoeWeightsT<R> mw{P.router, P.gate, P.up, P.down,
                          sel_bias && !(*sel_bias)[sz(il)].empty() ? (*sel_bias)[sz(il)].data() : nullptr,
                          P.sh_gate_inp, P.sh_gate, P.sh_up, P.sh_down};
        MoeGradsT<R> mg{G.router, G.gate, G.up, G.down, G.sh_gate_inp, G.sh_gate, G.sh_up, G.sh_down};
        moe_bwd<R>(pool, ms, ls, mw, L.xn2.data(), L.moe, dx.data(), dxn.data(), mg);
        rmsnorm_bwd<R>(pool, N, D, L.x_mid.data(), P.ffn_norm, L.r2.data(), dxn.data(), dtmp.data(), G.ffn_norm);
        for (int64_t i = 0; i < N * D; ++i) dx[sz(i)] += dtmp[sz(i)];
        // attention output projection
        mm<R>(pool, N, qd, D, dx.data(), D, false, P.wo, qd, false, datt.data(), false);      // datt = dx Wo
        mm<R>(pool, D, qd, N, dx.data(), D, true, L.att.data(), qd, false, G.wo, true);      // dWo += dx^T att
        attention_bwd<R>(pool, as, L.q.data(), L.k.data(), L.v.data(), L.P.data(), datt.data(), dq.data(), dk.data(),
                         dv.data());
        rope<R>(pool, rope_, dq.data(), N, Hq, S.pos.data(), true);
        rope<R>(pool, rope_, dk.data(), N, Hkv, S.pos.data(), true);
        if (P.q_norm) {
            rmsnorm_bwd<R>(pool, N * Hq, hd, L.qp.data(), P.q_norm, L.rq.data(), dq.data(), dqp.data(), G.q_norm);
            rmsnorm_bwd<R>(pool, N * Hkv, hd, L.kp.data(), P.k_norm, L.rk.data(), dk.data(), dkp.data(), G.k_norm);
        } else {
            dqp = dq;
            dkp = dk;
        }
        mm<R>(pool, N, D, qd, dqp.data(), qd, false, P.wq, D, false, dxn.data(), false);  // dxn1 = dq Wq + dk Wk + dv Wv
        mm<R>(pool, N, D, kd, dkp.data(), kd, false, P.wk, D, false, dxn.data(), true);
        mm<R>(pool, N, D, kd, dv.data(), kd, false, P.wv, D, false, dxn.data(), true);
        mm<R>(pool, qd, D, N, dqp.data(), qd, true, L.xn1.data(), D, false, G.wq, true);
        mm<R>(pool, kd, D, N, dkp.data(), kd, true, L.xn1.data(), D, false, G.wk, true);
        mm<R>(pool, kd, D, N, dv.data(), kd, true, L.xn1.data(), D, false, G.wv, true);
        rmsnorm_bwd<R>(pool, N, D, L.x_in.data(), P.attn_norm, L.r1.data(), dxn.data(), dtmp.data(), G.attn_norm);
        for (int64_t i = 0; i < N * D; ++i) dx[sz(i)] += dtmp[sz(i)];
    }
    R* gemb = grads.data() + info("token_embd.weight").offset;
    for (int64_t i = 0; i < N; ++i) {
        R* row = gemb + static_cast<int64_t>(tokens[i]) * D;
        for (int64_t c = 0; c < D; ++c) row[c] += dx[sz(i * D + c)];
    }
    return loss;
}

template class Net<float>;
template class Net<double>;

}  // namespace moe::train
