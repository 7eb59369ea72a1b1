#pragma once
// Expert-parallel options of run / eval / perplexity / bench (docs/EP.md) and the per-process EP
// runtime: the MPI group, the placement checked against the model, the start-up consistency check
// (model file and flags hashed and compared across ranks), and the stage profile report.
//
//   mpirun -np R moe eval -m M --tokens ... --logits-out F --ep [--placement P] [--ep-compress bf16]
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dist/file_digest.h"
#include "dist/group.h"
#include "dist/placement.h"
#include "moe/ep.h"

namespace moe {
class ThreadPool;
}
namespace moe::model {
class Model;
}

namespace moe::tools {

struct EpArgs {
    bool on = false;
    std::string placement;     // file; empty = contiguous
    EpCompress compress = EpCompress::None;
    double timeout_s = 120;    // watchdog limit for one collective
    int nodes = 0;             // > 0: simulate this many nodes
    bool overlap = false;      // two micro-batches, non-blocking all-to-alls
    bool dp = false;           // data-parallel attention: each rank evaluates its own sequences
    dist::DigestMode hash = dist::DigestMode::Full;  // model file identity check at start-up
    bool profile = false;      // print the per-layer, per-rank stage profile (rank 0, stderr)
    std::string profile_json;  // write it as JSON here (rank 0)
};

// Usage lines of the EP options (for the subcommands' --help).
extern const char* const kEpUsage;

// Throws if an EP option was given without --ep.
void check_no_ep_options(const EpArgs& ep, const char* cmd);

// If argv[i] is an EP option, consumes it (and its value) and returns true.
bool parse_ep_arg(int argc, char** argv, int& i, const char* cmd, EpArgs& ep);

class EpRuntime {
public:
    // Starts MPI, checks that every rank has the same model file and flags (argv), loads or makes the
    // placement, checks it against the model and attaches it to every MoE block. Ranks other than 0
    // send stdout to /dev/null (only rank 0 prints results).
    EpRuntime(const EpArgs& args, model::Model& m, int argc, char** argv, const char* cmd);
    ~EpRuntime();
    bool is_root() const { return group_->rank() == 0; }
    dist::Group& group() { return *group_; }
    const dist::Placement& placement() const { return placement_; }
    bool data_parallel() const { return args_.dp; }
    // --ep-dp: this rank has no sequence for one forward call; it still runs every MoE layer's
    // exchanges (in layer order) so the ranks that do have work can proceed (collective).
    void idle_step(model::Model& m, ThreadPool& pool);
    // Gathers every rank's per-layer stage times on rank 0 and prints / writes them (collective).
    void report(const model::Model& m);
    // The same profile as JSON (collective; the text on rank 0, "" on the others), for `bench -o json`.
    std::string profile_json(const model::Model& m);

private:
    struct Profile {
        std::vector<int64_t> layers;  // MoE layers
        std::vector<double> all;      // [rank][layer][field]
    };
    Profile gather_profile(const model::Model& m);  // collective
    std::string profile_json(const Profile& pr) const;
    EpArgs args_;
    std::unique_ptr<dist::Group> group_;
    dist::Placement placement_;
};

}  // namespace moe::tools
