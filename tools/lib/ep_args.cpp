#include "tools/lib/ep_args.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "dist/mpi_group.h"
#include "model/model.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {

const char* const kEpUsage =
    "  expert parallelism (run under mpirun -np R; docs/EP.md):\n"
    "  --ep             spread the experts over the MPI ranks (every rank: attention, router;\n"
    "                   experts only where the placement puts them)\n"
    "  --placement FILE expert -> ranks file from `moe place` (default: contiguous blocks)\n"
    "  --ep-compress C  dispatch rows as none (f32, exact; default), bf16 or int8 (+ row scale)\n"
    "  --ep-timeout S   stop with an error when one collective waits longer (default 120 s)\n"
    "  --ep-nodes N     simulate N nodes (rank -> rank * N / R) instead of MPI's shared-memory groups\n"
    "  --ep-overlap     two micro-batches per MoE layer: one's all-to-all (MPI_Ialltoallv) runs while\n"
    "                   the other's experts compute\n"
    "  --ep-dp          data-parallel attention (perplexity): each rank evaluates its own chunks\n"
    "                   (KV cache, attention, router); the MoE layers exchange tokens among all ranks\n"
    "  --ep-hash H      model file check across ranks: full (XXH3 of every byte; default) or quick\n"
    "                   (size + first 8 MiB)\n"
    "  --ep-profile     print the per-layer, per-rank stage profile (stderr)\n"
    "  --ep-profile-json FILE  write that profile as JSON\n";

bool parse_ep_arg(int argc, char** argv, int& i, const char* cmd, EpArgs& ep) {
    const std::string a = argv[i];
    if (a == "--ep") ep.on = true;
    else if (a == "--placement") ep.placement = arg_value(argc, argv, i, cmd);
    else if (a == "--ep-compress") ep.compress = parse_ep_compress(arg_value(argc, argv, i, cmd));
    else if (a == "--ep-timeout") {
        ep.timeout_s = parse_double(arg_value(argc, argv, i, cmd), "--ep-timeout", cmd);
        if (!(ep.timeout_s > 0)) throw_error(cmd, "--ep-timeout needs a positive number of seconds");
    } else if (a == "--ep-nodes") ep.nodes = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--ep-nodes", cmd, 1, 1 << 20));
    else if (a == "--ep-profile") ep.profile = true;
    else if (a == "--ep-overlap") ep.overlap = true;
    else if (a == "--ep-dp") ep.dp = true;
    else if (a == "--ep-hash") ep.hash = dist::parse_digest_mode(arg_value(argc, argv, i, cmd));
    else if (a == "--ep-profile-json") ep.profile_json = arg_value(argc, argv, i, cmd);
    else return false;
    return true;
}

void check_no_ep_options(const EpArgs& ep, const char* cmd) {
    if (!ep.placement.empty() || ep.compress != EpCompress::None || ep.nodes > 0 || ep.profile || ep.overlap ||
        !ep.profile_json.empty() || ep.dp ||
        ep.hash != dist::DigestMode::Full)
        throw_error(cmd, "--placement, --ep-compress, --ep-nodes, --ep-overlap, --ep-dp, --ep-hash and --ep-profile need --ep");
}


EpRuntime::EpRuntime(const EpArgs& args, model::Model& m, int argc, char** argv, const char* cmd) : args_(args) {
    if (args.dp && std::string(cmd) != "perplexity")
        throw_error(cmd, "--ep-dp (data-parallel attention) needs several independent sequences; only `moe "
                    "perplexity` (chunks spread over the ranks) supports it; drop --ep-dp");
    dist::MpiGroupSpec gs;
    gs.timeout_s = args.timeout_s;
    gs.simulate_nodes = args.nodes;
    group_ = std::make_unique<dist::MpiGroup>(gs);
    if (!is_root()) {
        std::fflush(stdout);
        if (!std::freopen("/dev/null", "w", stdout)) throw_error("ep", "cannot silence stdout of rank ", group_->rank());
    }
    // Same model and the same flags everywhere, before any work.
    const dist::FileDigest fd = dist::file_digest(m.path(), args.hash);
    if (args.profile && is_root())
        std::fprintf(stderr, "moe %s: --ep model check: %s hash of %.2f GB in %.2f s\n", cmd,
                     args.hash == dist::DigestMode::Full ? "XXH3 full" : "quick (first 8 MiB)",
                     static_cast<double>(fd.hashed) / 1e9, fd.seconds);
    dist::check_same(*group_, fd.hash, "model file", m.path() + " (" + std::to_string(fd.size) + " bytes)");
    std::string flags;
    for (int i = 0; i < argc; ++i) flags += std::string(argv[i]) + '\x1f';
    if (!args.placement.empty()) flags += "placement:" + tools::read_file(args.placement, cmd);
    dist::check_same(*group_, dist::fnv1a(flags.data(), flags.size()), "command line (flags or placement file)",
                     "'" + flags.substr(0, 200) + "'");

    const auto& c = m.config();
    const int L = static_cast<int>(c.n_layer), E = static_cast<int>(c.n_expert), R = group_->size();
    if (E < 1) throw_error("ep", "--ep needs a MoE model; ", m.path(), " has no experts");
    if (args.placement.empty()) placement_ = dist::Placement::contiguous(L, E, R);
    else placement_ = dist::Placement::load(args.placement);
    placement_.check_model(L, E, R, args.placement.empty() ? "contiguous" : args.placement);
    for (int64_t il = 0; il < c.n_layer; ++il)
        if (MoeBlock* b = m.moe_block(il)) {
            EpConfig cfg{group_.get(), &placement_, args.compress, args.overlap};
            cfg.dp = args.dp;
            b->use_ep(cfg);
        }
}

