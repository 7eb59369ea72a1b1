// Expert-parallel faults through the real binary (MOE_BINARY) under mpirun: placement-file,
// model and flag mismatches give one clear error before any work; a rank killed or stopped
// mid-run ends the job within a deadline.
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

TEST(EpCliErrors, PlacementErrorsBeforeAnyWork) {
    const std::string m = model_for("tiny-olmoe");
    auto write = [](const std::string& name, const std::string& text) {
        std::ofstream(tmp(name)) << text;
        return tmp(name);
    };
    auto layers = [](const std::string& expert0, int E) {
        std::string l = "[" + expert0;
        for (int e = 1; e < E; ++e) l += ", [[0, 1.0]]";
        return "[" + l + "], " + l + "]]";
    };
    const std::string head = "{\"format\": \"moe-placement-1\", \"n_ranks\": 2, \"n_layers\": 2, \"n_experts\": 8, ";
    struct Bad {
        std::string file, expect;
    } cases[] = {
        {write("missing.json", head + "\"layers\": [[[[0, 1.0]]], [[[0, 1.0]]]]}"), "every expert needs an entry"},
        {write("badrank.json", head + "\"layers\": " + layers("[[5, 1.0]]", 8) + "}"), "names rank 5, which does not exist"},
        {write("norank.json", head + "\"layers\": " + layers("[]", 8) + "}"), "is on no rank"},
        {write("shares.json", head + "\"layers\": " + layers("[[0, 0.5], [1, 0.2]]", 8) + "}"), "sum to"},
        {write("mismatch.json",
               "{\"format\": \"moe-placement-1\", \"n_ranks\": 2, \"n_layers\": 2, \"n_experts\": 16, \"layers\": " +
                   layers("[[0, 1.0]]", 16) + "}"),
         "but the model has 2 x 8"},
        {write("garbage.json", "{not json"), "not valid JSON"},
    };
    for (const Bad& b : cases) {
        const std::string out = tmp("never.bin");
        std::remove(out.c_str());
        // The file is checked before the rank count, so one rank is enough.
        const CliRun r = sh(kMpirun + "-np 1 " + bin() + eval_args(m, out) + " --ep --placement " + b.file);
        EXPECT_NE(r.rc, 0) << b.file;
        EXPECT_NE(r.err.find("[placement]"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(b.expect), std::string::npos) << b.expect << " in: " << r.err;
        EXPECT_FALSE(std::ifstream(out).good()) << "work was done despite " << b.file;
    }
    // A placement for 2 ranks run on 3.
    const std::string two = write("two.json", head + "\"layers\": " + layers("[[1, 1.0]]", 8) + "}");
    const CliRun r = sh(kMpirun + "-np 3 " + bin() + eval_args(m, tmp("never.bin")) + " --ep --placement " + two);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("made for 2 ranks, but 3 ranks are running"), std::string::npos) << r.err;
}

TEST(EpCliErrors, DifferentModelsOrFlagsDetectedAtStart) {
    const std::string a = model_for("tiny-olmoe"), b = model_for("tiny-mixtral");
    const std::string out = tmp("mm.bin");
    CliRun r = sh(kMpirun + "-np 1 " + bin() + eval_args(a, out) + " --ep : -np 1 " + bin() + eval_args(b, out) +
                  " --ep");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("the model file differs between ranks"), std::string::npos) << r.err;
    r = sh(kMpirun + "-np 1 " + bin() + eval_args(a, out) + " --ep : -np 1 " + bin() + eval_args(a, out) +
           " --ep --ep-compress bf16");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("(flags or placement file) differs between ranks"), std::string::npos) << r.err;
}

// Same size, same header and tensor table, one byte of the last tensor changed: the full-file hash
// (default) tells the two files apart before any work.
TEST(EpCliErrors, ChangedTensorByteDetectedAtStart) {
    const std::string a = model_for("tiny-olmoe"), b = tmp("changed.gguf");
    std::ifstream in(a, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    ASSERT_GT(bytes.size(), 100u);
    bytes[bytes.size() - 3] ^= 0x01;
    std::ofstream(b, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const std::string out = tmp("changed.bin");
    std::remove(out.c_str());
    const CliRun r = sh(kMpirun + "-np 1 " + bin() + eval_args(a, out) + " --ep : -np 1 " + bin() +
                        eval_args(b, out) + " --ep");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("the model file differs between ranks"), std::string::npos) << r.err;
    EXPECT_FALSE(std::ifstream(out).good());
}

// Rank 1 runs a long perplexity in the background of a shell and is killed (SIGKILL) or stopped
// (SIGSTOP) after 2 s. Killed: mpirun sees it die and ends rank 0. Stopped (a hang): rank 0's
// watchdog (--ep-timeout 3) stops it with a message naming the collective. Deadline: 40 s.
TEST(EpCliErrors, RankKilledOrStoppedMidRun) {
    const std::string m = model_for("tiny-qwen3moe");
    const std::string text = std::string(MOE_TEST_DATA_DIR) + "/text/tinyshakespeare.txt";
    const std::string job = bin() + " perplexity -m " + m + " -f " + text + " -t 1 --ctx 64 --ep --ep-timeout 3";
    for (const std::string sig : {"KILL", "STOP"}) {
        const std::string pidf = tmp("victim.pid");
        std::remove(pidf.c_str());
        const std::string victim = "sh -c '" + job + " >/dev/null & p=$!; echo $p > " + pidf + "; sleep 2; kill -" +
                                   sig + " $p; wait $p'";
        const CliRun r = sh(kMpirun + "-np 1 " + job + " : -np 1 " + victim, 60);
        // Clean up the victim if it survived (a stopped process), by its pid.
        std::ifstream pf(pidf);
        long pid = 0;
        if (pf >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
        EXPECT_NE(r.rc, 0) << sig;
        EXPECT_LT(r.seconds, 40.0) << sig;
        if (sig == "STOP")
            EXPECT_NE(r.err.find("[ep] rank 0: MPI"), std::string::npos) << r.err;
        else
            EXPECT_NE(r.err.find("exited with non-zero status"), std::string::npos) << r.err;
    }
}


}  // namespace
