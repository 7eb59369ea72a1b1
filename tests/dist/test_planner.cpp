// Placement planners against an independent reimplementation of DeepSeek's published EPLB
// (github.com/deepseek-ai/EPLB, global policy: replicate_experts then balanced_packing with an
// equal number of physical experts per GPU), on the real OLMoE / Mixtral routing counts in
// tests/data/routing_stats; co-activation placement on a held-out clustered trace; file round trip
// and validation errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>

#include "common/temp_dir.h"
#include "core/error.h"
#include "core/rng.h"
#include "dist/planner.h"

using namespace moe;
using namespace moe::dist;

namespace {

// ---- DeepSeek EPLB (global policy), written from the published algorithm.
struct DsResult {
    std::vector<std::vector<int>> gpu_experts;  // [gpu] logical expert of each physical slot
    std::vector<int> logcnt;                    // replicas per logical expert
};

DsResult deepseek_eplb(const std::vector<double>& weight, int num_replicas, int num_gpus) {
    const int n = static_cast<int>(weight.size());
    DsResult r;
    // replicate_experts: each redundant slot goes to argmax weight / logcnt (first max).
    std::vector<int> phy2log(static_cast<size_t>(num_replicas));
    std::iota(phy2log.begin(), phy2log.begin() + n, 0);
    r.logcnt.assign(static_cast<size_t>(n), 1);
    for (int i = n; i < num_replicas; ++i) {
        int best = 0;
        for (int e = 1; e < n; ++e)
            if (weight[static_cast<size_t>(e)] / r.logcnt[static_cast<size_t>(e)] >
                weight[static_cast<size_t>(best)] / r.logcnt[static_cast<size_t>(best)])
                best = e;
        phy2log[static_cast<size_t>(i)] = best;
        ++r.logcnt[static_cast<size_t>(best)];
    }
    // balanced_packing of the physical experts (weight / logcnt) into num_gpus packs of equal size:
    // heaviest first, each onto the lightest pack that still has room.
    std::vector<double> w(static_cast<size_t>(num_replicas));
    for (int i = 0; i < num_replicas; ++i)
        w[static_cast<size_t>(i)] = weight[static_cast<size_t>(phy2log[static_cast<size_t>(i)])] /
                                    r.logcnt[static_cast<size_t>(phy2log[static_cast<size_t>(i)])];
    std::vector<int> idx(static_cast<size_t>(num_replicas));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)]; });
    const int per = num_replicas / num_gpus;
    std::vector<double> pw(static_cast<size_t>(num_gpus), 0.0);
    r.gpu_experts.assign(static_cast<size_t>(num_gpus), {});
    for (int i : idx) {
        int best = -1;
        for (int g = 0; g < num_gpus; ++g)
            if (static_cast<int>(r.gpu_experts[static_cast<size_t>(g)].size()) < per &&
                (best < 0 || pw[static_cast<size_t>(g)] < pw[static_cast<size_t>(best)]))
                best = g;
        r.gpu_experts[static_cast<size_t>(best)].push_back(phy2log[static_cast<size_t>(i)]);
        pw[static_cast<size_t>(best)] += w[static_cast<size_t>(i)];
    }
    return r;
}

double ds_max_over_mean(const std::vector<double>& weight, const DsResult& r) {
    std::vector<double> load;
    for (const auto& g : r.gpu_experts) {
        double s = 0;
        for (int e : g) s += weight[static_cast<size_t>(e)] / r.logcnt[static_cast<size_t>(e)];
        load.push_back(s);
    }
    return max_over_mean(load);
}

// DeepSeek's balanced_packing on its own: n items into num_packs packs of n / num_packs items,
// heaviest first (stable order) onto the lightest pack with room; pack of each item.
std::vector<int> ds_balanced_packing(const std::vector<double>& w, int num_packs) {
    const int n = static_cast<int>(w.size()), per = n / num_packs;
    std::vector<int> pack(static_cast<size_t>(n));
    if (per == 1) {
        std::iota(pack.begin(), pack.end(), 0);
        return pack;
    }
    std::vector<int> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)]; });
    std::vector<double> pw(static_cast<size_t>(num_packs), 0.0);
    std::vector<int> pc(static_cast<size_t>(num_packs), 0);
    for (int i : idx) {
        int best = -1;
        for (int g = 0; g < num_packs; ++g)
            if (pc[static_cast<size_t>(g)] < per && (best < 0 || pw[static_cast<size_t>(g)] < pw[static_cast<size_t>(best)])) best = g;
        pack[static_cast<size_t>(i)] = best;
        pw[static_cast<size_t>(best)] += w[static_cast<size_t>(i)];
        ++pc[static_cast<size_t>(best)];
    }
    return pack;
}

