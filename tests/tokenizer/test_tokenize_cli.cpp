// End-to-end: runs the built `moe` binary (MOE_BINARY) on the vocab-only gpt-2 and llama-spm GGUFs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tokenizer/vectors_util.h"

namespace fs = std::filesystem;

namespace {

const std::string kVocabDir = MOE_TEST_DATA_DIR "/vocab/";

struct CliResult {
    int rc = -1;
    std::string out;
};

CliResult run(const std::string& args) {
    const std::string cmd = std::string("'") + MOE_BINARY + "' " + args + " 2>/dev/null";
    CliResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string join_ids(const std::vector<int32_t>& ids, char sep) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? std::string(1, sep) : "") + std::to_string(ids[i]);
    return s;
}

class Cli : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("moe_tok_cli_" + std::to_string(::getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string file_with(const std::string& name, const std::string& content) {
        const std::string path = (dir_ / name).string();
        std::ofstream(path, std::ios::binary) << content;
        return path;
    }
    fs::path dir_;
};

}  // namespace

TEST_F(Cli, TokenizeGpt2) {
    const std::string m = kVocabDir + "ggml-vocab-gpt-2.gguf";
    CliResult r = run("tokenize -m '" + m + "' -p 'Hello world'");
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "15496,995\n");
    // Special-token text is text unless --parse-special.
    r = run("tokenize -m '" + m + "' -p '<|endoftext|>'");
    EXPECT_EQ(r.rc, 0);
    EXPECT_NE(r.out, "50256\n");
    r = run("tokenize -m '" + m + "' -p '<|endoftext|>' --parse-special");
    EXPECT_EQ(r.out, "50256\n");
}

TEST_F(Cli, TokenizeFileMatchesEveryGpt2Vector) {
    const std::string m = kVocabDir + "ggml-vocab-gpt-2.gguf";
    const auto cases = moe::tokenizer::test::read_vocab_cases(m);
    ASSERT_EQ(cases.size(), 46u);
    size_t i = 0;
    for (const auto& c : cases) {
        const std::string f = file_with("in" + std::to_string(i++) + ".txt", c.text);
        const CliResult r = run("tokenize -m '" + m + "' -f '" + f + "'");
        EXPECT_EQ(r.rc, 0);
        EXPECT_EQ(r.out, join_ids(c.ids, ',') + "\n") << "input '" << moe::tokenizer::test::escaped(c.text) << "'";
    }
}

TEST_F(Cli, BosAndNoBosOnSpm) {
    const std::string m = kVocabDir + "ggml-vocab-llama-spm.gguf";
    EXPECT_EQ(run("tokenize -m '" + m + "' -p 'Hello world'").out, "1,15043,3186\n");
    EXPECT_EQ(run("tokenize -m '" + m + "' -p 'Hello world' --no-bos").out, "15043,3186\n");
}

TEST_F(Cli, Detokenize) {
    const std::string g = kVocabDir + "ggml-vocab-gpt-2.gguf";
    CliResult r = run("detokenize -m '" + g + "' --ids 15496,995");
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "Hello world");
    const std::string ids = file_with("ids.txt", "1, 15043\n3186\n");
    r = run("detokenize -m '" + kVocabDir + "ggml-vocab-llama-spm.gguf' < '" + ids + "'");
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "Hello world");
}

TEST_F(Cli, DetokenizeCleanSpacesIsOptIn) {
    const std::string g = kVocabDir + "ggml-vocab-gpt-2.gguf";
    const CliResult t = run("tokenize -m '" + g + "' -p \"Hello , world . It 's\"");
    ASSERT_EQ(t.rc, 0);
    const std::string ids = file_with("clean.txt", t.out);
    EXPECT_EQ(run("detokenize -m '" + g + "' < '" + ids + "'").out, "Hello , world . It 's");  // lossless
    EXPECT_EQ(run("detokenize -m '" + g + "' --clean-spaces < '" + ids + "'").out, "Hello, world. It's");
}

TEST_F(Cli, Errors) {
    const std::string g = kVocabDir + "ggml-vocab-gpt-2.gguf";
    EXPECT_EQ(run("detokenize -m '" + g + "' --ids 50257").rc, 1);  // out of range
    EXPECT_EQ(run("detokenize -m '" + g + "' --ids 1,x").rc, 1);
    EXPECT_EQ(run("tokenize -m '" + (dir_ / "missing.gguf").string() + "' -p a").rc, 1);
    EXPECT_EQ(run("tokenize -p a").rc, 2);  // usage
    // A GGUF without tokenizer keys: a clear error, exit 1.
    const std::string not_gguf = file_with("junk.gguf", "definitely not a gguf file");
    EXPECT_EQ(run("tokenize -m '" + not_gguf + "' -p a").rc, 1);
}
