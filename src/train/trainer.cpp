// The training loop (see trainer.h).
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe_learn.h"
#include "train/export.h"

namespace moe::train {
namespace {

constexpr const char* kC = "train";

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error(kC, "cannot open --data ", path, ": ", std::strerror(errno));
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Data {
    std::vector<int32_t> train, val;
    std::vector<int32_t> piece_bytes;  // bytes of each token's text
};

struct EvalOut {
    double loss = 0, bpb = 0;
    std::vector<std::vector<int64_t>> counts;  // per layer, slots per expert over the validation text
};

// Data parallelism: each pool thread owns a replica of the net (its own activations) and runs a
// contiguous share of the batch single-threaded; one pool region per step instead of hundreds of
// small ones (on a shared 2-core machine a barrier per GEMM costs more than it saves). Gradients
// are combined in replica order, so a run is deterministic for a given seed and thread count.
struct Replicas {
    std::vector<Net<float>> nets;
    explicit Replicas(const NetConfig& c, int n) {
        for (int i = 0; i < n; ++i) nets.emplace_back(c);
    }
    // Rows [b0, b1) of the batch for replica r of n.
    static void share(int64_t B, int r, int n, int64_t& b0, int64_t& b1) {
        b0 = B * r / n;
        b1 = B * (r + 1) / n;
    }
};

EvalOut evaluate(ThreadPool& pool, Replicas& reps, const std::vector<float>& params, const Data& d, int64_t B,
                 int64_t max_windows, const std::vector<std::vector<float>>* bias) {
    const int64_t T = reps.nets[0].config().n_ctx;
    int64_t nw = (static_cast<int64_t>(d.val.size()) - 1) / T;
    if (max_windows > 0) nw = std::min(nw, max_windows);
    const int n = static_cast<int>(reps.nets.size());
    std::vector<double> nats(static_cast<size_t>(n), 0.0), bytes(static_cast<size_t>(n), 0.0);
    std::vector<int64_t> count(static_cast<size_t>(n), 0);
    std::vector<std::vector<std::vector<int64_t>>> loads(static_cast<size_t>(n));
    pool.run([&](int r, int) {
        if (r >= n) return;
        Net<float>& net = reps.nets[static_cast<size_t>(r)];
        net.params = params;
        int64_t w0, w1;
        Replicas::share(nw, r, n, w0, w1);
        std::vector<int32_t> tok, tgt;
        for (int64_t wa = w0; wa < w1; wa += B) {
            const int64_t b = std::min(B, w1 - wa);
            tok.resize(static_cast<size_t>(b * T));
            tgt.resize(static_cast<size_t>(b * T));
            for (int64_t i = 0; i < b; ++i)
                for (int64_t t = 0; t < T; ++t) {
                    tok[static_cast<size_t>(i * T + t)] = d.val[static_cast<size_t>((wa + i) * T + t)];
                    tgt[static_cast<size_t>(i * T + t)] = d.val[static_cast<size_t>((wa + i) * T + t + 1)];
                }
            std::vector<std::vector<int64_t>> c;
            const LossParts l = net.step(nullptr, tok.data(), tgt.data(), b, T, MoeLossSpec{}, bias, false, &c);
            auto& acc = loads[static_cast<size_t>(r)];
            if (acc.empty()) acc = c;
            else
                for (size_t il = 0; il < c.size(); ++il)
                    for (size_t e = 0; e < c[il].size(); ++e) acc[il][e] += c[il][e];
            nats[static_cast<size_t>(r)] += l.ce * static_cast<double>(b * T);
            count[static_cast<size_t>(r)] += b * T;
            for (int32_t t : tgt) bytes[static_cast<size_t>(r)] += d.piece_bytes[static_cast<size_t>(t)];
        }
    });
    double tn = 0, tb = 0;
    int64_t tc = 0;
    for (int r = 0; r < n; ++r) {
        tn += nats[static_cast<size_t>(r)];
        tb += bytes[static_cast<size_t>(r)];
        tc += count[static_cast<size_t>(r)];
    }
    EvalOut o;
    for (const auto& acc : loads) {
        if (o.counts.empty()) o.counts = acc;
        else
            for (size_t il = 0; il < acc.size(); ++il)
                for (size_t e = 0; e < acc[il].size(); ++e) o.counts[il][e] += acc[il][e];
    }
    if (tc == 0) return o;
    o.loss = tn / static_cast<double>(tc);
    o.bpb = tn / std::log(2.0) / tb;
    return o;
}

}  // namespace

LayerLoad layer_load(const std::vector<int64_t>& counts) {
    LayerLoad l;
    l.counts = counts;
    double total = 0, mx = 0;
    for (int64_t c : counts) {
        total += static_cast<double>(c);
        mx = std::max(mx, static_cast<double>(c));
        if (c == 0) ++l.dead;
    }
    if (total <= 0) return l;
    for (int64_t c : counts)
        if (c > 0) {
            const double f = static_cast<double>(c) / total;
            l.entropy_bits -= f * std::log2(f);
        }
    l.max_over_mean = mx / (total / static_cast<double>(counts.size()));
    l.busiest_share = mx / total;
    return l;
}

TrainResult run_training(const TrainSpec& spec) {
    std::FILE* lg = spec.log;
    if (spec.batch < 1) throw_error(kC, "--batch must be >= 1 (got ", spec.batch, ")");
    if (spec.steps < 1) throw_error(kC, "--steps must be >= 1 (got ", spec.steps, ")");
    const std::string ckpt_path = !spec.checkpoint.empty() ? spec.checkpoint
                                  : !spec.resume.empty()   ? spec.resume
                                  : !spec.out.empty()      ? spec.out + ".ckpt"
                                                           : std::string();
    const std::string text = read_text(spec.data);
    // Validation = the last 10% of the bytes, starting at a line start.
    size_t cut = text.size() - text.size() / 10;
    while (cut < text.size() && text[cut - 1] != '\n') ++cut;
    if (cut >= text.size() || cut < 2)
        throw_error(kC, "--data ", spec.data, " is too short to split into training and validation text (",
                    text.size(), " bytes)");
    const std::string_view train_text(text.data(), cut), val_text(text.data() + cut, text.size() - cut);

    Checkpoint ck;
    NetConfig cfg = spec.net;
    tokenizer::Vocab vocab;
    int64_t step0 = 0, steps = spec.steps;
    uint64_t seed = spec.init.seed;
    // Settings a resumed run takes from its checkpoint (the command line's are ignored).
    AdamSpec adam = spec.adam;
    MoeLossSpec loss = spec.loss;
    double bias_rate = spec.bias_rate;
    int64_t B = spec.batch;
    if (!spec.resume.empty()) {
        ck = read_checkpoint(spec.resume);
        cfg = ck.config;
        vocab = ck.vocab;
        step0 = ck.step;
        steps = ck.steps;
        seed = ck.seed;
        adam = ck.adam;
        loss = ck.loss;
        bias_rate = ck.bias_rate;
        B = ck.batch;
        std::fprintf(lg, "train: resuming %s at step %lld of %lld\n", spec.resume.c_str(),
                     static_cast<long long>(step0), static_cast<long long>(steps));
    } else {
        Timer t;
        vocab = to_vocab(learn_bpe(train_text, spec.vocab_size));
        std::fprintf(lg, "train: learned a byte-level BPE vocabulary of %zu tokens (%zu merges) in %.1f s\n",
                     vocab.size(), vocab.merges.size(), t.seconds());
        cfg.n_vocab = static_cast<int64_t>(vocab.size());
    }
    const tokenizer::Tokenizer tok(vocab);
    Data d;
    tokenizer::EncodeOptions eo;
    eo.add_bos = eo.add_eos = false;
    d.train = tok.encode(train_text, eo);
    d.val = tok.encode(val_text, eo);
    for (size_t i = 0; i < vocab.size(); ++i)
        d.piece_bytes.push_back(static_cast<int32_t>(tok.token_to_piece(static_cast<int32_t>(i)).size()));
    const int64_t T = cfg.n_ctx;
    if (static_cast<int64_t>(d.train.size()) < T + 2 || static_cast<int64_t>(d.val.size()) < T + 1)
        throw_error(kC, "--data ", spec.data, " gives ", d.train.size(), " training and ", d.val.size(),
                    " validation tokens; need more than --ctx ", T, " of each (use a longer text or a smaller --ctx)");

    Net<float> net(cfg);
    AdamW opt(net.params.size());
    std::vector<std::vector<float>> bias(static_cast<size_t>(cfg.n_layer));
    if (spec.resume.empty()) {
        InitSpec is = spec.init;
        net.init(is);
    } else {
        net.params = ck.params;
        opt = ck.opt;
        bias = ck.sel_bias;
    }
    const bool use_bias = bias_rate > 0 || std::any_of(bias.begin(), bias.end(), [](auto& b) { return !b.empty(); });
    if (use_bias)
        for (auto& b : bias) b.resize(static_cast<size_t>(cfg.n_expert), 0.0f);
    TrainResult res;
    res.n_params = static_cast<int64_t>(net.params.size());
    res.n_active = active_params(cfg);
    res.n_vocab = cfg.n_vocab;
    res.bytes_per_token = static_cast<double>(val_text.size()) / static_cast<double>(d.val.size());
    std::fprintf(lg,
                 "train: %lld params (%lld active per token), vocab %lld, %d layers, embd %lld, %d experts top-%d, "
                 "ff %lld%s, ctx %lld, batch %lld, %zu train / %zu val tokens (%.2f bytes/token), %d threads\n",
                 static_cast<long long>(res.n_params), static_cast<long long>(res.n_active),
                 static_cast<long long>(cfg.n_vocab), static_cast<int>(cfg.n_layer), static_cast<long long>(cfg.n_embd),
                 cfg.n_expert, cfg.n_expert_used, static_cast<long long>(cfg.n_ff),
                 cfg.qwen2moe() ? (" + shared expert " + std::to_string(cfg.n_ff_shexp) + " (qwen2moe)").c_str() : "",
                 static_cast<long long>(T),
                 static_cast<long long>(B), d.train.size(), d.val.size(), res.bytes_per_token, spec.threads);

    ThreadPool pool(spec.threads);
    Replicas reps(cfg, static_cast<int>(std::min<int64_t>(spec.threads, B)));
    auto save = [&](int64_t done) {
        if (ckpt_path.empty() || cfg.n_expert < 2) return;
        Checkpoint c;
        c.config = cfg;
        c.vocab = vocab;
        c.params = net.params;
        c.opt = opt;
        c.sel_bias = use_bias ? bias : std::vector<std::vector<float>>(static_cast<size_t>(cfg.n_layer));
        c.step = done;
        c.steps = steps;
        c.seed = seed;
        c.adam = adam;
        c.loss = loss;
        c.bias_rate = bias_rate;
        c.batch = B;
        write_checkpoint(ckpt_path, c);
        std::fprintf(lg, "train: checkpoint at step %lld -> %s\n", static_cast<long long>(done), ckpt_path.c_str());
    };

    std::vector<int32_t> tok_b(static_cast<size_t>(B * T)), tgt_b(static_cast<size_t>(B * T));
    std::vector<std::vector<int64_t>> counts, window(static_cast<size_t>(cfg.n_layer),
                                                     std::vector<int64_t>(static_cast<size_t>(cfg.n_expert), 0));
    std::vector<std::vector<int64_t>> cwindow = window;  // collapse detector
    int64_t cwin_n = 0;
    double win_ce = 0, win_aux = 0, win_z = 0;
    int64_t win_n = 0;
    Timer wall;
    double train_s = 0, train_cpu = 0;  // wall and process CPU seconds (all threads) of the steps
    int64_t step = step0;
    for (; step < steps; ++step) {
        Timer st;
        const std::clock_t c0 = std::clock();
        Rng rng(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(step) * 0xd1b54a32d192ed03ull + 1);
        const uint64_t span = d.train.size() - static_cast<size_t>(T) - 1;
        for (int64_t b = 0; b < B; ++b) {
            const size_t s0 = static_cast<size_t>(rng.below(span + 1));
            for (int64_t t = 0; t < T; ++t) {
                tok_b[static_cast<size_t>(b * T + t)] = d.train[s0 + static_cast<size_t>(t)];
                tgt_b[static_cast<size_t>(b * T + t)] = d.train[s0 + static_cast<size_t>(t) + 1];
            }
        }
        const int nrep = static_cast<int>(reps.nets.size());
        std::vector<LossParts> parts(static_cast<size_t>(nrep));
        std::vector<std::vector<std::vector<int64_t>>> rcounts(static_cast<size_t>(nrep));
        pool.run([&](int r, int) {
            if (r >= nrep) return;
            Net<float>& rn = reps.nets[static_cast<size_t>(r)];
            rn.params = net.params;
            std::fill(rn.grads.begin(), rn.grads.end(), 0.0f);
            int64_t b0, b1;
            Replicas::share(B, r, nrep, b0, b1);
            parts[static_cast<size_t>(r)] = rn.step(nullptr, tok_b.data() + b0 * T, tgt_b.data() + b0 * T, b1 - b0, T,
                                                    loss, use_bias ? &bias : nullptr, true,
                                                    &rcounts[static_cast<size_t>(r)]);
        });
        // Mean over the batch: replica r's mean-loss gradient weighs (its rows) / B.
        LossParts l;
        std::fill(net.grads.begin(), net.grads.end(), 0.0f);
        counts.assign(static_cast<size_t>(cfg.n_layer), std::vector<int64_t>(static_cast<size_t>(cfg.n_expert), 0));
        for (int r = 0; r < nrep; ++r) {
            int64_t b0, b1;
            Replicas::share(B, r, nrep, b0, b1);
            const float wr = static_cast<float>(b1 - b0) / static_cast<float>(B);
            const auto& g = reps.nets[static_cast<size_t>(r)].grads;
            for (size_t i = 0; i < g.size(); ++i) net.grads[i] += wr * g[i];
            const LossParts& p = parts[static_cast<size_t>(r)];
            l.ce += wr * p.ce, l.aux += wr * p.aux, l.z += wr * p.z;
            for (int64_t il = 0; il < cfg.n_layer; ++il)
                for (int e = 0; e < cfg.n_expert; ++e)
                    counts[static_cast<size_t>(il)][static_cast<size_t>(e)] +=
                        rcounts[static_cast<size_t>(r)][static_cast<size_t>(il)][static_cast<size_t>(e)];
        }
        if (!std::isfinite(l.total()))
            throw_error(kC, "the loss became ", l.total(), " at step ", step,
                        " (diverged: lower --lr or raise --warmup; resume from the last checkpoint)");
        const double progress = spec.time_limit > 0 ? std::max(static_cast<double>(step) / steps, train_s / spec.time_limit)
                                                    : static_cast<double>(step) / steps;
        const double lr = lr_at(adam, step, steps, progress);
        const double gnorm = opt.update(&pool, adam, lr, net.layout(), net.params, net.grads);
        for (int64_t il = 0; il < cfg.n_layer; ++il) {
            const auto& c = counts[static_cast<size_t>(il)];
            for (int e = 0; e < cfg.n_expert; ++e) window[static_cast<size_t>(il)][static_cast<size_t>(e)] += c[static_cast<size_t>(e)];
            if (bias_rate > 0) {  // DeepSeek-V3: b_i += u * sign(mean load - load_i)
                double mean = 0;
                for (int64_t v : c) mean += static_cast<double>(v);
                mean /= cfg.n_expert;
                for (int e = 0; e < cfg.n_expert; ++e) {
                    const double diff = mean - static_cast<double>(c[static_cast<size_t>(e)]);
                    bias[static_cast<size_t>(il)][static_cast<size_t>(e)] +=
                        static_cast<float>(bias_rate * (diff > 0 ? 1 : diff < 0 ? -1 : 0));
                }
            }
        }
        train_s += st.seconds();
        train_cpu += static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
        win_ce += l.ce, win_aux += l.aux, win_z += l.z;
        ++win_n;
        const bool last = step + 1 == steps || step + 1 == spec.stop_at ||
                          (spec.time_limit > 0 && train_s >= spec.time_limit);
        // Collapse detector: an expert's share of the slots over a whole window under
        // collapse_share x the fair share 1/E.
        const int64_t cw = spec.collapse_window > 0 ? spec.collapse_window : spec.log_every;
        if (cfg.n_expert > 1) {
            for (int64_t il = 0; il < cfg.n_layer; ++il)
                for (int e = 0; e < cfg.n_expert; ++e)
                    cwindow[static_cast<size_t>(il)][static_cast<size_t>(e)] +=
                        counts[static_cast<size_t>(il)][static_cast<size_t>(e)];
            ++cwin_n;
        }
        if (cfg.n_expert > 1 && ((step + 1) % cw == 0 || last)) {
            for (int64_t il = 0; il < cfg.n_layer; ++il) {
                const auto& cc = cwindow[static_cast<size_t>(il)];
                double total = 0;
                for (int64_t v : cc) total += static_cast<double>(v);
                for (int e = 0; e < cfg.n_expert; ++e) {
                    const double share = static_cast<double>(cc[static_cast<size_t>(e)]) / std::max(1.0, total);
                    if (share < spec.collapse_share / cfg.n_expert) {
                        ++res.collapse_warnings;
                        std::fprintf(lg, "  warning: collapse? layer %lld expert %d got %.2f%% of the slots over the "
                                     "last %lld steps (fair share %.1f%%); try --aux-loss or --bias-balance\n",
                                     static_cast<long long>(il), e, 100 * share, static_cast<long long>(cwin_n),
                                     100.0 / cfg.n_expert);
                    }
                }
            }
            for (auto& w : cwindow) std::fill(w.begin(), w.end(), 0);
            cwin_n = 0;
        }
        if ((step + 1) % spec.log_every == 0 || last) {
            res.train_loss = win_ce / win_n;
            std::fprintf(lg, "step %6lld/%lld  lr %.2e  loss %.4f (ce %.4f aux %.4f z %.4f)  |g| %.3f  %.0f tok/s  %.0f s\n",
                         static_cast<long long>(step + 1), static_cast<long long>(steps), lr,
                         (win_ce + win_aux + win_z) / win_n, win_ce / win_n, win_aux / win_n, win_z / win_n, gnorm,
                         static_cast<double>((step + 1 - step0) * B * T) / train_s, wall.seconds());
            res.load.clear();
            if (cfg.n_expert > 1)
                for (int64_t il = 0; il < cfg.n_layer; ++il) {
                    const LayerLoad ld = layer_load(window[static_cast<size_t>(il)]);
                    std::fprintf(lg, "  load L%lld: entropy %.3f/%.3f bits  max/mean %.2f  busiest %.1f%%  dead %d\n",
                                 static_cast<long long>(il), ld.entropy_bits, std::log2(cfg.n_expert), ld.max_over_mean,
                                 100 * ld.busiest_share, ld.dead);
                    res.load.push_back(ld);
                }
            for (auto& w : window) std::fill(w.begin(), w.end(), 0);
            win_ce = win_aux = win_z = 0;
            win_n = 0;
        }
        if (spec.eval_every > 0 && (step + 1) % spec.eval_every == 0 && !last) {
            const EvalOut ev = evaluate(pool, reps, net.params, d, B, spec.eval_windows, use_bias ? &bias : nullptr);
            std::fprintf(lg, "eval  step %lld  val loss %.4f  val bpb %.4f\n", static_cast<long long>(step + 1), ev.loss, ev.bpb);
        }
        if (spec.save_every > 0 && (step + 1) % spec.save_every == 0 && !last) save(step + 1);
        if (last) {
            ++step;
            break;
        }
    }
    res.steps = step;
    res.seconds = train_s;
    res.tokens_per_s = train_s > 0 ? static_cast<double>((step - step0) * B * T) / train_s : 0;
    const EvalOut ev = evaluate(pool, reps, net.params, d, B, 0, use_bias ? &bias : nullptr);
    res.val_loss = ev.loss;
    res.val_bpb = ev.bpb;
    std::fprintf(lg, "final: step %lld  val loss %.4f nats/token  val bpb %.4f  train %.1f s  %.0f tok/s  (cpu %.1f s: %.0f tok per cpu-s)\n",
                 static_cast<long long>(step), ev.loss, ev.bpb, train_s, res.tokens_per_s, train_cpu,
                 train_cpu > 0 ? static_cast<double>((step - step0) * B * T) / train_cpu : 0.0);
    res.val_loss_no_bias = res.val_bpb_no_bias = NAN;
    if (use_bias) {
        const EvalOut nb = evaluate(pool, reps, net.params, d, B, 0, nullptr);
        res.val_loss_no_bias = nb.loss;
        res.val_bpb_no_bias = nb.bpb;
        std::fprintf(lg, "final: without the selection bias (routing as the exported file does): val loss %.4f  "
                     "val bpb %.4f (%+.4f)\n", nb.loss, nb.bpb, nb.bpb - ev.bpb);
    }
    res.val_load.clear();
    if (cfg.n_expert > 1)
        for (size_t il = 0; il < ev.counts.size(); ++il) {
            const LayerLoad ld = layer_load(ev.counts[il]);
            res.val_load.push_back(ld);
            std::fprintf(lg, "  val load L%zu: entropy %.3f/%.3f bits  max/mean %.2f  busiest %.1f%%  dead %d\n", il,
                         ld.entropy_bits, std::log2(cfg.n_expert), ld.max_over_mean, 100 * ld.busiest_share, ld.dead);
        }
    if (spec.save_every > 0 || !spec.resume.empty()) save(step);
    if (!spec.out.empty()) {
        if (use_bias)
            std::fprintf(lg, "train: warning: %s has no selection bias (qwen3moe in llama.cpp has no exp_probs_b "
                         "tensor), so it routes without the bias it was balanced with: val bpb %.4f with the bias, "
                         "%.4f without (the checkpoint keeps the bias)\n",
                         spec.out.c_str(), ev.bpb, res.val_bpb_no_bias);
        write_model(spec.out, net, vocab, spec.out_type, spec.name);
        std::fprintf(lg, "train: wrote %s (%s)\n", spec.out.c_str(), dtype_name(spec.out_type));
    }
    return res;
}

}  // namespace moe::train
