// `moe place`: expert placement for --ep from expert loads (dist/planner.h). Prints each
// algorithm's max/mean rank load and cross-node token copies (on a held-out part of a trace when
// one is given) and writes the chosen algorithm's placement file.
#include <cstdio>
#include <string>

#include "core/error.h"
#include "dist/planner.h"
#include "tools/lib/commands.h"
#include "tools/lib/infer_args.h"

namespace moe::tools {
namespace {

void place_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: moe place (--counts FILE | --trace FILE) --ranks R [--nodes N] [--replicas K]\n"
                 "                 [--algorithm eplb|coact|contiguous] [--hold F] [-o PLACEMENT.json]\n"
                 "  Plans which ranks hold each expert of each layer for `--ep --placement`.\n"
                 "  --counts FILE  per-expert token counts: {domain: {\"layerN\": [E counts]}} (domains summed)\n"
                 "  --trace FILE   routing trace TSV of `moe run --routing-trace` (gives co-activation)\n"
                 "  --ranks R      ranks (MPI processes); --nodes N: nodes (R / N ranks each, default 1)\n"
                 "  --replicas K   extra expert slots per layer for replicas of hot experts (default 0);\n"
                 "                 (experts + K) must be a multiple of R\n"
                 "  --algorithm A  the one written to -o (default coact with a trace and N > 1, else eplb)\n"
                 "  --hold F       with --trace: plan on the first (1 - F) of each layer's tokens, score on\n"
                 "                 the last F (default 0.5)\n"
                 "  --experts E    with --trace: number of experts (default: largest id + 1)\n"
                 "  -o FILE        write the placement (JSON, see docs/EP.md)\n");
}

}  // namespace

int cmd_place(int argc, char** argv) {
    const char* cmd = "place";
    std::string counts, trace, out, algo;
    dist::PlanSpec s;
    double hold = 0.5;
    int experts = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            place_usage(stdout);
            return 0;
        } else if (a == "--counts") counts = arg_value(argc, argv, i, cmd);
        else if (a == "--trace") trace = arg_value(argc, argv, i, cmd);
        else if (a == "--ranks") s.ranks = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--ranks", cmd, 1, 1 << 16));
        else if (a == "--nodes") s.nodes = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--nodes", cmd, 1, 1 << 16));
        else if (a == "--replicas") s.replicas = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--replicas", cmd, 0, 1 << 20));
        else if (a == "--experts") experts = static_cast<int>(parse_int(arg_value(argc, argv, i, cmd), "--experts", cmd, 1, 1 << 20));
        else if (a == "--algorithm") algo = arg_value(argc, argv, i, cmd);
        else if (a == "--hold") {
            hold = parse_double(arg_value(argc, argv, i, cmd), "--hold", cmd);
            if (!(hold > 0 && hold < 1)) throw_error(cmd, "--hold needs a fraction in (0, 1)");
        } else if (a == "-o" || a == "--output") out = arg_value(argc, argv, i, cmd);
        else {
            std::fprintf(stderr, "moe place: unknown option '%s'\n", a.c_str());
            place_usage(stderr);
            return 2;
        }
    }
    if (counts.empty() == trace.empty()) {
        std::fprintf(stderr, "moe place: give exactly one of --counts FILE and --trace FILE\n");
        place_usage(stderr);
        return 2;
    }
    if (algo.empty()) algo = !trace.empty() && s.nodes > 1 ? "coact" : "eplb";
    if (algo != "eplb" && algo != "coact" && algo != "contiguous")
        throw_error(cmd, "--algorithm '", algo, "' is not one of eplb, coact, contiguous");
    dist::LoadInput plan_in, eval_in;
    if (!counts.empty()) {
        plan_in = eval_in = dist::read_counts_json(counts);
    } else {
        const dist::LoadInput all = dist::read_trace_tsv(trace, experts);
        plan_in = dist::slice_tokens(all, 0.0, 1.0 - hold);
        eval_in = dist::slice_tokens(all, 1.0 - hold, 1.0);
    }
    const dist::Placement ps[3] = {dist::plan_contiguous(plan_in, s), dist::plan_eplb(plan_in, s),
                                   dist::plan_coact(plan_in, s)};
    std::printf("%d layers x %d experts on %d ranks (%d nodes), %d replica slots per layer; scored on %s\n",
                plan_in.n_layers, plan_in.n_experts, s.ranks, s.nodes, s.replicas,
                trace.empty() ? "the same counts" : "the held-out part of the trace");
    std::printf("| algorithm | max/mean rank load | cross-node copies per token |\n|---|---:|---:|\n");
    for (const dist::Placement& p : ps) {
        const dist::PlacementScore sc = dist::score(p, eval_in, s.nodes);
        if (trace.empty()) std::printf("| %s | %.4f | n/a (no trace) |\n", p.algorithm.c_str(), sc.max_over_mean);
        else std::printf("| %s | %.4f | %.4f |\n", p.algorithm.c_str(), sc.max_over_mean, sc.cross_node_copies);
    }
    if (!out.empty()) {
        for (const dist::Placement& p : ps)
            if (p.algorithm == algo) p.save(out);
        std::printf("wrote the %s placement to %s\n", algo.c_str(), out.c_str());
    }
    return 0;
}

}  // namespace moe::tools
