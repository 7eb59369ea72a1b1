#include "dist/placement.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace moe::dist {

using json = nlohmann::json;

Placement Placement::contiguous(int n_layers, int n_experts, int n_ranks) {
    Placement p;
    p.n_ranks = n_ranks;
    p.n_layers = n_layers;
    p.n_experts = n_experts;
    p.algorithm = "contiguous";
    p.layers.assign(static_cast<size_t>(n_layers), std::vector<std::vector<Replica>>(static_cast<size_t>(n_experts)));
    for (auto& l : p.layers)
        for (int e = 0; e < n_experts; ++e)
            l[static_cast<size_t>(e)] = {Replica{static_cast<int>(static_cast<int64_t>(e) * n_ranks / n_experts), 1.0}};
    return p;
}

void Placement::validate(const std::string& src) const {
    if (n_ranks < 1 || n_layers < 1 || n_experts < 1)
        throw_error("placement", src, ": n_ranks, n_layers and n_experts must be >= 1 (got ", n_ranks, ", ", n_layers,
                    ", ", n_experts, ")");
    if (static_cast<int>(layers.size()) != n_layers)
        throw_error("placement", src, ": ", layers.size(), " layers listed, n_layers says ", n_layers);
    for (int l = 0; l < n_layers; ++l) {
        const auto& L = layers[static_cast<size_t>(l)];
        if (static_cast<int>(L.size()) != n_experts)
            throw_error("placement", src, ": layer ", l, " lists ", L.size(), " experts, n_experts says ", n_experts,
                        " (every expert needs an entry)");
        for (int e = 0; e < n_experts; ++e) {
            const auto& reps = L[static_cast<size_t>(e)];
            if (reps.empty()) throw_error("placement", src, ": layer ", l, " expert ", e, " is on no rank");
            double sum = 0;
            for (size_t i = 0; i < reps.size(); ++i) {
                const Replica& r = reps[i];
                if (r.rank < 0 || r.rank >= n_ranks)
                    throw_error("placement", src, ": layer ", l, " expert ", e, " names rank ", r.rank,
                                ", which does not exist (ranks 0..", n_ranks - 1, ")");
                if (!(r.share > 0) || !std::isfinite(r.share))
                    throw_error("placement", src, ": layer ", l, " expert ", e, " has a replica share of ", r.share,
                                " (must be > 0)");
                for (size_t j = 0; j < i; ++j)
                    if (reps[j].rank == r.rank)
                        throw_error("placement", src, ": layer ", l, " expert ", e, " lists rank ", r.rank, " twice");
                sum += r.share;
            }
            if (std::fabs(sum - 1.0) > 1e-6)
                throw_error("placement", src, ": layer ", l, " expert ", e, " replica shares sum to ", sum,
                            " (must be 1)");
        }
    }
}

void Placement::check_model(int model_layers, int model_experts, int ranks, const std::string& src) const {
    validate(src);
    if (n_layers != model_layers || n_experts != model_experts)
        throw_error("placement", src, ": made for ", n_layers, " layers x ", n_experts, " experts, but the model has ",
                    model_layers, " x ", model_experts, "; run `moe place` for this model");
    if (n_ranks != ranks)
        throw_error("placement", src, ": made for ", n_ranks, " ranks, but ", ranks,
                    " ranks are running; use mpirun -np ", n_ranks, " or make a placement for ", ranks, " ranks");
}

int Placement::pick(int layer, int expert, uint64_t key) const {
    const auto& reps = layers[static_cast<size_t>(layer)][static_cast<size_t>(expert)];
    if (reps.size() == 1) return reps[0].rank;
    // Golden-ratio sequence: consecutive keys spread evenly over [0, 1).
    const double u = std::fmod(static_cast<double>(key % (1ull << 40)) * 0.6180339887498949, 1.0);
    double acc = 0;
    for (const Replica& r : reps) {
        acc += r.share;
        if (u < acc) return r.rank;
    }
    return reps.back().rank;
}

bool Placement::holds(int layer, int expert, int rank) const {
    for (const Replica& r : layers[static_cast<size_t>(layer)][static_cast<size_t>(expert)])
        if (r.rank == rank) return true;
    return false;
}

int64_t Placement::experts_on(int layer, int rank) const {
    int64_t n = 0;
    for (int e = 0; e < n_experts; ++e) n += holds(layer, e, rank);
    return n;
}

std::string Placement::to_json() const {
    json j;
    j["format"] = "moe-placement-1";
    j["n_ranks"] = n_ranks;
    j["n_layers"] = n_layers;
    j["n_experts"] = n_experts;
    j["algorithm"] = algorithm;
    json ls = json::array();
    for (const auto& L : layers) {
        json le = json::array();
        for (const auto& reps : L) {
            json re = json::array();
            for (const Replica& r : reps) re.push_back(json::array({r.rank, r.share}));
            le.push_back(re);
        }
        ls.push_back(le);
    }
    j["layers"] = ls;
    return j.dump();
}

void Placement::save(const std::string& path) const {
    std::ofstream f(path);
    if (!f) throw_error("placement", "cannot create ", path);
    f << to_json() << "\n";
    if (!f) throw_error("placement", "cannot write ", path);
}

Placement Placement::load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw_error("placement", "cannot open placement file ", path);
    return parse(std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()), path);
}

namespace {
// An integer member that fits int (get<int>() would wrap a large one or, for a float, be UB).
int int_of(const json& v, const char* what, const std::string& path) {
    if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT32_MAX)
                                                          : v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX))
        throw_error("placement", path, ": ", what, " must be an integer in int range, got ", v.dump());
    return static_cast<int>(v.get<int64_t>());
}
}  // namespace

Placement Placement::parse(const std::string& text, const std::string& path) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw_error("placement", path, ": not valid JSON (", e.what(), ")");
    }
    Placement p;
    try {
        if (!j.is_object() || j.value("format", std::string()) != "moe-placement-1")
            throw_error("placement", path, ": not a placement file (\"format\" must be \"moe-placement-1\"; make one "
                        "with `moe place`)");
        p.n_ranks = int_of(j.at("n_ranks"), "\"n_ranks\"", path);
        p.n_layers = int_of(j.at("n_layers"), "\"n_layers\"", path);
        p.n_experts = int_of(j.at("n_experts"), "\"n_experts\"", path);
        p.algorithm = j.value("algorithm", std::string("unknown"));
        const json& ls = j.at("layers");
        if (!ls.is_array()) throw_error("placement", path, ": \"layers\" must be an array");
        for (const json& le : ls) {
            if (!le.is_array()) throw_error("placement", path, ": each layer must be an array of experts");
            std::vector<std::vector<Replica>> L;
            for (const json& re : le) {
                if (!re.is_array()) throw_error("placement", path, ": each expert must be an array of [rank, share]");
                std::vector<Replica> reps;
                for (const json& r : re) {
                    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number())
                        throw_error("placement", path, ": each replica must be [rank, share], got ", r.type_name(),
                                    r.is_array() ? " of " + std::to_string(r.size()) + " elements" : std::string());
                    reps.push_back(Replica{int_of(r[0], "a replica's rank", path), r[1].get<double>()});
                }
                L.push_back(std::move(reps));
            }
            p.layers.push_back(std::move(L));
        }
    } catch (const json::exception& e) {
        throw_error("placement", path, ": ", e.what());
    }
    p.validate(path);
    return p;
}

}  // namespace moe::dist