EpRuntime::~EpRuntime() = default;

void EpRuntime::idle_step(model::Model& m, ThreadPool& pool) {
    for (int64_t il = 0; il < m.config().n_layer; ++il)
        if (MoeBlock* b = m.moe_block(il)) b->ep_idle(pool);
}

namespace {

constexpr int kF = 12;  // fields per layer and rank (below)
const char* const kNames[kF] = {"route", "layout", "wait", "dispatch", "experts", "shared", "combine", "gather",
                                "calls", "rows_sent", "bytes_sent", "inter_node_bytes"};

}  // namespace

EpRuntime::Profile EpRuntime::gather_profile(const model::Model& m) {
    // Per layer: route, layout, wait, dispatch, experts, shared, combine, gather (s), calls, rows,
    // bytes, inter-node bytes (all incl. the gather for the last).
    Profile pr;
    for (int64_t il = 0; il < m.config().n_layer; ++il)
        if (m.moe_block(il)) pr.layers.push_back(il);
    const int R = group_->size(), nl = static_cast<int>(pr.layers.size());
    std::vector<double> mine(static_cast<size_t>(nl * kF));
    pr.all.resize(static_cast<size_t>(nl * kF * R));
    for (int j = 0; j < nl; ++j) {
        const EpStageTimes& t = *m.moe_block(pr.layers[static_cast<size_t>(j)])->ep_times();
        const double v[kF] = {t.route,   t.layout,  t.wait,   t.dispatch, t.experts, t.shared, t.combine, t.gather,
                              double(t.calls), double(t.rows_sent), double(t.bytes_sent), double(t.inter_node_bytes)};
        std::copy(v, v + kF, mine.begin() + j * kF);
    }
    std::vector<int64_t> bytes(static_cast<size_t>(R), nl * kF * 8), displs(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) displs[static_cast<size_t>(r)] = int64_t(r) * nl * kF * 8;
    group_->all_gather_v(mine.data(), pr.all.data(), bytes.data(), displs.data());
    return pr;
}

std::string EpRuntime::profile_json(const Profile& pr) const {
    const int R = group_->size(), nl = static_cast<int>(pr.layers.size());
    auto at = [&](int r, int j, int f) { return pr.all[static_cast<size_t>((r * nl + j) * kF + f)]; };
    std::string out;
    char buf[256];
    std::snprintf(buf, sizeof buf, "{\"ranks\": %d, \"placement\": \"%s\", \"compress\": \"%s\", \"overlap\": %s, "
                  "\"dp\": %s, \"layers\": [", R, placement_.algorithm.c_str(), ep_compress_name(args_.compress),
                  args_.overlap ? "true" : "false", args_.dp ? "true" : "false");
    out += buf;
    for (int j = 0; j < nl; ++j) {
        std::snprintf(buf, sizeof buf, "%s\n {\"layer\": %lld, \"ranks\": [", j ? "," : "",
                      static_cast<long long>(pr.layers[static_cast<size_t>(j)]));
        out += buf;
        for (int r = 0; r < R; ++r) {
            out += r ? ", {" : "{";
            for (int x = 0; x < kF; ++x) {
                std::snprintf(buf, sizeof buf, "%s\"%s%s\": %.9g", x ? ", " : "", kNames[x], x < 8 ? "_s" : "", at(r, j, x));
                out += buf;
            }
            out += "}";
        }
        out += "]}";
    }
    out += "\n]}";
    return out;
}

std::string EpRuntime::profile_json(const model::Model& m) {
    const Profile pr = gather_profile(m);
    return is_root() ? profile_json(pr) : std::string();
}

void EpRuntime::report(const model::Model& m) {
    if (!args_.profile && args_.profile_json.empty()) return;
    const Profile pr = gather_profile(m);
    if (!is_root()) return;
    const int R = group_->size(), nl = static_cast<int>(pr.layers.size());
    auto at = [&](int r, int j, int f) { return pr.all[static_cast<size_t>((r * nl + j) * kF + f)]; };
    if (args_.profile) {
        std::fprintf(stderr, "\nEP stage profile (ms per layer per rank, summed over calls; wait = the counts exchange,"
                             " where ranks meet)\n| layer | rank |");
        for (int f = 0; f < 8; ++f) std::fprintf(stderr, " %s |", kNames[f]);
        std::fprintf(stderr, " rows sent | bytes sent | inter-node bytes |\n|---|---|");
        for (int f = 0; f < 11; ++f) std::fprintf(stderr, "---:|");
        std::fprintf(stderr, "\n");
        for (int j = 0; j < nl; ++j)
            for (int r = 0; r < R; ++r) {
                std::fprintf(stderr, "| %lld | %d |", static_cast<long long>(pr.layers[static_cast<size_t>(j)]), r);
                for (int f = 0; f < 8; ++f) std::fprintf(stderr, " %.3f |", 1e3 * at(r, j, f));
                std::fprintf(stderr, " %.0f | %.0f | %.0f |\n", at(r, j, 9), at(r, j, 10), at(r, j, 11));
            }
    }
    if (!args_.profile_json.empty()) {
        std::FILE* f = std::fopen(args_.profile_json.c_str(), "w");
        if (!f) throw_error("ep", "cannot create ", args_.profile_json, ": ", std::strerror(errno));
        const std::string j = profile_json(pr) + "\n";
        const size_t w = std::fwrite(j.data(), 1, j.size(), f);
        if (std::fclose(f) != 0 || w != j.size()) throw_error("ep", "cannot write ", args_.profile_json);
    }
}

}  // namespace moe::tools
