// Helpers of the expert-parallel CLI tests (test_ep_cli*.cpp): run mpirun / the moe binary
// (MOE_BINARY), read logits, generate the tiny preset models.
#include "ep_cli_util.h"

#include "common/temp_dir.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace moe::test_ep {


// vader's single-copy (CMA) mode needs ptrace rights that containers often lack: copy through the
// shared segment instead. Under ASan, leak checking is off in the ranks mpirun starts (-x): Open MPI
// unloads its components at MPI_Finalize, so its process-lifetime allocations are reported as
// leaks from unknown modules that no suppression can match. Address and UB checks stay on; the
// EP code itself is leak-checked in-process (tests/moe/test_moe_ep.cpp, ThreadGroup).
const std::string kMpirun =
    "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none "
    "-x ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 -x UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ";

// Runs a shell command line (stderr captured to a file), with `timeout` as a hard backstop.
CliRun sh(const std::string& line, int timeout_s) {
    const std::string err_path = tmp("stderr.txt");
    const std::string cmd = "timeout -s KILL " + std::to_string(timeout_s) + " " + line + " 2>" + err_path;
    CliRun r{-1, "", "", 0};
    const auto t0 = std::chrono::steady_clock::now();
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_path);
    r.err.assign(std::istreambuf_iterator<char>(e), {});
    return r;
}

std::string bin() { return std::string(MOE_BINARY); }
// In the binary's own folder (per process, removed at the end: common/temp_dir.h) and per test
// suite, so neither two binaries nor two runs of one binary (other build trees, Release and ASan at
// once) ever share a file: a shared stderr file once read back as NUL bytes under such a race.
std::string tmp(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return (moe::testutil::binary_temp_dir("ep-cli") / (std::string(info ? info->test_suite_name() : "ep") + "_" + name))
        .string();
}

std::vector<float> read_f32(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

std::string model_for(const std::string& preset) {
    const std::string path = tmp(preset + ".gguf");
    std::ifstream probe(path);
    if (!probe) {
        const CliRun g = sh(bin() + " gen " + preset + " --seed 5 -o " + path);
        EXPECT_EQ(g.rc, 0) << g.err;
    }
    return path;
}

const char* const kTokens = "3,17,5,9,100,42,7,250,11,64,1,2";

std::string eval_args(const std::string& model, const std::string& out) {
    return " eval -m " + model + " --tokens " + kTokens + " --logits-out " + out + " -t 1 --batch 5";
}

}  // namespace moe::test_ep
