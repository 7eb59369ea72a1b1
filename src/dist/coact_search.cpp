#include "dist/coact_search.h"

#include <algorithm>
#include <bit>
#include <map>

#include "core/error.h"

namespace moe::dist {

CoactSearch::CoactSearch(const CoactProblem& p) : E_(p.n_experts) {
    std::map<std::vector<int32_t>, double> agg;  // sorted expert set -> tokens (order as in the trace kept below)
    std::map<std::vector<int32_t>, std::vector<int32_t>> first_order;
    if (p.tokens)
        for (const auto& t : *p.tokens) {
            if (t.empty()) continue;
            std::vector<int32_t> key = t;
            std::sort(key.begin(), key.end());
            agg[key] += 1;
            first_order.emplace(key, t);
        }
    sets_of_.assign(static_cast<size_t>(E_), {});
    for (const auto& [key, n] : agg) {
        const int32_t idx = static_cast<int32_t>(sets_.size());
        sets_.push_back({first_order[key], n});
        for (int32_t e : key)
            if (e >= 0 && e < E_) sets_of_[static_cast<size_t>(e)].push_back(idx);
    }
}

int CoactSearch::touched(const Set& s, const std::vector<uint64_t>& mask) {
    uint64_t used = 0;
    for (int32_t e : s.experts) {
        const uint64_t m = mask[static_cast<size_t>(e)];
        if (std::popcount(m) == 1) used |= m;  // fixed placements first
    }
    for (int32_t e : s.experts) {
        const uint64_t m = mask[static_cast<size_t>(e)];
        if (std::popcount(m) > 1 && (m & used) == 0) used |= m & (~m + 1);  // lowest node
    }
    return std::popcount(used);
}

namespace {

std::vector<uint64_t> masks(const std::vector<std::vector<NodeItem>>& nodes, int E) {
    MOE_ASSERT(nodes.size() <= 64, "co-activation search supports at most 64 nodes");
    std::vector<uint64_t> m(static_cast<size_t>(E), 0);
    for (size_t n = 0; n < nodes.size(); ++n)
        for (const NodeItem& it : nodes[n]) m[static_cast<size_t>(it.expert)] |= uint64_t{1} << n;
    return m;
}

}  // namespace

double CoactSearch::cost(const std::vector<std::vector<NodeItem>>& nodes) const {
    const std::vector<uint64_t> m = masks(nodes, E_);
    double c = 0;
    for (const Set& s : sets_) c += s.count * touched(s, m);
    return c;
}

double CoactSearch::refine(std::vector<std::vector<NodeItem>>& nodes, double cap_load, int max_rounds) const {
    const int N = static_cast<int>(nodes.size());
    std::vector<uint64_t> m = masks(nodes, E_);
    std::vector<double> load(static_cast<size_t>(N), 0.0);
    for (int n = 0; n < N; ++n)
        for (const NodeItem& it : nodes[static_cast<size_t>(n)]) load[static_cast<size_t>(n)] += it.load;
    auto holds = [&](int n, int e) { return (m[static_cast<size_t>(e)] >> n) & 1; };
    std::vector<int32_t> touched_sets;
    std::vector<char> mark(sets_.size(), 0);
    // Cost change of moving expert x's item a -> b and y's item b -> a (only sets with x or y change).
    auto delta = [&](int x, int y, int a, int b) {
        touched_sets.clear();
        for (int e : {x, y})
            for (int32_t si : sets_of_[static_cast<size_t>(e)])
                if (!mark[static_cast<size_t>(si)]) {
                    mark[static_cast<size_t>(si)] = 1;
                    touched_sets.push_back(si);
                }
        double before = 0;
        for (int32_t si : touched_sets) before += sets_[static_cast<size_t>(si)].count * touched(sets_[static_cast<size_t>(si)], m);
        const uint64_t mx = m[static_cast<size_t>(x)], my = m[static_cast<size_t>(y)];
        m[static_cast<size_t>(x)] = (mx & ~(uint64_t{1} << a)) | (uint64_t{1} << b);
        m[static_cast<size_t>(y)] = (my & ~(uint64_t{1} << b)) | (uint64_t{1} << a);
        double after = 0;
        for (int32_t si : touched_sets) {
            after += sets_[static_cast<size_t>(si)].count * touched(sets_[static_cast<size_t>(si)], m);
            mark[static_cast<size_t>(si)] = 0;
        }
        m[static_cast<size_t>(x)] = mx;
        m[static_cast<size_t>(y)] = my;
        return after - before;
    };
    for (int round = 0; round < max_rounds; ++round) {
        double best = -1e-9;
        int ba = -1, bb = -1;
        size_t bi = 0, bj = 0;
        for (int a = 0; a < N; ++a)
            for (int b = a + 1; b < N; ++b)
                for (size_t i = 0; i < nodes[static_cast<size_t>(a)].size(); ++i)
                    for (size_t j = 0; j < nodes[static_cast<size_t>(b)].size(); ++j) {
                        const NodeItem& x = nodes[static_cast<size_t>(a)][i];
                        const NodeItem& y = nodes[static_cast<size_t>(b)][j];
                        if (x.expert == y.expert || holds(b, x.expert) || holds(a, y.expert)) continue;
                        const double la = load[static_cast<size_t>(a)] - x.load + y.load;
                        const double lb = load[static_cast<size_t>(b)] - y.load + x.load;
                        // stay within the cap, or at least not above the pair's current maximum
                        const double lim = std::max(cap_load, std::max(load[static_cast<size_t>(a)], load[static_cast<size_t>(b)]));
                        if (la > lim || lb > lim) continue;
                        const double d = delta(x.expert, y.expert, a, b);
                        if (d < best) {
                            best = d;
                            ba = a;
                            bb = b;
                            bi = i;
                            bj = j;
                        }
                    }
        if (ba < 0) break;
        NodeItem& x = nodes[static_cast<size_t>(ba)][bi];
        NodeItem& y = nodes[static_cast<size_t>(bb)][bj];
        m[static_cast<size_t>(x.expert)] = (m[static_cast<size_t>(x.expert)] & ~(uint64_t{1} << ba)) | (uint64_t{1} << bb);
        m[static_cast<size_t>(y.expert)] = (m[static_cast<size_t>(y.expert)] & ~(uint64_t{1} << bb)) | (uint64_t{1} << ba);
        load[static_cast<size_t>(ba)] += y.load - x.load;
        load[static_cast<size_t>(bb)] += x.load - y.load;
        std::swap(x, y);
    }
    double c = 0;
    for (const Set& s : sets_) c += s.count * touched(s, m);
    return c;
}

}  // namespace moe::dist
