#include "dist/planner.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "dist/coact_search.h"

namespace moe::dist {

using json = nlohmann::json;

namespace {
std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error("place", "cannot open ", path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
void check_cells(int64_t layers, int64_t experts, const std::string& name, int64_t line = 0) {
    if (layers * experts > kMaxLoadCells)
        throw_error("place", name, line ? ":" + std::to_string(line) : std::string(), ": ", layers, " layers x ", experts, " experts is above the limit of ", kMaxLoadCells,
                    " (layer, expert) pairs; is this a routing file of a real model?");
}
}  // namespace

LoadInput read_counts_json(const std::string& path) { return parse_counts_json(slurp(path), path); }
LoadInput read_trace_tsv(const std::string& path, int n_experts_hint) {
    return parse_trace_tsv(slurp(path), path, n_experts_hint);
}

LoadInput parse_counts_json(const std::string& text, const std::string& path) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw_error("place", path, ": not valid JSON (", e.what(), ")");
    }
    LoadInput in;
    if (!j.is_object() || j.empty()) throw_error("place", path, ": expected {domain: {\"layerN\": [counts]}}");
    for (const auto& [domain, layers] : j.items()) {
        if (!layers.is_object()) throw_error("place", path, ": domain '", domain, "' is not an object of layers");
        for (const auto& [key, arr] : layers.items()) {
            // At most 6 digits: std::stoi below cannot overflow (it throws std::out_of_range).
            if (key.rfind("layer", 0) != 0 || key.size() == 5 || key.size() > 11 ||
                key.find_first_not_of("0123456789", 5) != std::string::npos)
                throw_error("place", path, ": key '", key, "' is not layerN (for co-occurrence files use a trace)");
            const int l = std::stoi(key.substr(5));
            if (l < 0 || l > 100000 || !arr.is_array() || arr.empty())
                throw_error("place", path, ": ", domain, "/", key, " must be a non-empty array of counts");
            if (in.n_experts == 0) in.n_experts = static_cast<int>(arr.size());
            if (static_cast<int>(arr.size()) != in.n_experts)
                throw_error("place", path, ": ", domain, "/", key, " has ", arr.size(), " experts, others ", in.n_experts);
            if (l >= in.n_layers) {
                check_cells(int64_t(l) + 1, in.n_experts, path);
                in.n_layers = l + 1;
                in.counts.resize(static_cast<size_t>(in.n_layers), std::vector<double>(static_cast<size_t>(in.n_experts), 0.0));
            }
            for (int e = 0; e < in.n_experts; ++e) {
                const json& c = arr[static_cast<size_t>(e)];
                if (!c.is_number() || !(c.get<double>() >= 0) || !std::isfinite(c.get<double>()))
                    throw_error("place", path, ": ", domain, "/", key, "[", e, "] is not a count");
                in.counts[static_cast<size_t>(l)][static_cast<size_t>(e)] += c.get<double>();
            }
        }
    }
    // {"domain": {}} lists no layer: nothing to plan from (the fuzz found it; placement assumed >= 1 layer).
    if (in.n_layers == 0) throw_error("place", path, ": no layer counts (expected {domain: {\"layerN\": [counts]}})");
    return in;
}

