// `moe sim-ep`: all-to-all bytes and time per MoE layer and per token, and rank imbalance, of
// moe-engine's expert-parallel exchange (dist/sim.h) for a model config on N nodes x G ranks, under
// each placement algorithm (or one placement file). Routing comes from a trace (`moe eval|run
// --routing-trace`) or is synthetic (Zipf expert popularity per layer, independent tokens).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "dist/planner.h"
#include "dist/sim.h"
#include "format/gguf.h"
#include "model/config.h"
#include "moe/ep.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void sim_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe sim-ep --config CONFIG --nodes N --ranks-per-node G --link-gbps A,B\n"
                 "                  (--trace FILE | --zipf S [--tokens N] [--seed S]) [--batch T]\n"
                 "                  [--replicas K] [--compress none|bf16|int8] [--placement FILE]\n"
                 "                  [--dp-attention] [--per-layer] [-o md|json]\n"
                 "  Simulates the --ep exchange (dispatch, combine, all-gather) of CONFIG (config.json or\n"
                 "  GGUF) on N nodes x G ranks; A / B: Gbit/s per rank inside / between nodes.\n"
                 "  --trace FILE  routing TSV (moe eval|run --routing-trace; expert ids must fit CONFIG)\n"
                 "  --zipf S      synthetic routing: expert popularity ~ 1 / rank^S, shuffled per layer,\n"
                 "                k distinct experts per token (default 8192 tokens, seed 1)\n"
                 "  --batch T     tokens per step over all ranks (default 128 x ranks)\n"
                 "  --replicas K  extra expert slots per layer for eplb / coact (default 0)\n"
                 "  --placement FILE  simulate only this placement (FILE, or 'contiguous' = --ep's default) on\n"
                 "                every token (else contiguous, eplb, coact, planned on\n"
                 "                the first half of the tokens and simulated on the second half)\n"
                 "  --dp-attention  leave out the all-gather (a design where each rank keeps its tokens\n"
                 "                through attention; moe-engine's --ep replicates attention and gathers)\n"
                 "  --per-layer   one row per layer (md); json always has them\n");
}

std::vector<std::vector<std::vector<int32_t>>> zipf_routing(const model::ModelConfig& c, double S, int64_t n,
                                                           uint64_t seed) {
    const int E = static_cast<int>(c.n_expert), k = static_cast<int>(c.n_expert_used);
    std::vector<std::vector<std::vector<int32_t>>> out(static_cast<size_t>(c.n_layer));
    Rng rng(seed);
    std::vector<double> logw(static_cast<size_t>(E)), key(static_cast<size_t>(E));
    std::vector<int32_t> idx(static_cast<size_t>(E));
    for (int64_t l = 0; l < c.n_layer; ++l) {
        if (!c.is_moe_layer(l)) continue;
        for (int e = 0; e < E; ++e) idx[static_cast<size_t>(e)] = e;
        for (int i = E - 1; i > 0; --i) std::swap(idx[static_cast<size_t>(i)], idx[rng.below(static_cast<uint64_t>(i + 1))]);
        for (int r = 0; r < E; ++r) logw[static_cast<size_t>(idx[static_cast<size_t>(r)])] = -S * std::log(1.0 + r);
        auto& L = out[static_cast<size_t>(l)];
        L.resize(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) {
            // Gumbel top-k = k draws without replacement, proportional to the weights.
            for (int e = 0; e < E; ++e)
                key[static_cast<size_t>(e)] = logw[static_cast<size_t>(e)] - std::log(-std::log(std::max(rng.uniform(), 1e-300)));
            std::vector<int32_t> order(idx);
            std::partial_sort(order.begin(), order.begin() + k, order.end(),
                              [&](int a, int b) { return key[static_cast<size_t>(a)] > key[static_cast<size_t>(b)]; });
            L[static_cast<size_t>(t)].assign(order.begin(), order.begin() + k);
        }
    }
    return out;
}

model::ModelConfig load_config(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error("sim-ep", "cannot open ", path);
    char head[4] = {};
    f.read(head, 4);
    if (f.gcount() == 4 && std::memcmp(head, "GGUF", 4) == 0) return model::config_from_gguf(gguf::File::open(path));
    return model::config_from_hf_json(path);
}

}  // namespace

