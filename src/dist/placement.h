#pragma once
// Expert placement: which ranks hold each expert of each layer, and the share of that expert's
// tokens each replica takes. Produced by `moe place` (dist/planner.h) or the contiguous default,
// loaded from a JSON file and checked against the model and the group before any work.
//
// File (JSON): {"format": "moe-placement-1", "n_ranks": R, "n_layers": L, "n_experts": E,
//               "algorithm": "...", "layers": [[[[rank, share], ...] per expert] per layer]}
// Layers are the model's layer indices (dense layers' entries are unused).
#include <cstdint>
#include <string>
#include <vector>

namespace moe::dist {

struct Replica {
    int rank = 0;
    double share = 1.0;  // fraction of the expert's (token, slot) rows this replica takes
};

struct Placement {
    int n_ranks = 0, n_layers = 0, n_experts = 0;
    std::string algorithm = "contiguous";
    std::vector<std::vector<std::vector<Replica>>> layers;  // [layer][expert] -> replicas

    // Expert e of every layer on rank e * R / E (blocks of consecutive experts).
    static Placement contiguous(int n_layers, int n_experts, int n_ranks);
    // Parses and validates a file (throws moe::Error "[placement] FILE: ..." on any problem).
    static Placement load(const std::string& path);
    // The same on the file's text (`source` names it in errors; fuzz/targets/placement).
    static Placement parse(const std::string& text, const std::string& source);
    void save(const std::string& path) const;
    std::string to_json() const;

    // Every expert has >= 1 replica, ranks in [0, R), no rank twice for one expert, shares > 0
    // summing to 1 (within 1e-6); sizes as stated. Throws "[placement] <source>: ...".
    void validate(const std::string& source) const;
    // validate() plus: matches a model of n_layers x n_experts run on n_ranks ranks.
    void check_model(int model_layers, int model_experts, int ranks, const std::string& source) const;

    // Rank that serves the row with this key (e.g. global token * k + slot): replicas are chosen
    // by a fixed low-discrepancy sequence weighted by their shares, the same on every rank.
    int pick(int layer, int expert, uint64_t key) const;
    bool holds(int layer, int expert, int rank) const;
    // Number of experts of `layer` with a replica on `rank`.
    int64_t experts_on(int layer, int rank) const;
};

}  // namespace moe::dist
