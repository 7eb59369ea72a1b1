// "moe gen files load in llama.cpp unchanged": every tiny preset in every gen type is loaded and
// run for a few tokens by llama.cpp's llama-completion, when a llama.cpp build is available
// (MOE_LLAMA_CPP_BIN=dir, default ../peers/llama.cpp/build/bin next to the shared folder);
// skipped otherwise. --no-repack: that build's CPU repack path dies with SIGILL on some machines
// for any Q8_0 model, including llama-quantize's own (docs/MODELS.md).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/dtype.h"
#include "model/gen.h"

using namespace moe;

TEST(LlamaCppCompat, TinyPresetsLoadAndGenerate) {
    const char* env = std::getenv("MOE_LLAMA_CPP_BIN");
    const std::string dir = env ? env : std::string(MOE_SHARED_DIR) + "/../peers/llama.cpp/build/bin";
    const std::string bin = dir + "/llama-completion";
    if (!std::filesystem::exists(bin)) GTEST_SKIP() << "no llama.cpp build at " << dir;
    for (const char* preset : {"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-olmoe"}) {
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
            SCOPED_TRACE(std::string(preset) + " " + dtype_name(t));
            model::GenSpec s;
            s.preset = preset;
            s.type = t;
            s.seed = 11;
            s.output = ::testing::TempDir() + "llamacpp_" + preset + ".gguf";
            // stdout (the text) and stderr (llama.cpp's asynchronous log) apart: interleaved, the
            // log can split the echoed prompt.
            const std::string log = ::testing::TempDir() + "llamacpp_log.txt";
            model::generate(s);
            const std::string cmd = "LD_LIBRARY_PATH=" + dir + " " + bin + " -m " + s.output +
                                    " -p 'hello world' -n 4 -no-cnv --temp 0 -t 1 -c 128 --no-repack 2>" + log +
                                    " </dev/null";
            // llama.cpp prints both the text and its log through an asynchronous logger that is
            // not drained at exit: on a loaded machine a tiny model can finish before anything is
            // printed (exit status 0, empty output). The exit status is reliable (a load failure
            // returns 1), so every attempt must exit 0, and one of up to 8 must show the text.
            bool printed = false;
            for (int attempt = 0; attempt < 8 && !printed; ++attempt) {
                FILE* p = popen(cmd.c_str(), "r");
                ASSERT_NE(p, nullptr);
                std::string out;
                char buf[4096];
                size_t n;
                while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
                const int st = pclose(p);
                std::ifstream lf(log);
                const std::string err((std::istreambuf_iterator<char>(lf)), {});
                ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << err.substr(err.size() > 3000 ? err.size() - 3000 : 0);
                EXPECT_EQ(err.find("error loading model"), std::string::npos);
                // The prompt echoed, then generated text.
                printed = out.rfind("hello world", 0) == 0 && out.size() > std::string("hello world").size();
            }
            EXPECT_TRUE(printed) << "llama.cpp never printed the prompt and generated text";
            std::remove(s.output.c_str());
        }
    }
}