LoadInput parse_trace_tsv(const std::string& text, const std::string& path, int n_experts_hint) {
    std::istringstream f(text);
    LoadInput in;
    in.n_experts = n_experts_hint;
    std::string line;
    int64_t lineno = 0;
    while (std::getline(f, line)) {
        ++lineno;
        if (line.empty() || line[0] == '#' || line.rfind("layer", 0) == 0) continue;
        std::istringstream ls(line);
        std::string layer_s, tok_s, experts_s;
        if (!std::getline(ls, layer_s, '\t') || !std::getline(ls, tok_s, '\t') || !std::getline(ls, experts_s, '\t'))
            throw_error("place", path, ":", lineno, ": expected layer<TAB>token<TAB>experts<TAB>weights");
        int l;
        std::vector<int32_t> ex;
        try {
            l = std::stoi(layer_s);
            std::istringstream es(experts_s);
            std::string e;
            while (std::getline(es, e, ','))
                if (!e.empty()) ex.push_back(static_cast<int32_t>(std::stoi(e)));
        } catch (const std::exception&) {
            throw_error("place", path, ":", lineno, ": not a number in '", line, "'");
        }
        if (l < 0 || l > 100000) throw_error("place", path, ":", lineno, ": layer ", l, " out of range");
        for (int32_t e : ex) {
            if (e < -1 || e > 1000000) throw_error("place", path, ":", lineno, ": expert ", e, " out of range");
            in.n_experts = std::max(in.n_experts, e + 1);
        }
        check_cells(std::max(in.n_layers, l + 1), in.n_experts, path, lineno);
        if (l >= in.n_layers) {
            in.n_layers = l + 1;
            in.tokens.resize(static_cast<size_t>(in.n_layers));
        }
        ex.erase(std::remove(ex.begin(), ex.end(), -1), ex.end());
        in.tokens[static_cast<size_t>(l)].push_back(std::move(ex));
    }
    if (in.n_layers == 0) throw_error("place", path, ": no routing records");
    in.counts.assign(static_cast<size_t>(in.n_layers), std::vector<double>(static_cast<size_t>(in.n_experts), 0.0));
    for (int l = 0; l < in.n_layers; ++l)
        for (const auto& t : in.tokens[static_cast<size_t>(l)])
            for (int32_t e : t) in.counts[static_cast<size_t>(l)][static_cast<size_t>(e)] += 1;
    return in;
}

LoadInput slice_tokens(const LoadInput& in, double begin, double end) {
    LoadInput out = in;
    for (int l = 0; l < in.n_layers && l < static_cast<int>(in.tokens.size()); ++l) {
        const auto& t = in.tokens[static_cast<size_t>(l)];
        const size_t b = static_cast<size_t>(begin * static_cast<double>(t.size()));
        const size_t e = static_cast<size_t>(end * static_cast<double>(t.size()));
        out.tokens[static_cast<size_t>(l)].assign(t.begin() + static_cast<std::ptrdiff_t>(b),
                                                  t.begin() + static_cast<std::ptrdiff_t>(e));
        auto& c = out.counts[static_cast<size_t>(l)];
        std::fill(c.begin(), c.end(), 0.0);
        for (const auto& x : out.tokens[static_cast<size_t>(l)])
            for (int32_t ex : x) c[static_cast<size_t>(ex)] += 1;
    }
    return out;
}