// DeepSeek's hierarchical policy (rebalance_experts_hierarchical), written from the published
// algorithm: (1) groups of E / G consecutive experts packed onto nodes by group load (G / N groups
// per node); (2) within each node, replicate_experts over its E / N experts into (E + K) / N
// slots; (3) each node's replicas packed onto its GPUs (balanced_packing). GPU = node * (gpus / N)
// + pack, so node(gpu) = gpu * N / gpus as in score().
DsResult deepseek_eplb_hierarchical(const std::vector<double>& weight, int num_replicas, int num_groups, int num_nodes,
                                    int num_gpus) {
    const int E = static_cast<int>(weight.size()), gsize = E / num_groups, per_node = E / num_nodes;
    const int phy_per_node = num_replicas / num_nodes, gpus_per_node = num_gpus / num_nodes;
    std::vector<double> gw(static_cast<size_t>(num_groups), 0.0);
    for (int e = 0; e < E; ++e) gw[static_cast<size_t>(e / gsize)] += weight[static_cast<size_t>(e)];
    const std::vector<int> gpack = ds_balanced_packing(gw, num_nodes);
    std::vector<std::vector<int>> node_experts(static_cast<size_t>(num_nodes));  // logical experts per node
    for (int g = 0; g < num_groups; ++g)
        for (int i = 0; i < gsize; ++i) node_experts[static_cast<size_t>(gpack[static_cast<size_t>(g)])].push_back(g * gsize + i);
    DsResult r;
    r.logcnt.assign(static_cast<size_t>(E), 1);
    r.gpu_experts.assign(static_cast<size_t>(num_gpus), {});
    for (int n = 0; n < num_nodes; ++n) {
        const auto& ex = node_experts[static_cast<size_t>(n)];
        EXPECT_EQ(static_cast<int>(ex.size()), per_node);
        std::vector<double> w;
        for (int e : ex) w.push_back(weight[static_cast<size_t>(e)]);
        const DsResult local = deepseek_eplb(w, phy_per_node, 1);  // replicate_experts (one pack)
        std::vector<int> phy = local.gpu_experts[0];                 // node-local ids, heaviest first
        for (size_t i = 0; i < ex.size(); ++i) r.logcnt[static_cast<size_t>(ex[i])] = local.logcnt[i];
        std::vector<double> pwt;
        for (int j : phy) pwt.push_back(w[static_cast<size_t>(j)] / local.logcnt[static_cast<size_t>(j)]);
        const std::vector<int> pk = ds_balanced_packing(pwt, gpus_per_node);
        for (size_t j = 0; j < phy.size(); ++j)
            r.gpu_experts[static_cast<size_t>(n * gpus_per_node + pk[j])].push_back(ex[static_cast<size_t>(phy[j])]);
    }
    return r;
}

// DeepSeek's result as a Placement (a duplicate on one GPU merges its shares), for scoring copies;
// groups > 0: the hierarchical policy with that many expert groups over `nodes` nodes.
Placement ds_placement(const LoadInput& in, int R, int K, int groups = 0, int nodes = 1) {
    Placement p = Placement::contiguous(in.n_layers, in.n_experts, R);
    p.algorithm = groups > 0 ? "deepseek-hier" : "deepseek-eplb";
    for (int l = 0; l < in.n_layers; ++l) {
        const auto& c = in.counts[static_cast<size_t>(l)];
        const DsResult r = groups > 0 ? deepseek_eplb_hierarchical(c, in.n_experts + K, groups, nodes, R)
                                      : deepseek_eplb(c, in.n_experts + K, R);
        for (auto& reps : p.layers[static_cast<size_t>(l)]) reps.clear();
        for (int g = 0; g < R; ++g)
            for (int e : r.gpu_experts[static_cast<size_t>(g)]) {
                auto& reps = p.layers[static_cast<size_t>(l)][static_cast<size_t>(e)];
                const double share = 1.0 / r.logcnt[static_cast<size_t>(e)];
                auto it = std::find_if(reps.begin(), reps.end(), [&](const Replica& x) { return x.rank == g; });
                if (it != reps.end()) it->share += share;
                else reps.push_back({g, share});
            }
    }
    return p;
}

