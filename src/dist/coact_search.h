#pragma once
// Local search behind plan_coact (planner.h): which node holds each expert replica so that the
// experts a token picks together sit on as few nodes as possible.
//
// State: every node holds a fixed number of replica items (expert, load). Cost of an assignment
// on a trace = sum over tokens of the distinct nodes the token's experts touch, with the rule of
// score(): experts on one node count first; a replicated expert is served on a node the token
// already touches if it can be, else on its lowest node. Moves: swap two items of different
// nodes (never two replicas of one expert on one node) when that lowers the cost and keeps both
// nodes' loads <= cap_load. Tokens are aggregated into distinct expert sets with counts first.
#include <cstdint>
#include <vector>

namespace moe::dist {

struct NodeItem {
    int expert = 0;
    double load = 0;  // tokens this replica serves
};

struct CoactProblem {
    int n_experts = 0;
    const std::vector<std::vector<int32_t>>* tokens = nullptr;  // expert sets of the planning trace
};

class CoactSearch {
public:
    explicit CoactSearch(const CoactProblem& p);
    // Sum over tokens of distinct nodes touched (nodes: [N] items; N <= 64).
    double cost(const std::vector<std::vector<NodeItem>>& nodes) const;
    // Improves `nodes` in place by swaps (best swap per round, at most max_rounds); returns the cost.
    double refine(std::vector<std::vector<NodeItem>>& nodes, double cap_load, int max_rounds = 500) const;

private:
    struct Set {
        std::vector<int32_t> experts;
        double count = 0;
    };
    // Nodes touched by one set, given each expert's node mask.
    static int touched(const Set& s, const std::vector<uint64_t>& mask);
    int E_;
    std::vector<Set> sets_;
    std::vector<std::vector<int32_t>> sets_of_;  // [expert] indices of the sets containing it
};

}  // namespace moe::dist
