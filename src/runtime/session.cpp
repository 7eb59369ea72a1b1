// Session: prefill / decode over a Model with a KV cache, sampling and streaming (session.h).
#include "runtime/session.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"
#include "tokenizer/tokenizer.h"

namespace moe::runtime {

namespace {
KvCacheSpec kv_spec(const model::Model& m, const SessionOptions& o, int64_t n_ctx) {
    const model::ModelConfig& c = m.config();
    KvCacheSpec s;
    s.n_layer = c.n_layer;
    s.n_ctx = n_ctx;
    s.n_seq = o.n_seq;
    s.n_head_kv = m.desc().kv.n_head_kv;
    s.head_dim_k = m.desc().kv.head_dim_k;
    s.head_dim_v = m.desc().kv.head_dim_v;
    s.type = o.kv_type;
    const model::LayerDesc& ld = m.desc().layer;
    if (!ld.mla && !o.swa_full) {
        for (int64_t il = 0; il < c.n_layer; ++il) s.window.push_back(ld.window(il));
        s.max_batch = m.options().max_batch;
    }
    return s;
}
int64_t resolve_ctx(const model::Model& m, const SessionOptions& o) {
    const int64_t model_ctx = m.options().n_ctx;
    if (o.n_ctx <= 0) return model_ctx;
    if (o.n_ctx > model_ctx)
        throw_error("session", "context of ", o.n_ctx, " tokens is longer than the ", model_ctx,
                    " the model was loaded for");
    return o.n_ctx;
}
std::string fmt(const char* f, double a) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, a);
    return buf;
}
}  // namespace

std::string moe_stage_split(const StageTimes& t) {
    const double tot = t.total();
    if (tot <= 0) return "no MoE time";
    auto pct = [&](double v) { return fmt("%.0f%%", 100.0 * v / tot); };
    return "route " + pct(t.route) + " dispatch " + pct(t.dispatch) + " experts " + pct(t.experts) + " combine " +
           pct(t.combine) + " shared " + pct(t.shared);
}

std::string expert_load_summary(const model::ForwardStats& s) {
    struct Hot {
        size_t layer;
        int expert;
        double share;
    };
    std::vector<Hot> hot;
    double imb_sum = 0, imb_max = 0;
    size_t imb_layer = 0, n_moe = 0;
    for (size_t il = 0; il < s.routing.size(); ++il) {
        const RoutingStats& r = s.routing[il];
        if (r.n_expert() == 0 || r.assignments() == 0) continue;
        ++n_moe;
        const double imb = r.imbalance();
        imb_sum += imb;
        if (imb > imb_max) imb_max = imb, imb_layer = il;
        for (int e = 0; e < r.n_expert(); ++e)
            hot.push_back({il, e, static_cast<double>(r.counts()[static_cast<size_t>(e)]) / r.assignments()});
    }
    if (n_moe == 0) return "expert load: no MoE layers ran";
    std::stable_sort(hot.begin(), hot.end(), [](const Hot& a, const Hot& b) { return a.share > b.share; });
    std::string out = "expert load: imbalance (max/mean) mean " + fmt("%.2f", imb_sum / n_moe) + ", max " +
                      fmt("%.2f", imb_max) + " (layer " + std::to_string(imb_layer) + "); busiest:";
    for (size_t i = 0; i < std::min<size_t>(3, hot.size()); ++i)
        out += " L" + std::to_string(hot[i].layer) + "/e" + std::to_string(hot[i].expert) + " " +
               fmt("%.0f%%", 100.0 * hot[i].share);
    return out;
}

std::string GenerateResult::stats_line() const {
    std::string out = "prompt " + std::to_string(prompt_tokens.size()) + " tok @ " + fmt("%.1f", prompt_tps()) +
                      " tok/s | gen " + std::to_string(tokens.size()) + " tok @ " + fmt("%.1f", gen_tps()) +
                      " tok/s";
    if (stats.total > 0)
        out += " | MoE " + fmt("%.0f%%", 100.0 * stats.moe / stats.total) + " of forward (" +
               moe_stage_split(stats.moe_stages) + "), attention " +
               fmt("%.0f%%", 100.0 * stats.attn_proj / stats.total);
    out += "\n" + expert_load_summary(stats);
    return out;
}