LoadInput one_layer(const std::vector<double>& c) {
    LoadInput in;
    in.n_layers = 1;
    in.n_experts = static_cast<int>(c.size());
    in.counts = {c};
    return in;
}

// Per domain and summed, every layer with counts, several rank counts and replica budgets:
// the EPLB-style placement's max/mean is never above DeepSeek's on the same counts and budget.
TEST(Planner, EplbNoWorseThanDeepSeekOnRealCounts) {
    int compared = 0, strictly_better = 0;
    for (const char* file : {"olmoe_1b_7b_expert_counts.json", "olmoe_1b_7b_expert_counts_top1.json",
                             "mixtral_8x7b_expert_counts.json"}) {
        const std::string path = std::string(MOE_TEST_DATA_DIR) + "/routing_stats/" + file;
        const LoadInput all = read_counts_json(path);
        for (int l = 0; l < all.n_layers; ++l) {
            const auto& c = all.counts[static_cast<size_t>(l)];
            if (std::accumulate(c.begin(), c.end(), 0.0) == 0) continue;
            const int E = all.n_experts;
            for (int R : {2, 4, 8})
                for (int K : {0, R, 2 * R, 4 * R}) {
                    if ((E + K) % R != 0 || K > E * (R - 1)) continue;
                    PlanSpec s;
                    s.ranks = R;
                    s.replicas = K;
                    const Placement ours = plan_eplb(one_layer(c), s);
                    ours.validate("ours");
                    const double mine = score(ours, one_layer(c), 1).max_over_mean;
                    const double ds = ds_max_over_mean(c, deepseek_eplb(c, E + K, R));
                    EXPECT_LE(mine, ds + 1e-12) << file << " layer " << l << " R=" << R << " K=" << K;
                    ++compared;
                    strictly_better += mine < ds - 1e-9;
                }
        }
    }
    EXPECT_GT(compared, 40);
    std::printf("compared %d cases; strictly better than DeepSeek EPLB in %d\n", compared, strictly_better);
}

// The same against DeepSeek's hierarchical policy (nodes first), with our eplb told the same nodes:
// G expert groups of consecutive experts (these models have no groups; G = N and 2N), N = 2, 4.
TEST(Planner, EplbNoWorseThanDeepSeekHierarchicalOnRealCounts) {
    int compared = 0, strictly_better = 0;
    for (const char* file : {"olmoe_1b_7b_expert_counts.json", "olmoe_1b_7b_expert_counts_top1.json",
                             "mixtral_8x7b_expert_counts.json"}) {
        const LoadInput all = read_counts_json(std::string(MOE_TEST_DATA_DIR) + "/routing_stats/" + file);
        const int E = all.n_experts;
        for (int l = 0; l < all.n_layers; ++l) {
            const auto& c = all.counts[static_cast<size_t>(l)];
            if (std::accumulate(c.begin(), c.end(), 0.0) == 0) continue;
            for (int N : {2, 4})
                for (int R : {4, 8})
                    for (int K : {0, R, 2 * R})
                        for (int G : {N, 2 * N}) {
                            if (R % N || E % G || (E + K) % R || K > E * (R - 1) || (E + K) / N < E / N) continue;
                            PlanSpec s;
                            s.ranks = R;
                            s.nodes = N;
                            s.replicas = K;
                            const double mine = score(plan_eplb(one_layer(c), s), one_layer(c), N).max_over_mean;
                            const double ds = ds_max_over_mean(c, deepseek_eplb_hierarchical(c, E + K, G, N, R));
                            EXPECT_LE(mine, ds + 1e-12) << file << " layer " << l << " N=" << N << " R=" << R
                                                        << " K=" << K << " G=" << G;
                            ++compared;
                            strictly_better += mine < ds - 1e-9;
                        }
        }
    }
    EXPECT_GT(compared, 100);
    std::printf("compared %d cases; strictly better than DeepSeek hierarchical EPLB in %d\n", compared, strictly_better);
}