namespace {

void check_spec(const LoadInput& in, const PlanSpec& s) {
    const int E = in.n_experts, R = s.ranks;
    if (E < 1 || in.n_layers < 1) throw_error("place", "no expert loads to plan for");
    if (R < 1 || s.nodes < 1 || R % s.nodes != 0)
        throw_error("place", "--ranks ", R, " must be >= 1 and a multiple of --nodes ", s.nodes);
    if (s.replicas < 0 || (E + s.replicas) % R != 0)
        throw_error("place", "experts + --replicas = ", E + s.replicas, " must be a multiple of --ranks ", R,
                    " (every rank gets the same number of expert slots)");
    if (s.replicas > static_cast<int64_t>(E) * (R - 1))
        throw_error("place", "--replicas ", s.replicas, " is more than ", E, " experts x ", R - 1, " other ranks");
    if ((E + s.replicas) / R < 1) throw_error("place", "fewer expert slots than ranks");
}

// Replica count per expert: each extra slot to the expert with the largest load per replica
// (ties to the lower index). More replicas than bins only happen for extreme loads; packing then
// merges the duplicates.
std::vector<int> replicate(const std::vector<double>& w, int K) {
    std::vector<int> cnt(w.size(), 1);
    for (int i = 0; i < K; ++i) {
        int best = -1;
        for (size_t e = 0; e < w.size(); ++e)
            if ((best < 0 || w[e] / cnt[e] > w[static_cast<size_t>(best)] / cnt[static_cast<size_t>(best)]))
                best = static_cast<int>(e);
        ++cnt[static_cast<size_t>(best)];
    }
    return cnt;
}

struct Item {
    int expert;
    double load;
};

double max_load(const std::vector<std::vector<Item>>& bins) {
    double m = 0;
    for (const auto& b : bins) {
        double s = 0;
        for (const Item& it : b) s += it.load;
        m = std::max(m, s);
    }
    return m;
}

// Swaps between the heaviest bin and any other bin while a swap lowers the heaviest bin's load
// (never raises the maximum); with `distinct`, never two replicas of one expert in one bin.
void swap_down(std::vector<std::vector<Item>>& bins, bool distinct) {
    const int n_bins = static_cast<int>(bins.size());
    std::vector<double> load(bins.size(), 0.0);
    for (size_t b = 0; b < bins.size(); ++b)
        for (const Item& it : bins[b]) load[b] += it.load;
    auto holds = [&](int b, int e) {
        for (const Item& it : bins[static_cast<size_t>(b)])
            if (it.expert == e) return true;
        return false;
    };
    for (int iter = 0; iter < 10000; ++iter) {
        const int M = static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
        double best_gain = 1e-12 * std::max(1.0, load[static_cast<size_t>(M)]);
        int bb = -1;
        size_t bi = 0, bj = 0;
        for (int b = 0; b < n_bins; ++b) {
            if (b == M) continue;
            for (size_t i = 0; i < bins[static_cast<size_t>(M)].size(); ++i)
                for (size_t j = 0; j < bins[static_cast<size_t>(b)].size(); ++j) {
                    const Item& x = bins[static_cast<size_t>(M)][i];
                    const Item& y = bins[static_cast<size_t>(b)][j];
                    const double d = x.load - y.load;
                    if (d <= 0 || x.expert == y.expert) continue;
                    const double new_max = std::max(load[static_cast<size_t>(M)] - d, load[static_cast<size_t>(b)] + d);
                    const double gain = load[static_cast<size_t>(M)] - new_max;
                    if (gain <= best_gain) continue;
                    if (distinct && (holds(b, x.expert) || holds(M, y.expert))) continue;
                    best_gain = gain;
                    bb = b;
                    bi = i;
                    bj = j;
                }
        }
        if (bb < 0) break;
        std::swap(bins[static_cast<size_t>(M)][bi], bins[static_cast<size_t>(bb)][bj]);
        const double d = bins[static_cast<size_t>(bb)][bj].load - bins[static_cast<size_t>(M)][bi].load;
        load[static_cast<size_t>(M)] -= d;
        load[static_cast<size_t>(bb)] += d;
    }
}

// Longest-processing-time packing into n_bins bins of cap items: heaviest first onto the lightest
// bin with room (ties to the lower bin); with `distinct`, a bin that already holds a replica of the
// same expert is skipped unless no other has room. Then swaps between the heaviest bin and any other
// bin while a swap lowers the heaviest bin's load (never raises the maximum).
std::vector<std::vector<Item>> pack_once(std::vector<Item> items, int n_bins, int cap, bool distinct) {
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.load > b.load; });
    std::vector<std::vector<Item>> bins(static_cast<size_t>(n_bins));
    std::vector<double> load(static_cast<size_t>(n_bins), 0.0);
    auto holds = [&](int b, int e) {
        for (const Item& it : bins[static_cast<size_t>(b)])
            if (it.expert == e) return true;
        return false;
    };
    for (const Item& it : items) {
        int best = -1;
        for (int pass = distinct ? 0 : 1; pass < 2 && best < 0; ++pass)
            for (int b = 0; b < n_bins; ++b)
                if (static_cast<int>(bins[static_cast<size_t>(b)].size()) < cap && (pass == 1 || !holds(b, it.expert)) &&
                    (best < 0 || load[static_cast<size_t>(b)] < load[static_cast<size_t>(best)]))
                    best = b;
        MOE_ASSERT(best >= 0, "packing ran out of room");
        bins[static_cast<size_t>(best)].push_back(it);
        load[static_cast<size_t>(best)] += it.load;
    }
    swap_down(bins, distinct);
    return bins;
}