int cmd_sim_ep(int argc, char** argv) {
    const char* cmd = "sim-ep";
    std::string config, trace, placement, fmt = "md";
    dist::SimSpec s;
    int ranks_per_node = 0, replicas = 0;
    double zipf = -1;
    int64_t n_tokens = 8192, batch = 0;
    uint64_t seed = 1;
    bool per_layer = false, have_links = false;
    EpCompress cz = EpCompress::None;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            sim_usage(stdout);
            return 0;
        } else if (a == "--config") config = arg_value(argc, argv, i, cmd);
        else if (a == "--nodes") s.nodes = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--nodes", cmd, 1, 1 << 16));
        else if (a == "--ranks-per-node")
            ranks_per_node = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--ranks-per-node", cmd, 1, 1 << 12));
        else if (a == "--link-gbps") {
            const std::string v = arg_value(argc, argv, i, cmd);
            const size_t comma = v.find(',');
            if (comma == std::string::npos) throw_error(cmd, "--link-gbps needs A,B (intra-node, inter-node Gbit/s)");
            s.intra_gbps = parse_double(v.substr(0, comma), "--link-gbps", cmd);
            s.inter_gbps = parse_double(v.substr(comma + 1), "--link-gbps", cmd);
            if (!(s.intra_gbps > 0 && s.inter_gbps > 0)) throw_error(cmd, "--link-gbps values must be > 0");
            have_links = true;
        } else if (a == "--trace") trace = arg_value(argc, argv, i, cmd);
        else if (a == "--zipf") zipf = parse_double(arg_value(argc, argv, i, cmd), "--zipf", cmd);
        else if (a == "--tokens") n_tokens = parse_int(arg_value(argc, argv, i, cmd), "--tokens", cmd, 1, 1 << 24);
        else if (a == "--seed") seed = static_cast<uint64_t>(parse_int(arg_value(argc, argv, i, cmd), "--seed", cmd, 0, INT64_MAX));
        else if (a == "--batch") batch = parse_int(arg_value(argc, argv, i, cmd), "--batch", cmd, 1, 1 << 24);
        else if (a == "--replicas") replicas = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--replicas", cmd, 0, 1 << 20));
        else if (a == "--compress") cz = parse_ep_compress(arg_value(argc, argv, i, cmd));
        else if (a == "--placement") placement = arg_value(argc, argv, i, cmd);
        else if (a == "--per-layer") per_layer = true;
        else if (a == "--dp-attention") s.gather = false;
        else if (a == "-o") {
            fmt = arg_value(argc, argv, i, cmd);
            if (fmt != "md" && fmt != "json") throw_error(cmd, "-o '", fmt, "' is not one of md, json");
        } else {
            std::fprintf(stderr, "moe sim-ep: unknown option '%s'\n", a.c_str());
            sim_usage(stderr);
            return 2;
        }
    }
    if (config.empty() || ranks_per_node == 0 || !have_links || trace.empty() == (zipf < 0)) {
        std::fprintf(stderr, "moe sim-ep: need --config, --ranks-per-node, --link-gbps and one of --trace / --zipf\n");
        sim_usage(stderr);
        return 2;
    }
    const model::ModelConfig c = load_config(config);
    if (!c.is_moe()) throw_error(cmd, config, " is not a MoE model");
    const int E = static_cast<int>(c.n_expert), k = static_cast<int>(c.n_expert_used), L = static_cast<int>(c.n_layer);
    s.ranks = s.nodes * ranks_per_node;
    s.batch = batch > 0 ? batch : 128 * static_cast<int64_t>(s.ranks);
    s.dim = c.n_embd;
    s.record_bytes = static_cast<int64_t>(ep_record_bytes(c.n_embd, cz));

    dist::LoadInput all;
    if (!trace.empty()) {
        all = dist::read_trace_tsv(trace, E);
        if (all.n_experts != E) throw_error(cmd, trace, " has expert ids up to ", all.n_experts - 1, "; ", config, " has ", E);
        if (all.n_layers > L) throw_error(cmd, trace, " has ", all.n_layers, " layers; ", config, " has ", L);
        all.n_layers = L;
        all.tokens.resize(static_cast<size_t>(L));
        all.counts.resize(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(E), 0.0));
    } else {
        all.n_layers = L;
        all.n_experts = E;
        all.tokens = zipf_routing(c, zipf, n_tokens, seed);
        all.counts.assign(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(E), 0.0));
        for (int l = 0; l < L; ++l)
            for (const auto& t : all.tokens[static_cast<size_t>(l)])
                for (int e : t) all.counts[static_cast<size_t>(l)][static_cast<size_t>(e)] += 1;
    }
    std::vector<dist::Placement> ps;
    dist::LoadInput sim_in = all;
    if (placement == "contiguous") {
        ps.push_back(dist::Placement::contiguous(L, E, s.ranks));
    } else if (!placement.empty()) {
        ps.push_back(dist::Placement::load(placement));
        ps.back().check_model(L, E, s.ranks, placement);
    } else {
        const dist::LoadInput plan_in = dist::slice_tokens(all, 0.0, 0.5);
        sim_in = dist::slice_tokens(all, 0.5, 1.0);
        dist::PlanSpec ps_spec;
        ps_spec.ranks = s.ranks;
        ps_spec.nodes = s.nodes;
        ps_spec.replicas = replicas;
        ps.push_back(dist::plan_contiguous(plan_in, ps_spec));
        ps.push_back(dist::plan_eplb(plan_in, ps_spec));
        ps.push_back(dist::plan_coact(plan_in, ps_spec));
    }
    const bool json = fmt == "json";
    if (json) std::printf("{\"config\": \"%s\", \"ranks\": %d, \"nodes\": %d, \"batch\": %lld, \"record_bytes\": %lld, \"placements\": [",
                          config.c_str(), s.ranks, s.nodes, static_cast<long long>(s.batch), static_cast<long long>(s.record_bytes));
    else
        std::printf("%s: D %lld, %d experts, k %d, %d layers on %d nodes x %d ranks; links %.0f / %.0f Gbit/s; batch %lld "
                    "tokens; dispatch %s (%lld B/row), combine f32%s\n\n",
                    config.c_str(), static_cast<long long>(c.n_embd), E, k, L, s.nodes, ranks_per_node, s.intra_gbps,
                    s.inter_gbps, static_cast<long long>(s.batch), ep_compress_name(cz), static_cast<long long>(s.record_bytes),
                    s.gather ? ", all-gather after combine" : ", no all-gather (--dp-attention)");
    if (!json)
        std::printf("| placement | bytes/token/layer (dispatch + combine + gather) | of it inter-node | time/layer/step (ms) | "
                    "us/token (all layers) | imbalance mean / max |\n|---|---:|---:|---:|---:|---:|\n");
    for (size_t pi = 0; pi < ps.size(); ++pi) {
        const dist::Placement& p = ps[pi];
        std::vector<dist::SimLayer> layers;
        for (int l = 0; l < L; ++l)
            if (c.is_moe_layer(l) && !sim_in.tokens[static_cast<size_t>(l)].empty())
                layers.push_back(dist::simulate_layer(sim_in.tokens[static_cast<size_t>(l)], p, l, k, s));
        if (layers.empty()) throw_error(cmd, "no routed tokens to simulate");
        double bytes = 0, inter = 0, secs = 0, imb = 0, imb_max = 0;
        int64_t toks = 0, steps = 0;
        for (const auto& x : layers) {
            bytes += static_cast<double>(x.bytes());
            inter += static_cast<double>(x.inter_node_bytes);
            secs += x.seconds;
            imb += x.imbalance;
            imb_max = std::max(imb_max, x.imbalance);
            toks += x.tokens;
            steps += x.batches;
        }
        const double per_tok_layer = bytes / static_cast<double>(toks);
        const double tokens_per_layer = static_cast<double>(toks) / static_cast<double>(layers.size());
        if (json) {
            std::printf("%s\n {\"algorithm\": \"%s\", \"bytes_per_token_layer\": %.3f, \"inter_node_share\": %.5f, "
                        "\"us_per_token\": %.4f, \"layers\": [",
                        pi ? "," : "", p.algorithm.c_str(), per_tok_layer, bytes > 0 ? inter / bytes : 0.0,
                        1e6 * secs / tokens_per_layer);
            for (size_t j = 0; j < layers.size(); ++j) {
                const auto& x = layers[j];
                std::printf("%s\n  {\"layer\": %d, \"tokens\": %lld, \"rows_remote\": %lld, \"dispatch_bytes\": %lld, "
                            "\"combine_bytes\": %lld, \"gather_bytes\": %lld, \"inter_node_bytes\": %lld, \"seconds\": %.9g, "
                            "\"imbalance\": %.5f, \"rank_bytes\": [",
                            j ? "," : "", x.layer, static_cast<long long>(x.tokens), static_cast<long long>(x.rows_remote),
                            static_cast<long long>(x.dispatch_bytes), static_cast<long long>(x.combine_bytes),
                            static_cast<long long>(x.gather_bytes), static_cast<long long>(x.inter_node_bytes), x.seconds,
                            x.imbalance);
                for (size_t r = 0; r < x.rank_bytes.size(); ++r)
                    std::printf("%s%lld", r ? ", " : "", static_cast<long long>(x.rank_bytes[r]));
                std::printf("]}");
            }
            std::printf("]}");
        } else {
            std::printf("| %s | %.0f | %.1f%% | %.4f | %.3f | %.3f / %.3f |\n", p.algorithm.c_str(), per_tok_layer,
                        bytes > 0 ? 100.0 * inter / bytes : 0.0, 1e3 * secs / static_cast<double>(steps),
                        1e6 * secs / tokens_per_layer, imb / static_cast<double>(layers.size()), imb_max);
            if (per_layer)
                for (const auto& x : layers)
                    std::printf("|   layer %d | %.0f | %.1f%% | %.4f | | %.3f |\n", x.layer,
                                static_cast<double>(x.bytes()) / static_cast<double>(x.tokens),
                                x.bytes() ? 100.0 * static_cast<double>(x.inter_node_bytes) / static_cast<double>(x.bytes()) : 0.0,
                                1e3 * x.seconds / static_cast<double>(x.batches), x.imbalance);
        }
    }
    if (json) std::printf("\n]}\n");
    return 0;
}

}  // namespace moe::tools