// A trace with co-activation structure: 4 hidden clusters of 8 experts (ids shuffled), each token
// picks a cluster (skewed) and 4 experts, each from its cluster with probability 0.85.
LoadInput clustered_trace(uint64_t seed) {
    Rng rng(seed);
    const int E = 32, k = 4;
    std::vector<int> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = E - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[rng.below(static_cast<uint64_t>(i + 1))]);
    LoadInput in;
    in.n_layers = 2;
    in.n_experts = E;
    in.tokens.resize(2);
    for (int l = 0; l < 2; ++l)
        for (int t = 0; t < 4000; ++t) {
            const double u = rng.uniform();
            const int cl = u < 0.4 ? 0 : u < 0.7 ? 1 : u < 0.9 ? 2 : 3;
            std::vector<int32_t> ex;
            while (static_cast<int>(ex.size()) < k) {
                const int e = rng.uniform() < 0.85 ? perm[static_cast<size_t>(cl * 8 + static_cast<int>(rng.below(8)))]
                                                   : static_cast<int>(rng.below(E));
                if (std::find(ex.begin(), ex.end(), e) == ex.end()) ex.push_back(e);
            }
            in.tokens[static_cast<size_t>(l)].push_back(ex);
        }
    in.counts.assign(2, std::vector<double>(E, 0.0));
    for (int l = 0; l < 2; ++l)
        for (const auto& t : in.tokens[static_cast<size_t>(l)])
            for (int e : t) in.counts[static_cast<size_t>(l)][static_cast<size_t>(e)] += 1;
    return in;
}

TEST(Planner, CoactivationCutsCrossNodeCopiesOnHeldTrace) {
    const LoadInput all = clustered_trace(7);
    const LoadInput plan = slice_tokens(all, 0.0, 0.5), held = slice_tokens(all, 0.5, 1.0);
    for (const auto& [R, N, K] : std::vector<std::tuple<int, int, int>>{{4, 2, 0}, {4, 2, 4}, {8, 4, 8}, {8, 2, 0}}) {
        PlanSpec s;
        s.ranks = R;
        s.nodes = N;
        s.replicas = K;
        const PlacementScore co = score(plan_coact(plan, s), held, N);
        const PlacementScore ep = score(plan_eplb(plan, s), held, N);
        const PlacementScore ct = score(plan_contiguous(plan, s), held, N);
        const PlacementScore ds = score(ds_placement(plan, R, K), held, N);
        const PlacementScore dh = score(ds_placement(plan, R, K, 2 * N, N), held, N);
        EXPECT_LT(co.cross_node_copies, dh.cross_node_copies) << R << "/" << N << "/" << K;
        EXPECT_LT(co.cross_node_copies, ep.cross_node_copies) << R << "/" << N << "/" << K;
        EXPECT_LT(co.cross_node_copies, ds.cross_node_copies) << R << "/" << N << "/" << K;
        EXPECT_LT(co.cross_node_copies, ct.cross_node_copies) << R << "/" << N << "/" << K;
        EXPECT_LT(co.max_over_mean, 1.5) << "co-activation must stay roughly balanced";
        std::printf("R=%d N=%d K=%d copies/token: coact %.3f eplb %.3f deepseek %.3f ds-hier %.3f contiguous %.3f; "
                    "max/mean coact %.3f eplb %.3f deepseek %.3f ds-hier %.3f contiguous %.3f\n",
                    R, N, K, co.cross_node_copies, ep.cross_node_copies, ds.cross_node_copies, dh.cross_node_copies,
                    ct.cross_node_copies, co.max_over_mean, ep.max_over_mean, ds.max_over_mean, dh.max_over_mean,
                    ct.max_over_mean);
    }
}