// Balanced packing: the better (lower maximum) of LPT + swaps with and without keeping an expert's
// replicas on distinct bins (a duplicate on one bin is merged into one replica with both shares,
// which balances the same); ties keep the distinct one.
std::vector<std::vector<Item>> pack(const std::vector<Item>& items, int n_bins, int cap) {
    auto a = pack_once(items, n_bins, cap, true);
    auto b = pack_once(items, n_bins, cap, false);
    return max_load(b) < max_load(a) ? b : a;
}

// Fills p's layer l from rank bins (items = replicas; each replica of e takes 1 / cnt[e]).
void emit(Placement& p, int l, const std::vector<std::vector<Item>>& rank_bins, const std::vector<int>& cnt) {
    auto& L = p.layers[static_cast<size_t>(l)];
    for (auto& reps : L) reps.clear();
    for (size_t r = 0; r < rank_bins.size(); ++r)
        for (const Item& it : rank_bins[r]) {
            auto& reps = L[static_cast<size_t>(it.expert)];
            bool dup = false;
            for (Replica& x : reps)
                if (x.rank == static_cast<int>(r)) {
                    x.share += 1.0 / cnt[static_cast<size_t>(it.expert)];  // unavoidable duplicate: merge
                    dup = true;
                }
            if (!dup) reps.push_back(Replica{static_cast<int>(r), 1.0 / cnt[static_cast<size_t>(it.expert)]});
        }
}

Placement empty_like(const LoadInput& in, const PlanSpec& s, const char* algo) {
    Placement p = Placement::contiguous(in.n_layers, in.n_experts, s.ranks);
    p.algorithm = algo;
    return p;
}

// Packs items into nodes (given per-node item lists) and then each node's ranks.
std::vector<std::vector<Item>> pack_within_nodes(const std::vector<std::vector<Item>>& node_items, int ranks_per_node,
                                                 int slots) {
    std::vector<std::vector<Item>> ranks;
    for (const auto& items : node_items) {
        auto b = pack(items, ranks_per_node, slots);
        for (auto& x : b) ranks.push_back(std::move(x));
    }
    return ranks;
}

}  // namespace

Placement plan_contiguous(const LoadInput& in, const PlanSpec& s) {
    if (in.n_experts < 1 || s.ranks < 1) throw_error("place", "no experts or ranks");
    return Placement::contiguous(in.n_layers, in.n_experts, s.ranks);
}

Placement plan_eplb(const LoadInput& in, const PlanSpec& s) {
    check_spec(in, s);
    Placement p = empty_like(in, s, "eplb");
    const int E = in.n_experts, R = s.ranks, N = s.nodes, slots = (E + s.replicas) / R;
    for (int l = 0; l < in.n_layers; ++l) {
        const auto& w = in.counts[static_cast<size_t>(l)];
        // Replica budgets K' = K, K / 2, 0 (a replica on a rank that needs no more load can cost
        // balance when slots per rank are few); for each: nodes first then ranks, plus swaps across all ranks
        // (nodes first can strand a heavy rank inside a balanced node), and the flat rank packing.
        // The lowest maximum wins; ties keep the larger budget and the nodes-first packing.
        std::vector<std::vector<Item>> best;
        std::vector<int> best_cnt;
        double best_max = 0;
        std::vector<int> budgets = {s.replicas};
        for (int k : {s.replicas / 2, 0})
            if (k != budgets.back()) budgets.push_back(k);
        for (int k : budgets) {
            const std::vector<int> cnt = replicate(w, k);
            std::vector<Item> items;
            for (int e = 0; e < E; ++e)
                for (int c = 0; c < cnt[static_cast<size_t>(e)]; ++c)
                    items.push_back({e, w[static_cast<size_t>(e)] / cnt[static_cast<size_t>(e)]});
            const auto node_items = N > 1 ? pack(items, N, slots * (R / N)) : std::vector<std::vector<Item>>{items};
            auto ranks = pack_within_nodes(node_items, R / N, slots);
            std::vector<std::vector<std::vector<Item>>> cands;
            if (N > 1) {
                swap_down(ranks, true);
                cands.push_back(std::move(ranks));
                cands.push_back(pack(items, R, slots));
            } else {
                cands.push_back(std::move(ranks));
            }
            for (auto& c : cands) {
                const double mx = max_load(c);
                if (best.empty() || mx < best_max - 1e-12 * best_max) {
                    best = std::move(c);
                    best_cnt = cnt;
                    best_max = mx;
                }
            }
        }
        emit(p, l, best, best_cnt);
    }
    return p;
}

