// `moe place` and `moe sim-ep` through the real binary (MOE_BINARY): a planned placement runs
// bit-identically; the simulator's per-layer, per-rank bytes equal the counters of real runs.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ep_cli_util.h"

using namespace moe::test_ep;

namespace {

TEST(EpSimCli, PlaceWritesAPlacementThatRuns) {
    const std::string m = model_for("tiny-olmoe");
    const std::string trace = tmp("trace.tsv"), plf = tmp("placed.json"), out = tmp("placed.bin"), ref = tmp("placed_ref.bin");
    ASSERT_EQ(sh(bin() + " run -m " + m + " -p 'to be or not to be' -n 40 -t 1 --temp 0 --routing-trace " + trace +
                 " >/dev/null").rc, 0);
    CliRun r = sh(bin() + " place --trace " + trace + " --ranks 2 --nodes 2 --replicas 2 -o " + plf);
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* row : {"| contiguous |", "| eplb |", "| coact |", "wrote the coact placement"})
        EXPECT_NE(r.out.find(row), std::string::npos) << row << " in " << r.out;
    ASSERT_EQ(sh(bin() + eval_args(m, ref)).rc, 0);
    r = sh(kMpirun + "-np 2 " + bin() + eval_args(m, out) + " --ep --placement " + plf);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(read_f32(out), read_f32(ref));
    const std::string counts = std::string(MOE_TEST_DATA_DIR) + "/routing_stats/olmoe_1b_7b_expert_counts.json";
    r = sh(bin() + " place --counts " + counts + " --ranks 4 --replicas 3");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("must be a multiple of --ranks 4"), std::string::npos) << r.err;
}


// The simulator's per-layer, per-rank byte counts equal the counters of real 2- and 4-rank runs
// (same routing from a single-process trace, same batches, contiguous placement).
TEST(EpSimCli, SimulatorBytesMatchRealRuns) {
    const std::string m = model_for("tiny-olmoe");
    const std::string trace = tmp("sim_trace.tsv"), out = tmp("sim_eval.bin");
    CliRun r = sh(bin() + eval_args(m, out) + " --routing-trace " + trace);
    ASSERT_EQ(r.rc, 0) << r.err;
    for (int R : {2, 4}) {
        const std::string prof = tmp("sim_prof.json");
        // 4 ranks as 2 simulated nodes: the inter-node counters are checked too.
        const int N = R == 4 ? 2 : 1;
        r = sh(kMpirun + "-np " + std::to_string(R) + " " + bin() + eval_args(m, out) + " --ep --ep-nodes " +
               std::to_string(N) + " --ep-profile-json " + prof);
        ASSERT_EQ(r.rc, 0) << r.err;
        const CliRun sim = sh(bin() + " sim-ep --config " + m + " --nodes " + std::to_string(N) + " --ranks-per-node " +
                              std::to_string(R / N) +
                              " --link-gbps 100,10 --trace " + trace + " --batch 5 --placement contiguous -o json");
        ASSERT_EQ(sim.rc, 0) << sim.err;
        // Extract per-layer rank byte lists: real "bytes_sent": v per rank in layer order; sim "rank_bytes": [..].
        std::ifstream pf(prof);
        const std::string ptxt((std::istreambuf_iterator<char>(pf)), {});
        std::vector<long long> real, simv;
        for (size_t pos = 0; (pos = ptxt.find("\"bytes_sent\": ", pos)) != std::string::npos; pos += 14)
            real.push_back(std::atoll(ptxt.c_str() + pos + 14));
        for (size_t pos = 0; (pos = sim.out.find("\"rank_bytes\": [", pos)) != std::string::npos;) {
            pos += 15;
            while (sim.out[pos] != ']') {
                simv.push_back(std::atoll(sim.out.c_str() + pos));
                pos = sim.out.find_first_of(",]", pos);
                if (sim.out[pos] == ',') pos += 2;
            }
        }
        ASSERT_EQ(real.size(), static_cast<size_t>(2 * R)) << ptxt;  // 2 layers x R ranks
        EXPECT_EQ(simv, real) << "R=" << R;
        auto all_of = [](const std::string& t, const char* key) {
            std::vector<long long> v;
            const std::string k = std::string("\"") + key + "\": ";
            for (size_t pos = 0; (pos = t.find(k, pos)) != std::string::npos; pos += k.size())
                v.push_back(std::atoll(t.c_str() + pos + k.size()));
            return v;
        };
        const std::vector<long long> real_inter = all_of(ptxt, "inter_node_bytes"), sim_inter = all_of(sim.out, "inter_node_bytes");
        ASSERT_EQ(real_inter.size(), static_cast<size_t>(2 * R));
        ASSERT_EQ(sim_inter.size(), 2u);
        for (int l = 0; l < 2; ++l) {
            long long sum = 0;
            for (int q = 0; q < R; ++q) sum += real_inter[static_cast<size_t>(l * R + q)];
            EXPECT_EQ(sum, sim_inter[static_cast<size_t>(l)]) << "inter-node bytes, layer " << l << " R=" << R;
            if (N > 1) {
                EXPECT_GT(sum, 0);
            }
        }
        long long total = 0;
        for (long long v : real) total += v;
        EXPECT_GT(total, 0);
    }
}

TEST(EpSimCli, SimulatorOnRealConfigs) {
    const std::string cfg = std::string(MOE_TEST_DATA_DIR) + "/configs/";
    CliRun r = sh(bin() + " sim-ep --config " + cfg + "deepseek-v3_config.json --nodes 32 --ranks-per-node 8 "
                  "--link-gbps 400,50 --zipf 0.8 --tokens 256 --replicas 256");
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* row : {"| contiguous |", "| eplb |", "| coact |", "256 experts, k 8, 61 layers on 32 nodes x 8"})
        EXPECT_NE(r.out.find(row), std::string::npos) << row << " in " << r.out;
    r = sh(bin() + " sim-ep --config " + cfg + "qwen3-235b-a22b_config.json --nodes 4 --ranks-per-node 8 "
           "--link-gbps 400,100 --zipf 0.8 --tokens 256 --replicas 32 --compress bf16");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("128 experts, k 8, 94 layers on 4 nodes x 8"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("dispatch bf16 (8196 B/row)"), std::string::npos) << r.out;
    r = sh(bin() + " sim-ep --config " + cfg + "qwen3-235b-a22b_config.json --nodes 4 --ranks-per-node 8 --link-gbps 400");
    EXPECT_NE(r.rc, 0);
}


}  // namespace
