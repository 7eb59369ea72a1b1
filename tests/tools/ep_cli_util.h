#pragma once
// Helpers of the expert-parallel CLI tests (see ep_cli_util.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace moe::test_ep {

struct CliRun {
    int rc;
    std::string out, err;
    double seconds;
};

// mpirun prefix (root allowed, oversubscribed, shared-memory transport without CMA).
extern const std::string kMpirun;
extern const char* const kTokens;  // 12 token ids for eval
// Runs a shell command line (stdout captured, stderr to a file), killed after timeout_s.
CliRun sh(const std::string& line, int timeout_s = 60);
std::string bin();
std::string tmp(const std::string& name);
std::vector<float> read_f32(const std::string& path);
// A tiny preset model generated once per test suite (seed 5).
std::string model_for(const std::string& preset);
// " eval -m MODEL --tokens kTokens --logits-out OUT -t 1 --batch 5"
std::string eval_args(const std::string& model, const std::string& out);

}  // namespace moe::test_ep