Placement plan_coact(const LoadInput& in, const PlanSpec& s) {
    check_spec(in, s);
    Placement p = empty_like(in, s, "coact");
    const int E = in.n_experts, R = s.ranks, N = s.nodes, slots = (E + s.replicas) / R, rpn = R / N;
    for (int l = 0; l < in.n_layers; ++l) {
        const auto& w = in.counts[static_cast<size_t>(l)];
        const std::vector<int> cnt = replicate(w, s.replicas);  // replicas stay on the expert's node
        // Co-occurrence of expert pairs in one token's choice at this layer.
        std::vector<double> A(static_cast<size_t>(E) * static_cast<size_t>(E), 0.0);
        if (l < static_cast<int>(in.tokens.size()))
            for (const auto& t : in.tokens[static_cast<size_t>(l)])
                for (int32_t a : t)
                    for (int32_t b : t)
                        if (a != b) A[static_cast<size_t>(a) * static_cast<size_t>(E) + static_cast<size_t>(b)] += 1;
        const double total = std::accumulate(w.begin(), w.end(), 0.0);
        const double cap_load = 1.1 * total / N;
        const int cap_slots = slots * rpn;
        std::vector<int> order(static_cast<size_t>(E));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[static_cast<size_t>(a)] > w[static_cast<size_t>(b)]; });
        std::vector<std::vector<int>> members(static_cast<size_t>(N));  // distinct experts per node
        std::vector<std::vector<Item>> node_items(static_cast<size_t>(N));
        std::vector<double> nload(static_cast<size_t>(N), 0.0);
        std::vector<int> nslots(static_cast<size_t>(N), 0);
        for (int e : order) {
            const int c = cnt[static_cast<size_t>(e)];
            const double share = w[static_cast<size_t>(e)] / c;
            // Replica by replica: the node with the most co-activation with e (a node that already
            // holds e wins, keeping replicas together), within the load cap; ties to the lighter node.
            for (int rep = 0; rep < c; ++rep) {
                int best = -1;
                double best_aff = -1;
                for (int pass = 0; pass < 2 && best < 0; ++pass)  // pass 1 ignores the load cap
                    for (int n = 0; n < N; ++n) {
                        if (nslots[static_cast<size_t>(n)] >= cap_slots) continue;
                        if (pass == 0 && nload[static_cast<size_t>(n)] + share > cap_load && nload[static_cast<size_t>(n)] > 0)
                            continue;
                        double aff = 0;
                        bool has = false;
                        for (int f : members[static_cast<size_t>(n)]) {
                            has = has || f == e;
                            aff += A[static_cast<size_t>(e) * static_cast<size_t>(E) + static_cast<size_t>(f)];
                        }
                        if (has) aff += 1e300;
                        if (best < 0 || aff > best_aff ||
                            (aff == best_aff && nload[static_cast<size_t>(n)] < nload[static_cast<size_t>(best)])) {
                            best = n;
                            best_aff = aff;
                        }
                    }
                MOE_ASSERT(best >= 0, "no node with room for expert ", e);
                auto& mem = members[static_cast<size_t>(best)];
                if (std::find(mem.begin(), mem.end(), e) == mem.end()) mem.push_back(e);
                node_items[static_cast<size_t>(best)].push_back({e, share});
                nload[static_cast<size_t>(best)] += share;
                ++nslots[static_cast<size_t>(best)];
            }
        }
        // Local search from this greedy start and from the EPLB node packing (its replicas spread
        // over nodes, which also saves copies): swaps that lower the planning trace's nodes per
        // token within the load cap; the cheaper result wins (ties: the lighter heaviest node).
        const bool traced = l < static_cast<int>(in.tokens.size()) && !in.tokens[static_cast<size_t>(l)].empty();
        // (Bounded: up to 16 nodes and 64 replicas per layer; larger plans keep the greedy result,
        // where a round of the search would cost (items / N)^2 N^2 / 2 trace evaluations.)
        if (N > 1 && N <= 16 && E + s.replicas <= 64 && traced) {
            std::vector<Item> items;
            for (int e = 0; e < E; ++e)
                for (int c = 0; c < cnt[static_cast<size_t>(e)]; ++c) items.push_back({e, w[static_cast<size_t>(e)] / cnt[static_cast<size_t>(e)]});
            const CoactSearch search({E, &in.tokens[static_cast<size_t>(l)]});
            double best_cost = 0, best_max = 0;
            std::vector<std::vector<Item>> best;
            for (const auto& start : {node_items, pack(items, N, cap_slots)}) {
                std::vector<std::vector<NodeItem>> nodes(static_cast<size_t>(N));
                for (int n = 0; n < N; ++n)
                    for (const Item& it : start[static_cast<size_t>(n)]) nodes[static_cast<size_t>(n)].push_back({it.expert, it.load});
                const double c = search.refine(nodes, cap_load);
                std::vector<std::vector<Item>> out(static_cast<size_t>(N));
                for (int n = 0; n < N; ++n)
                    for (const NodeItem& it : nodes[static_cast<size_t>(n)]) out[static_cast<size_t>(n)].push_back({it.expert, it.load});
                const double mx = max_load(out);
                if (best.empty() || c < best_cost - 1e-9 || (c < best_cost + 1e-9 && mx < best_max)) {
                    best = std::move(out);
                    best_cost = c;
                    best_max = mx;
                }
            }
            node_items = std::move(best);
        }
        emit(p, l, pack_within_nodes(node_items, rpn, slots), cnt);
    }
    return p;
}