// Real routing from a trained router: models/shakespeare-moe.gguf (4 layers, 16 experts, top-2)
// over the first 48 KB of Tiny Shakespeare (planning) followed by its last 16 KB (held: text at
// the end of the file, the trainer's validation part). Planned on the first part, scored on the
// held part: coact has fewer cross-node copies per token than eplb, contiguous and DeepSeek's
// global and hierarchical policies, for several rank / node / replica counts.
TEST(Planner, CoactivationOnTrainedRouterHeldTrace) {
    const std::string dir = moe::testutil::binary_temp_dir("planner").string() + "/";
    std::ifstream f(std::string(MOE_TEST_DATA_DIR) + "/text/tinyshakespeare.txt", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    ASSERT_GT(text.size(), 100000u);
    const std::string plan_text = text.substr(0, 48000), held_text = text.substr(text.size() - 16000);
    const std::string txt = dir + "moe_place_shk.txt", trace = dir + "moe_place_shk.tsv";
    std::ofstream(txt, std::ios::binary) << plan_text << held_text;
    std::remove(trace.c_str());
    const std::string line = std::string(MOE_BINARY) + " perplexity -m " MOE_TEST_DATA_DIR
                             "/../../models/shakespeare-moe.gguf -f " + txt + " --ctx 128 -t 1 --routing-trace " +
                             trace + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(line.c_str()), 0) << line;
    const LoadInput all = read_trace_tsv(trace);
    ASSERT_EQ(all.n_layers, 4);
    ASSERT_EQ(all.n_experts, 16);
    // perplexity's chunks are whole 128-token pieces of the text; hold the held text's share
    // (a little less, so no planning text is scored)
    const double hold = 0.9 * static_cast<double>(held_text.size()) / static_cast<double>(plan_text.size() + held_text.size());
    const LoadInput plan = slice_tokens(all, 0.0, 1.0 - hold), held = slice_tokens(all, 1.0 - hold, 1.0);
    ASSERT_GT(held.tokens[0].size(), 2000u);
    for (const auto& [R, N, K] : std::vector<std::tuple<int, int, int>>{{4, 2, 0}, {4, 2, 4}, {8, 4, 0}, {8, 4, 8}, {16, 8, 16}}) {
        PlanSpec s;
        s.ranks = R;
        s.nodes = N;
        s.replicas = K;
        const Placement co_p = plan_coact(plan, s);
        co_p.validate("coact");
        const PlacementScore co = score(co_p, held, N);
        const PlacementScore ep = score(plan_eplb(plan, s), held, N);
        const PlacementScore ct = score(plan_contiguous(plan, s), held, N);
        const PlacementScore ds = score(ds_placement(plan, R, K), held, N);
        const PlacementScore dh = score(ds_placement(plan, R, K, N, N), held, N);
        const std::string at = std::to_string(R) + "/" + std::to_string(N) + "/" + std::to_string(K);
        EXPECT_LT(co.cross_node_copies, ep.cross_node_copies) << at;
        EXPECT_LT(co.cross_node_copies, ct.cross_node_copies) << at;
        EXPECT_LT(co.cross_node_copies, ds.cross_node_copies) << at;
        EXPECT_LT(co.cross_node_copies, dh.cross_node_copies) << at;
        EXPECT_LT(co.max_over_mean, 1.5) << at;
        std::printf("shakespeare R=%d N=%d K=%d copies/token: coact %.3f eplb %.3f deepseek %.3f ds-hier %.3f "
                    "contiguous %.3f; max/mean coact %.3f eplb %.3f deepseek %.3f ds-hier %.3f contiguous %.3f\n",
                    R, N, K, co.cross_node_copies, ep.cross_node_copies, ds.cross_node_copies, dh.cross_node_copies,
                    ct.cross_node_copies, co.max_over_mean, ep.max_over_mean, ds.max_over_mean, dh.max_over_mean,
                    ct.max_over_mean);
    }
}

// Hand case for the copies metric: 2 nodes, token {0, 1} with 0 on node 0 and 1 on node 1 touches
// 2 nodes -> 2 * (1 / 2) = 1 copy; token {0, 2} (both node 0) -> 0.5.
TEST(Planner, CopiesMetricHandCase) {
    LoadInput in;
    in.n_layers = 1;
    in.n_experts = 4;
    in.tokens = {{{0, 1}, {0, 2}}};
    in.counts = {{2, 1, 1, 0}};
    Placement p = Placement::contiguous(1, 4, 2);  // 0,1 -> rank 0; 2,3 -> rank 1
    p.layers[0][1] = {{1, 1.0}};
    p.layers[0][2] = {{0, 1.0}};
    const PlacementScore s = score(p, in, 2);
    EXPECT_DOUBLE_EQ(s.cross_node_copies, (1.0 + 0.5) / 2);
    EXPECT_DOUBLE_EQ(s.max_over_mean, 3.0 / 2.0);  // rank 0: 2 + 1 = 3, rank 1: 1; mean 2
}