Session::Session(model::Model& model, ThreadPool& pool, const SessionOptions& opts)
    : model_(model), pool_(pool), n_ctx_(resolve_ctx(model, opts)), kv_(kv_spec(model, opts, n_ctx_)), fwd_(model) {
    stats_.reset(model.config().n_layer, static_cast<int>(model.config().n_expert));
}

int64_t Session::forward(const std::vector<model::BatchRow>& rows, float* logits) {
    return fwd_.run(pool_, rows.data(), static_cast<int64_t>(rows.size()), kv_, logits, &stats_);
}

void Session::eval(int64_t seq, const std::vector<int32_t>& tokens, float* logits, bool all_logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) return;
    if (seq < 0 || seq >= kv_.n_seq()) throw_error("session", "sequence ", seq, " out of range");
    // The whole input must fit (checked before anything is computed).
    kv_.check_append(seq, n);
    const int64_t V = model_.config().n_vocab;
    const int64_t B = fwd_.max_batch();
    int64_t pos = kv_.length(seq);
    for (int64_t i0 = 0; i0 < n; i0 += B) {
        const int64_t m = std::min(B, n - i0);
        rows_.resize(static_cast<size_t>(m));
        for (int64_t j = 0; j < m; ++j) {
            const int64_t i = i0 + j;
            rows_[static_cast<size_t>(j)] = {tokens[static_cast<size_t>(i)], static_cast<int32_t>(pos + j),
                                             static_cast<int32_t>(seq), logits && (all_logits || i == n - 1)};
        }
        float* out = !logits ? nullptr : all_logits ? logits + i0 * V : logits;
        fwd_.run(pool_, rows_.data(), m, kv_, out, &stats_);
        pos += m;
    }
}

GenerateResult Session::generate(const std::string& prompt, const GenerateOptions& opts,
                                 const std::function<void(const std::string&)>& on_piece) {
    const tokenizer::Tokenizer& tok = model_.tokenizer();
    GenerateResult res;
    res.prompt_tokens = tok.encode(prompt);
    if (res.prompt_tokens.empty())
        throw_error("session", "the prompt is empty (no tokens and the vocabulary adds no BOS); give some text");
    if (opts.n_predict < 0) throw_error("session", "n_predict = ", opts.n_predict, " must be >= 0");
    Sampler sampler(opts.sampler);
    clear(0);
    stats_.reset(model_.config().n_layer, static_cast<int>(model_.config().n_expert));

    const int64_t V = model_.config().n_vocab;
    std::vector<float> logits(static_cast<size_t>(V));
    Timer t;
    eval(0, res.prompt_tokens, logits.data(), false);
    res.prompt_s = t.seconds();
    for (int32_t id : res.prompt_tokens) sampler.accept(id);

    tokenizer::Detokenizer detok(tok);
    auto emit = [&](const std::string& piece) {
        if (piece.empty()) return;
        res.text += piece;
        if (on_piece) on_piece(piece);
    };
    const int32_t eos = tok.vocab().eos_id;
    t.reset();
    for (int64_t i = 0; i < opts.n_predict; ++i) {
        const int32_t id = sampler.sample(logits.data(), V);
        sampler.accept(id);
        if (opts.stop_at_eos && eos >= 0 && id == eos) {
            res.hit_eos = true;
            break;
        }
        res.tokens.push_back(id);
        emit(detok.push(id));
        if (i + 1 == opts.n_predict) break;
        if (kv_.length(0) >= n_ctx_) {
            res.context_full = true;
            break;
        }
        rows_.assign(1, model::BatchRow{id, static_cast<int32_t>(kv_.length(0)), 0, true});
        fwd_.run(pool_, rows_.data(), 1, kv_, logits.data(), &stats_);
    }
    emit(detok.flush());
    res.gen_s = t.seconds();
    res.stats = stats_;
    return res;
}

}  // namespace moe::runtime