double max_over_mean(const std::vector<double>& load) {
    const double sum = std::accumulate(load.begin(), load.end(), 0.0);
    if (sum <= 0) return 1.0;
    return *std::max_element(load.begin(), load.end()) / (sum / static_cast<double>(load.size()));
}

PlacementScore score(const Placement& p, const LoadInput& in, int nodes) {
    PlacementScore sc;
    int layers = 0;
    double copies = 0;
    int64_t tokens = 0;
    const int R = p.n_ranks;
    auto node = [&](int r) { return r * nodes / R; };
    for (int l = 0; l < in.n_layers && l < p.n_layers; ++l) {
        const auto& w = in.counts[static_cast<size_t>(l)];
        std::vector<double> load(static_cast<size_t>(R), 0.0);
        double sum = 0;
        for (int e = 0; e < in.n_experts; ++e)
            for (const Replica& r : p.layers[static_cast<size_t>(l)][static_cast<size_t>(e)]) {
                load[static_cast<size_t>(r.rank)] += r.share * w[static_cast<size_t>(e)];
                sum += r.share * w[static_cast<size_t>(e)];
            }
        if (sum > 0) {
            sc.max_over_mean += max_over_mean(load);
            ++layers;
        }
        if (l < static_cast<int>(in.tokens.size()))
            for (const auto& t : in.tokens[static_cast<size_t>(l)]) {
                // Nodes touched: a replicated expert is served on a node already touched if it can be.
                std::vector<char> used(static_cast<size_t>(nodes), 0);
                int n_used = 0;
                for (int pass = 0; pass < 2; ++pass)
                    for (int32_t e : t) {
                        const auto& reps = p.layers[static_cast<size_t>(l)][static_cast<size_t>(e)];
                        bool single = true;
                        for (const Replica& r : reps) single = single && node(r.rank) == node(reps[0].rank);
                        if ((pass == 0) != single) continue;  // fixed placements first
                        bool have = false;
                        for (const Replica& r : reps) have = have || used[static_cast<size_t>(node(r.rank))];
                        if (!have) {
                            used[static_cast<size_t>(node(reps[0].rank))] = 1;
                            ++n_used;
                        }
                    }
                copies += n_used * (nodes - 1.0) / nodes;
                ++tokens;
            }
    }
    if (layers > 0) sc.max_over_mean /= layers;
    if (tokens > 0) sc.cross_node_copies = copies / static_cast<double>(tokens);
    return sc;
}

}  // namespace moe::dist