TEST(Planner, FileRoundTripAndErrors) {
    const LoadInput in = read_counts_json(std::string(MOE_TEST_DATA_DIR) + "/routing_stats/mixtral_8x7b_expert_counts.json");
    PlanSpec s;
    s.ranks = 4;
    s.replicas = 4;
    const Placement p = plan_eplb(in, s);
    const std::string path = (moe::testutil::binary_temp_dir("planner") / "moe_place_rt.json").string();
    p.save(path);
    const Placement q = Placement::load(path);
    EXPECT_EQ(q.to_json(), p.to_json());
    s.replicas = 3;  // 8 + 3 not a multiple of 4
    EXPECT_THROW(plan_eplb(in, s), moe::Error);
    s.replicas = 0;
    s.nodes = 3;  // 4 ranks do not split over 3 nodes
    EXPECT_THROW(plan_coact(in, s), moe::Error);
    EXPECT_THROW(read_counts_json("/nonexistent/x.json"), moe::Error);
    Placement bad = p;
    bad.layers[0][0][0].rank = 9;
    EXPECT_THROW(bad.validate("x"), moe::Error);
    bad = p;
    bad.layers[1][3].clear();
    EXPECT_THROW(bad.validate("x"), moe::Error);
    EXPECT_THROW(p.check_model(p.n_layers, p.n_experts, 2, "x"), moe::Error);
}

// Hostile routing files (fuzz/targets/routing_trace): a moe::Error, never another exception or an
// allocation sized by a claim.
TEST(Planner, HostileLoadFilesRefused) {
    auto refused = [](const std::function<void()>& f, const std::string& needle) {
        try {
            f();
            ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
        } catch (const moe::Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    // std::stoi threw std::out_of_range on a long layer number.
    refused([] { parse_counts_json(R"({"a":{"layer99999999999":[1]}})", "c.json"); }, "is not layerN");
    // 100001 layers x 1000 experts from a 2 KB file: 800 MB of counts before the check.
    std::string wide = R"({"a":{"layer100000":[0)";
    for (int i = 1; i < 1000; ++i) wide += ",0";
    refused([&] { parse_counts_json(wide + "]}}", "c.json"); }, "above the limit");
    refused([] { parse_counts_json(R"({"a":{"layer0":[1,-2]}})", "c.json"); }, "layer0[1] is not a count");
    // A domain without layers gave a 0 x 0 load that placement then planned from (fuzz, stop 30).
    refused([] { parse_counts_json(R"({"a":{}})", "c.json"); }, "c.json: no layer counts");
    refused([] { parse_trace_tsv("100000\t0\t1000000\t1\n", "t.tsv"); }, "t.tsv:1: 100001 layers x 1000001 experts");
    refused([] { parse_trace_tsv("0\t0\t99999999999\t1\n", "t.tsv"); }, "t.tsv:1: not a number");
    const LoadInput ok = parse_trace_tsv("# c\n0\t0\t3,-1\t1,0\n1\t0\t1,2\t.5,.5\n", "t.tsv");
    EXPECT_EQ(ok.n_layers, 2);
    EXPECT_EQ(ok.n_experts, 4);
    EXPECT_EQ(ok.counts[0], (std::vector<double>{0, 0, 0, 1}));
    EXPECT_EQ(ok.counts[1], (std::vector<double>{0, 1, 1, 0}));
}

// Placement files: numbers that do not fit int are refused (a rank of 2^32 used to wrap to rank 0
// and be accepted; a float n_ranks of 1e300 was undefined behaviour).
TEST(Planner, PlacementParseRefusesOutOfRangeNumbers) {
    const std::string head = R"({"format":"moe-placement-1","algorithm":"x",)";
    const std::string good = head + R"("n_ranks":2,"n_layers":1,"n_experts":2,"layers":[[[[0,1.0]],[[1,0.5],[0,0.5]]]]})";
    const Placement p = Placement::parse(good, "p.json");
    EXPECT_EQ(p.layers[0][1].size(), 2u);
    EXPECT_EQ(Placement::parse(p.to_json(), "rt").to_json(), p.to_json());
    for (const std::string& bad :
         {head + R"("n_ranks":2,"n_layers":1,"n_experts":2,"layers":[[[[4294967296,1.0]],[[1,1]]]]})",
          head + R"("n_ranks":1e300,"n_layers":1,"n_experts":2,"layers":[[[[0,1.0]],[[1,1]]]]})",
          head + R"("n_ranks":2,"n_layers":18446744073709551615,"n_experts":2,"layers":[]})",
          head + R"("n_ranks":2,"n_layers":1,"n_experts":2,"layers":[[[[0,1.0]],[[[[[1]]]]]]]})"}) {
        try {
            (void)Placement::parse(bad, "p.json");
            ADD_FAILURE() << "accepted " << bad;
        } catch (const moe::Error& e) {
            EXPECT_NE(std::string(e.what()).find("[placement] p.json: "), std::string::npos) << e.what();
        }
    }
}

}  // namespace
